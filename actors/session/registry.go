package session

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/actors"
)

// registry is the parent of every session actor: it spawns a chat's actor
// on first use, forwards messages keeping their sender, and runs the
// passivation handshake.
type registry struct {
	deps     *Deps
	children map[string]*actor.PID
	byPID    map[string]string // pid id → chat id
	// passivating chats buffer their messages until Terminated.
	passivating map[string][]buffered
	// retiring chats refuse every message until Retired; the callers of
	// Retire wait here for their session to stop.
	retiring map[string][]*actor.PID
}

type buffered struct {
	msg    any
	sender *actor.PID
}

// Props returns the props of the session registry, the parent of every
// session actor.
func Props(deps *Deps) *actor.Props {
	return actors.Props(deps.Log.With().Str("component", "registry").Logger(), func() actor.Actor {
		return &registry{deps: deps, children: map[string]*actor.PID{}, byPID: map[string]string{}, passivating: map[string][]buffered{}, retiring: map[string][]*actor.PID{}}
	}, actor.WithSupervisor(actor.NewOneForOneStrategy(10, 10*time.Second, actor.DefaultDecider)))
}

// Active counts live session actors (answer to *CountActive).
type CountActive struct{}

// ActiveCount answers CountActive.
type ActiveCount struct{ N int }

func (r *registry) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Envelope:
		r.route(ctx, m.ChatID, m.Msg, ctx.Sender())
	case *idle:
		r.passivate(ctx, m.chatID)
	case *Moved:
		if pid, ok := r.children[m.ChatID]; ok {
			ctx.Send(pid, &leftNode{})
		}
		r.passivate(ctx, m.ChatID)
	case *actor.Terminated:
		r.terminated(ctx, m.Who)
	case *Retire:
		r.retire(ctx, m.ChatID, ctx.Sender())
	case *Retired:
		delete(r.retiring, m.ChatID)
	case *CountActive:
		ctx.Respond(&ActiveCount{N: len(r.children)})
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	default:
		r.deps.Log.Warn().Str("type", typeName(m)).Msg("registry: unknown message")
	}
}

func (r *registry) route(ctx actor.Context, chatID string, msg any, sender *actor.PID) {
	if _, ok := r.retiring[chatID]; ok {
		refuse(ctx, sender)
		return
	}
	if buf, ok := r.passivating[chatID]; ok {
		r.passivating[chatID] = append(buf, buffered{msg, sender})
		return
	}
	pid, ok := r.children[chatID]
	if !ok {
		pid = r.spawn(ctx, chatID)
	}
	ctx.RequestWithCustomSender(pid, msg, sender)
}

func refuse(ctx actor.Context, sender *actor.PID) {
	if sender != nil {
		ctx.Send(sender, &Rejected{Err: ErrNotFound})
	}
}

// retire stops a chat's session (if one runs) and answers once it has.
// Messages held for a passivating session are refused: the chat is going.
func (r *registry) retire(ctx actor.Context, chatID string, sender *actor.PID) {
	waiting, already := r.retiring[chatID]
	for _, b := range r.passivating[chatID] {
		refuse(ctx, b.sender)
	}
	if _, ok := r.passivating[chatID]; ok {
		r.passivating[chatID] = nil
	}
	pid, live := r.children[chatID]
	if !live {
		r.retiring[chatID] = waiting
		if sender != nil {
			ctx.Send(sender, &RetireDone{})
		}
		return
	}
	r.retiring[chatID] = append(waiting, sender)
	if !already {
		ctx.Send(pid, &retire{})
	}
}

func (r *registry) spawn(ctx actor.Context, chatID string) *actor.PID {
	pid := ctx.Spawn(props(r.deps, chatID))
	r.children[chatID] = pid
	r.byPID[pid.Id] = chatID
	if r.deps.Metrics != nil {
		r.deps.Metrics.ActiveSessions(1)
	}
	return pid
}

func (r *registry) passivate(ctx actor.Context, chatID string) {
	pid, ok := r.children[chatID]
	if !ok {
		return
	}
	if _, already := r.passivating[chatID]; already {
		return
	}
	r.passivating[chatID] = nil
	// Poison is queued after everything the session already has, so nothing
	// sent to it before this point is lost.
	ctx.Poison(pid)
}

func (r *registry) terminated(ctx actor.Context, who *actor.PID) {
	chatID, ok := r.byPID[who.Id]
	if !ok {
		return
	}
	delete(r.byPID, who.Id)
	delete(r.children, chatID)
	if r.deps.Metrics != nil {
		r.deps.Metrics.ActiveSessions(-1)
	}
	for _, p := range r.retiring[chatID] {
		if p != nil {
			ctx.Send(p, &RetireDone{})
		}
	}
	if _, ok := r.retiring[chatID]; ok {
		r.retiring[chatID] = nil
	}
	waiting := r.passivating[chatID]
	delete(r.passivating, chatID)
	if len(waiting) == 0 {
		return
	}
	pid := r.spawn(ctx, chatID)
	for _, b := range waiting {
		ctx.RequestWithCustomSender(pid, b.msg, b.sender)
	}
}
