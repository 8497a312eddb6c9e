package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Dispatcher runs mailbox runs on warm worker goroutines. protoactor's
// default dispatcher starts a new goroutine (a 2 KB stack) for every
// mailbox run, and a session's turn grows it to tens of KB each time: that
// growth (runtime.newstack, copystack) was 8% of the CPU of a turn at
// 10,000 chats. A worker keeps its grown stack between runs: it runs and
// idles idleHold down its stack, so the GC does not halve it meanwhile.
//
// Schedule never waits: it hands fn to the worker idle most recently (the
// warmest stack and cache), or starts one more. Each worker waits on its
// own channel, so thousands of them (runs that wait for a sync) share no
// wait queue. Workers idle for longer than the idle time go away, oldest
// first, down to the floor, so a burst does not leave its goroutines
// behind. Ordering is untouched: protoactor's mailbox schedules itself at
// most once at a time (its scheduler status), whichever dispatcher runs it.
//
// The owner of the actor system owns the dispatcher: Stop it after the
// actors using it have stopped (protoactor's Shutdown does not stop them).
// A Dispatcher is safe for concurrent use.
type Dispatcher struct {
	throughput int
	floor      int
	idleFor    time.Duration

	// limit bounds the workers (0: none); past it runs wait in queue, in
	// the order they came, for the next worker done with its run.
	limit int

	mu      sync.Mutex
	idle    []*worker // most recently idle last: the warmest stack runs next
	queue   []func()
	workers int
	stopped bool
	stop    chan struct{} // ends the trimmer; workers wait on their own channel
	group   Group
}

// worker is an idle worker's door: a run, or a closed channel to end.
type worker struct {
	runs  chan func() // buffered 1: Schedule hands a run over without waiting
	since time.Time
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
	d := &Dispatcher{throughput: throughput, floor: floor, idleFor: idleFor, stop: make(chan struct{})}
	d.group.Go(d.trim)
	return d
}

// NewBoundedDispatcher is NewDispatcher with the defaults and at most limit
// workers, for runs that do not wait on I/O (the sessions' mailboxes, whose
// writes and reads are awaited off the mailbox): a burst of 10,000 runs then
// waits for a few warm workers instead of starting 10,000 goroutines whose
// stacks each grow. A run that waits holds its worker meanwhile, so a
// dispatcher whose runs wait on each other must not be bounded.
func NewBoundedDispatcher(limit int) *Dispatcher {
	d := NewDispatcher(0, 0, 0)
	d.limit = max(limit, d.floor)
	return d
}

// Throughput is how many messages a mailbox processes before it yields.
func (d *Dispatcher) Throughput() int { return d.throughput }

// Schedule runs fn on the worker idle most recently, or on a new one when
// none is idle. After Stop it runs fn on a goroutine of its own, as
// protoactor's default dispatcher does, so a late message is still
// processed.
func (d *Dispatcher) Schedule(fn func()) {
	d.mu.Lock()
	if n := len(d.idle); n > 0 {
		w := d.idle[n-1]
		d.idle[n-1] = nil
		d.idle = d.idle[:n-1]
		d.mu.Unlock()
		w.runs <- fn // off the idle stack, w is this run's alone: no one else sends or closes
		return
	}
	defer d.mu.Unlock()
	if d.stopped {
		go fn()
		return
	}
	if d.limit > 0 && d.workers >= d.limit {
		d.queue = append(d.queue, fn)
		return
	}
	d.workers++
	w := &worker{runs: make(chan func(), 1)}
	w.runs <- fn // not captured: a worker would keep its first run's closure alive
	d.group.Go(func() { d.work(w) })
}

// idleHold is how far down its stack a worker runs and idles. The GC
// halves the stack of a goroutine that uses less than a quarter of it,
// and a model call's run grows a worker's to 32–64 KB through the SDK and
// net/http: a worker idling with a few hundred bytes in use was halved
// every cycle and regrew, by copying, on its next run. Below its runs,
// the hold is zeroed once, when the worker starts.
const idleHold = 16 << 10

// work runs serve idleHold down its stack.
func (d *Dispatcher) work(w *worker) {
	var hold [idleHold]byte
	holdStack(&hold)
	d.serve(w)
}

// holdStack keeps hold on the stack: the compiler drops an array nothing
// reads.
//
//go:noinline
func holdStack(*[idleHold]byte) {}

// serve runs what w is handed, and then what is queued, until w is
// trimmed or the dispatcher stops.
func (d *Dispatcher) serve(w *worker) {
	for fn := range w.runs {
		for fn != nil {
			fn()
			var ok bool
			if fn, ok = d.rest(w); !ok {
				return
			}
		}
	}
}

// rest returns the oldest queued run for w to go on with, else puts w on
// the idle stack, or counts it out when the dispatcher has stopped.
func (d *Dispatcher) rest(w *worker) (next func(), ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.queue) > 0 {
		next = d.queue[0]
		d.queue[0] = nil
		d.queue = d.queue[1:]
		return next, true
	}
	if d.stopped {
		d.workers--
		return nil, false
	}
	w.since = time.Now()
	d.idle = append(d.idle, w)
	return nil, true
}

// trim ends, every half idle time, the workers idle for longer than the
// idle time, oldest first, down to the floor.
func (d *Dispatcher) trim() {
	tick := time.NewTicker(max(d.idleFor/2, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-d.stop:
			return
		case now := <-tick.C:
			d.trimBefore(now.Add(-d.idleFor))
		}
	}
}

func (d *Dispatcher) trimBefore(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for n < len(d.idle) && d.workers > d.floor && d.idle[n].since.Before(t) {
		close(d.idle[n].runs)
		d.workers--
		n++
	}
	rest := copy(d.idle, d.idle[n:])
	clear(d.idle[rest:])
	d.idle = d.idle[:rest]
}

// Workers is how many workers are running.
func (d *Dispatcher) Workers() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.workers
}

// Stop ends the idle workers and the others once their current run
// returns (a run ends when its mailbox is empty or its throughput is
// spent), and waits for them until ctx ends. It is idempotent; Schedule
// keeps working after it.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	if !d.stopped {
		d.stopped = true
		close(d.stop)
		for _, w := range d.idle {
			close(w.runs)
			d.workers--
		}
		d.idle = nil
	}
	d.mu.Unlock()
	if !d.group.WaitContext(ctx) {
		return fmt.Errorf("dispatcher: %d workers still running: %w", d.Workers(), ctx.Err())
	}
	return nil
}
