package session

import (
	"fmt"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
)

// logPanics logs a panic in Receive with its stack, then panics on so the
// parent's supervision still restarts the actor (which reloads the chat
// from Badger). protoactor itself logs a recovery below Warn, stackless.
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
