package actors

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Dispatcher runs mailbox runs on warm worker goroutines. protoactor's
// default dispatcher starts a new goroutine (an 8 KB stack) for every
// mailbox run, and a session's turn grows it to tens of KB each time: that
// growth (runtime.newstack, copystack) was 8% of the CPU of a turn at
// 10,000 chats. A worker keeps its grown stack between runs (the GC halves
// an idle one at most once per cycle).
//
// Schedule never waits: it hands fn to a worker that is idle right now, or
// starts one more. A worker idle for longer than the idle time goes away
// unless only the floor is left, so a burst does not leave its goroutines
// behind. Ordering is untouched: protoactor's mailbox schedules itself at
// most once at a time (its scheduler status), whichever dispatcher runs it.
//
// The owner of the actor system owns the dispatcher: Stop it after the
// actors using it have stopped (protoactor's Shutdown does not stop them).
// A Dispatcher is safe for concurrent use.
type Dispatcher struct {
	throughput int
	floor      int32
	idleFor    time.Duration

	jobs    chan func() // unbuffered: a send succeeds only into an idle worker
	stop    chan struct{}
	workers atomic.Int32

	mu      sync.Mutex // orders starting a worker against Stop
	stopped bool
	group   Group
}

var _ actor.Dispatcher = (*Dispatcher)(nil)

// Dispatcher defaults: protoactor's throughput, a floor of as many workers
// as a small machine runs at once, and an idle time long enough to span the
// gaps between a chat's messages under load.
const (
	DefaultThroughput  = 300
	DefaultWorkerFloor = 8
	DefaultWorkerIdle  = 2 * time.Second
)

// NewDispatcher returns a running dispatcher whose mailboxes process up to
// throughput messages a run (as protoactor's), keeping floor workers however
// long they idle and the others for idleFor. Zero values take the defaults.
func NewDispatcher(throughput, floor int, idleFor time.Duration) *Dispatcher {
	if throughput <= 0 {
		throughput = DefaultThroughput
	}
	if floor <= 0 {
		floor = DefaultWorkerFloor
	}
	if idleFor <= 0 {
		idleFor = DefaultWorkerIdle
	}
	return &Dispatcher{throughput: throughput, floor: int32(floor), idleFor: idleFor, jobs: make(chan func()), stop: make(chan struct{})}
}

// Throughput is how many messages a mailbox processes before it yields.
func (d *Dispatcher) Throughput() int { return d.throughput }

// Schedule runs fn on an idle worker, or on a new one when none is idle.
// After Stop it runs fn on a goroutine of its own, as protoactor's default
// dispatcher does, so a late message is still processed.
func (d *Dispatcher) Schedule(fn func()) {
	select {
	case d.jobs <- fn:
		return
	default:
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		go fn()
		return
	}
	d.workers.Add(1)
	d.group.Go(func() { d.work(fn) })
}

// work runs fn, then whatever it is handed, until it has idled for idleFor
// above the floor or the dispatcher stops.
func (d *Dispatcher) work(fn func()) {
	idle := time.NewTimer(d.idleFor)
	defer idle.Stop()
	for ; fn != nil; fn = d.next(idle) {
		fn()
	}
}

// next waits for the worker's next run; nil means the worker ends.
func (d *Dispatcher) next(idle *time.Timer) func() {
	for {
		idle.Reset(d.idleFor)
		select {
		case fn := <-d.jobs:
			return fn
		case <-idle.C:
			if d.leave() {
				return nil
			}
		case <-d.stop:
			d.workers.Add(-1)
			return nil
		}
	}
}

// leave counts a worker out if more than the floor are left.
func (d *Dispatcher) leave() bool {
	for {
		n := d.workers.Load()
		if n <= d.floor {
			return false
		}
		if d.workers.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// Workers is how many workers are running.
func (d *Dispatcher) Workers() int { return int(d.workers.Load()) }

// Stop tells the workers to end once their current run returns (a run ends
// when its mailbox is empty or its throughput is spent) and waits for them
// until ctx ends. It is idempotent; Schedule keeps working after it.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	if !d.stopped {
		d.stopped = true
		close(d.stop)
	}
	d.mu.Unlock()
	if !d.group.WaitContext(ctx) {
		return fmt.Errorf("dispatcher: %d workers still running: %w", d.Workers(), ctx.Err())
	}
	return nil
}
