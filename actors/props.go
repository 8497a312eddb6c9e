// Package actors holds what every agentd actor shares: the one way to build
// an actor's props (Props) and an actor system (NewSystem). Each actor
// package exports Props(Config) built on Props here, so every actor logs a
// panic the same way before its supervisor restarts it.
package actors

import (
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
)

// Props returns the props of an actor made by produce, with log receiving
// the actor's panics (with stacks). opts add to that, e.g. a supervisor for
// the actor's children.
func Props(log zerolog.Logger, produce func() actor.Actor, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(produce, append([]actor.PropsOption{actor.WithReceiverMiddleware(logPanics(log))}, opts...)...)
}

// OnDispatcher runs an actor's mailbox on d (a nil d leaves protoactor's
// default dispatcher).
func OnDispatcher(d *Dispatcher) actor.PropsOption {
	if d == nil {
		return func(*actor.Props) {}
	}
	return actor.WithDispatcher(d)
}

// NewSystem returns an actor system whose own log (slog) goes into log at
// Warn and above; protoactor's Info lines (started, dead letters) are noise.
func NewSystem(log zerolog.Logger) *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(zerolog.NewSlogHandler(log.With().Str("component", "protoactor").Logger().Level(zerolog.WarnLevel)))
	}))
}

// logPanics logs a panic in Receive with its stack, then panics on so the
// parent's supervision still restarts the actor. protoactor itself logs a
// recovery below Warn, stackless.
func logPanics(log zerolog.Logger) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			defer func() {
				if r := recover(); r != nil {
					log.Error().Str("actor", c.Self().Id).Str("message", fmt.Sprintf("%T", env.Message)).
						Str("panic", fmt.Sprint(r)).Str("stack", string(debug.Stack())).Msg("actor panicked; restarting it")
					panic(r)
				}
			}()
			next(c, env)
		}
	}
}
