package actors

import (
	"context"
	"sync"
	"time"
)

// Group owns the goroutines an actor (or the hub) starts for long I/O — a
// model call, a tool, a fold — so that stopping can wait for them. The stop
// rule of every agentd actor: on *actor.Stopping cancel the context the
// goroutines run under, then Wait, bounded; what outlives the bound is
// logged by the caller, never silently left behind. The zero value is ready
// to use.
type Group struct{ wg sync.WaitGroup }

// Go runs f in a goroutine of the group.
func (g *Group) Go(f func()) { g.wg.Go(f) }

// Wait waits for every goroutine of the group, at most d, and reports
// whether they all ended.
func (g *Group) Wait(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return g.WaitContext(ctx)
}

// WaitContext waits for every goroutine of the group until ctx ends, and
// reports whether they all ended. After a false the group's goroutines
// still end on their own (their context is cancelled); only the wait gives
// up.
func (g *Group) WaitContext(ctx context.Context) bool {
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
