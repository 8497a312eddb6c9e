package hub

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/actors/session"
)

// replyBox is where a chat's session answers a submitted message: a
// process of the actor system, as protoactor's futures are, that hands the
// one answer straight to the caller's channel. A future would need a
// goroutine of the hub to wait on it beside the caller (who may leave), and
// each hand-off wakes a goroutine (BENCHMARKS.md, "Twenty-fourth pass").
// Any answer but an accepted turn, or none within the timeout, calls
// refused, the caller there or not: the tenant's turn slot is the turn's
// until it ends, and a refused turn never starts.
type replyBox struct {
	sys     *actor.ActorSystem
	pid     *actor.PID
	c       chan reply // the answer, once
	once    sync.Once
	timer   atomic.Pointer[time.Timer] // set once made: a timer that fires first finds none to stop
	refused func()
}

// reply is a session's answer, or actor.ErrTimeout.
type reply struct {
	res any
	err error
}

func newReplyBox(sys *actor.ActorSystem, timeout time.Duration, refused func()) *replyBox {
	b := &replyBox{sys: sys, c: make(chan reply, 1), refused: refused}
	b.pid, _ = sys.ProcessRegistry.Add(b, "submit"+sys.ProcessRegistry.NextId()) // NextId is unique: Add cannot collide
	b.timer.Store(time.AfterFunc(timeout, func() { b.settle(reply{err: actor.ErrTimeout}) }))
	return b
}

// SendUserMessage takes the session's (or the registry's) answer.
func (b *replyBox) SendUserMessage(_ *actor.PID, message any) {
	_, msg, _ := actor.UnwrapEnvelope(message)
	b.settle(reply{res: msg})
}

// SendSystemMessage: a reply box watches nothing and is told nothing.
func (*replyBox) SendSystemMessage(*actor.PID, any) {}

// Stop: the box leaves the registry once answered or timed out.
func (*replyBox) Stop(*actor.PID) {}

// settle takes the first answer; a later one (after the timeout) goes
// nowhere, as a late reply to a future does.
func (b *replyBox) settle(r reply) {
	b.once.Do(func() {
		if t := b.timer.Load(); t != nil {
			t.Stop()
		}
		b.sys.ProcessRegistry.Remove(b.pid)
		if _, ok := r.res.(*session.TurnAccepted); !ok {
			b.refused()
		}
		b.c <- r
	})
}
