package session

import (
	"github.com/asynkron/protoactor-go/actor"
)

// A turn's two synced writes — the person's message before the turn is
// accepted, the answer with its snapshot before the turn completes — are
// awaited without holding a goroutine in Receive. The session suspends its
// mailbox's user messages (protoactor's SuspendMailbox, the one the
// supervisor uses around a failure), the write runs off the mailbox, and
// its result comes back as a continuation (protoactor's ReenterAfter: a
// system message, so it runs while user messages are held) that finishes
// the step and resumes the mailbox. No other message of the chat runs in
// between, as when Receive waited; but a run no longer parks a worker for
// a sync, which at 10,000 chats was a parked, deep stack per starting and
// per ending turn (BENCHMARKS.md, "Twentieth pass").

// awaiting is a write the mailbox is held for.
type awaiting struct {
	fut  *actor.Future
	then func(res any)
	sys  *actor.ActorSystem
	self *actor.PID
}

// await runs write on a worker of s and then, in the actor's context and
// before any user message that arrives meanwhile, then with write's result.
// A stopping session runs both at once: nothing may be left to a mailbox
// that is going away.
func await[R any](s *session, ctx actor.Context, write func() R, then func(ctx actor.Context, res R)) {
	if s.stopping {
		then(ctx, write())
		return
	}
	sys, self := ctx.ActorSystem(), ctx.Self()
	fut := actor.NewFuture(sys, -1) // no timeout: a queued write is always waited for
	a := &awaiting{fut: fut, then: func(res any) { then(ctx, res.(R)) }, sys: sys, self: self}
	s.awaiting = a
	ctx.ReenterAfter(fut, func(res any, _ error) {
		if s.awaiting != a {
			return // settled by stop, whose restart resumed the mailbox
		}
		s.awaiting = nil
		a.then(res)
		if s.awaiting == nil { // then may have started another wait
			tellMailbox(sys, self, &actor.ResumeMailbox{})
		}
	})
	tellMailbox(sys, self, &actor.SuspendMailbox{})
	root := sys.Root
	s.work.GoOn(s.deps.Workers, func() { root.Send(fut.PID(), write()) })
}

// settle waits for the write the mailbox is held for, if any, runs its
// continuation now and lets the held messages go on (to dead letters, once
// stopped): a stopping session ends the turn as that write left it.
func (s *session) settle() {
	a := s.awaiting
	if a == nil {
		return
	}
	s.awaiting = nil
	res, _ := a.fut.Result()
	a.then(res)
	tellMailbox(a.sys, a.self, &actor.ResumeMailbox{})
}

// tellMailbox sends a system message to pid's own mailbox.
func tellMailbox(sys *actor.ActorSystem, pid *actor.PID, msg any) {
	if p, ok := sys.ProcessRegistry.Get(pid); ok {
		p.SendSystemMessage(pid, msg)
	}
}
