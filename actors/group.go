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

// GoOn runs f on a warm worker of d, in the group (on a goroutine of its
// own when d is nil): a worker's stack is already grown for a call that
// goes deep, such as a model call through an SDK and net/http.
func (g *Group) GoOn(d *Dispatcher, f func()) {
	if d == nil {
		g.Go(f)
		return
	}
	g.wg.Add(1)
	d.Schedule(func() {
		defer g.wg.Done()
		f()
	})
}

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
