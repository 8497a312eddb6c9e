package session

import (
	"context"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors"
)

// awaitOnce is a message for BenchmarkAwait's actor: one await, whose
// continuation signals done.
type awaitOnce struct{ done chan<- struct{} }

// BenchmarkAwait is one await round trip, the plumbing of each of a turn's
// synced writes: the mailbox held, the result delivered to a future from
// another goroutine, the continuation run and the mailbox resumed, on the
// sessions' dispatcher as the hub runs them. The write itself reports at
// once.
func BenchmarkAwait(b *testing.B) {
	sys := actors.NewSystem(zerolog.Nop())
	d := actors.NewBoundedDispatcher(1)
	defer func() { _ = d.Stop(context.Background()) }()
	s := &session{}
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*awaitOnce); ok {
			await(s, ctx, func(done func(written)) { go done(written{}) }, func(actor.Context, written) { m.done <- struct{}{} })
		}
	}, actors.OnDispatcher(d)))
	defer func() { _ = sys.Root.StopFuture(pid).Wait() }()
	done := make(chan struct{}, 1)
	b.ReportAllocs()
	for b.Loop() {
		sys.Root.Send(pid, &awaitOnce{done: done})
		<-done
	}
}
