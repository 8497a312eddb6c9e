package session

import (
	"fmt"
	"sync/atomic"
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
	// failing holds each live session's verdict (HandleFailure).
	failing map[string]*verdict
}

// maxRestarts and restartWindow bound a session's restarts: one that
// panics more often is given up (HandleFailure).
const (
	maxRestarts   = 10
	restartWindow = 10 * time.Second
)

// verdict is set, by the registry, on a session it gave up; the producer
// of the session's next instance reads it (on the session's goroutine).
type verdict struct{ gaveUp atomic.Pointer[error] }

// err is why the session was given up, or nil.
func (v *verdict) err() error {
	if e := v.gaveUp.Load(); e != nil {
		return *e
	}
	return nil
}

type buffered struct {
	msg    any
	sender *actor.PID
}

// Props returns the props of the session registry, the parent of every
// session actor.
func Props(deps *Deps) *actor.Props {
	return actors.Props(deps.Log.With().Str("component", "registry").Logger(), func() actor.Actor {
		return &registry{deps: deps, children: map[string]*actor.PID{}, byPID: map[string]string{}, passivating: map[string][]buffered{},
			retiring: map[string][]*actor.PID{}, failing: map[string]*verdict{}}
	})
}

var _ actor.SupervisorStrategy = (*registry)(nil)

// HandleFailure supervises the sessions (protoactor asks the parent actor
// before its props' strategy): a session that panicked is restarted, at
// most maxRestarts times within restartWindow. Past that it is given up:
// logged once, with the panic, and restarted one last time as a
// stand-in (given) that refuses what waits in its mailbox with ErrFailed
// and stops; the registry refuses the chat's messages until then, and the
// next wakes it afresh. protoactor's one-for-one strategy stopped the
// child instead, which dropped its mailbox's callers unanswered and reset
// its failure count, so a stop that panicked restarted it from zero.
func (r *registry) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, _ any) {
	chatID, ok := r.byPID[child.Id]
	v := r.failing[chatID]
	if !ok || v.err() != nil { // the stand-in panicked: nothing is left to try
		sup.StopChildren(child)
		return
	}
	rs.Fail()
	n := rs.NumberOfFailures(restartWindow)
	if n > maxRestarts {
		err := fmt.Errorf("%w (it panicked %d times within %s)", ErrFailed, n, restartWindow)
		v.gaveUp.Store(&err)
		r.deps.Log.Error().Str("chat_id", chatID).Str("panic", fmt.Sprint(reason)).Int("panics", n).Dur("within", restartWindow).
			Msg("registry: a session panicked past its restart bound; gave up, it refuses what waits and stops")
	}
	sup.RestartChildren(child)
}

// given stands in for a session given up (HandleFailure): it refuses every
// request its mailbox holds, then stops (a Poison behind them).
type given struct{ err error }

func (g *given) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Poison(ctx.Self())
	case *retire:
		ctx.Stop(ctx.Self())
	case *SubmitTurn:
		pending{msg: m, sender: ctx.Sender()}.refuse(ctx, g.err)
	default:
		if ctx.Sender() != nil {
			ctx.Respond(&Rejected{Err: g.err})
		}
	}
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
		refuse(ctx, sender, ErrNotFound)
		return
	}
	if v, ok := r.failing[chatID]; ok && v.err() != nil {
		refuse(ctx, sender, v.err())
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

func refuse(ctx actor.Context, sender *actor.PID, err error) {
	if sender != nil {
		ctx.Send(sender, &Rejected{Err: err})
	}
}

// retire stops a chat's session and answers once it has. A chat whose
// session is not running is woken to be stopped: a turn a restart left
// paused (in its snapshot) then ends as deleted, told to its watchers
// before chat.deleted, as a running session's does. Messages held for a
// passivating session are refused: the chat is going.
func (r *registry) retire(ctx actor.Context, chatID string, sender *actor.PID) {
	waiting, already := r.retiring[chatID]
	for _, b := range r.passivating[chatID] {
		refuse(ctx, b.sender, ErrNotFound)
	}
	if _, ok := r.passivating[chatID]; ok {
		r.passivating[chatID] = nil
	}
	pid, live := r.children[chatID]
	switch {
	case !live && already: // its deletion under way stopped it
		if sender != nil {
			ctx.Send(sender, &RetireDone{})
		}
		return
	case !live:
		pid = r.spawn(ctx, chatID)
	}
	r.retiring[chatID] = append(waiting, sender)
	if !already {
		ctx.Send(pid, &retire{})
	}
}

func (r *registry) spawn(ctx actor.Context, chatID string) *actor.PID {
	v := &verdict{}
	pid := ctx.Spawn(props(r.deps, chatID, v))
	r.children[chatID] = pid
	r.failing[chatID] = v
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
	delete(r.failing, chatID)
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
