package session

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
)

// A turn's two synced writes — the person's message before the turn is
// accepted, the answer with its snapshot before the turn completes — are
// awaited without holding a goroutine in Receive. The session suspends its
// mailbox's user messages (protoactor's SuspendMailbox, the one the
// supervisor uses around a failure), the write is queued on the store's
// writer, and the writer's report comes back as a continuation
// (protoactor's ReenterAfter: a system message, so it runs while user
// messages are held) that finishes the step and resumes the mailbox. No
// other message of the chat runs in between, as when Receive waited; but
// a run no longer parks a worker for a sync, which at 10,000 chats was a
// parked, deep stack per starting and per ending turn (BENCHMARKS.md,
// "Twentieth pass"), and no worker relays the report either: each hand-off
// between goroutines wakes one, on this machine's second core as often as
// not ("Twenty-fourth pass").

// awaiting is a write the mailbox is held for.
type awaiting struct {
	fut     *actor.Future
	then    func(res any)
	mailbox actor.Process
	self    *actor.PID
}

// await starts an operation that reports its result once through done —
// a store's write (its then), or work on a worker (onWorker) — and then,
// in the actor's context and before any user message that arrives
// meanwhile, runs then with that result. A stopping session waits for it
// at once: nothing may be left to a mailbox that is going away. The result
// travels to a future as a message, so R is a struct, never an interface
// such as error: a nil one would never arrive.
func await[R any](s *session, ctx actor.Context, start func(done func(R)), then func(ctx actor.Context, res R)) {
	if s.stopping {
		res := make(chan R, 1)
		start(func(r R) { res <- r })
		then(ctx, <-res)
		return
	}
	sys, self := ctx.ActorSystem(), ctx.Self()
	if s.mailbox == nil {
		// Looked up once: the registry's lookup, twice an await, showed
		// in the scale bench's profile (issue 20).
		s.mailbox, _ = sys.ProcessRegistry.Get(self)
	}
	fut := actor.NewFuture(sys, -1) // no timeout: a queued write is always waited for
	a := &awaiting{fut: fut, then: func(res any) { then(ctx, res.(R)) }, mailbox: s.mailbox, self: self}
	s.awaiting = a
	ctx.ReenterAfter(fut, func(res any, _ error) {
		if s.awaiting != a {
			return // settled by stop, whose restart resumed the mailbox
		}
		s.awaiting = nil
		a.then(res)
		if s.awaiting == nil { // then may have started another wait
			a.mailbox.SendSystemMessage(self, &actor.ResumeMailbox{})
		}
	})
	a.mailbox.SendSystemMessage(self, &actor.SuspendMailbox{})
	root := sys.Root
	start(func(r R) { root.Send(fut.PID(), r) })
}

// afterWait runs f once the wait the mailbox is held for, if any, has run
// its continuation and any wait that started: a handler that may have
// started a wait starts its next one here, as await holds one at a time.
func (s *session) afterWait(ctx actor.Context, f func(ctx actor.Context)) {
	a := s.awaiting
	if a == nil {
		f(ctx)
		return
	}
	then := a.then
	a.then = func(res any) {
		then(res)
		s.afterWait(ctx, f)
	}
}

// onWorker is await's start for work that blocks: f runs on a worker of s.
func onWorker[R any](s *session, f func() R) func(done func(R)) {
	return func(done func(R)) { s.work.GoOn(s.deps.Workers, func() { done(f()) }) }
}

// written is a write's outcome, for await: a struct, so never nil.
type written struct{ err error }

// writeThen runs write on a worker of s, the mailbox held (await), and
// then then with its error: a synced write of the chat's that no turn's
// write carries (a pause's snapshot, a turn's problem, a patch, a fold's
// snapshot) parks no
// worker of the sessions' dispatcher, and still nobody hears of what it
// stores before it is stored.
func (s *session) writeThen(ctx actor.Context, write func(ctx context.Context) error, then func(ctx actor.Context, err error)) {
	await(s, ctx, onWorker(s, func() written { return written{write(context.Background())} }), func(ctx actor.Context, w written) { then(ctx, w.err) })
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
	a.mailbox.SendSystemMessage(a.self, &actor.ResumeMailbox{})
}
