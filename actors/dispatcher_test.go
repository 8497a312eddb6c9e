package actors

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/testkit"
)

// patience bounds every wait for an event; none of these tests measures time.
const patience = time.Minute

// eventually waits for cond, failing the test after patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(patience); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after %v", what, patience)
		}
	}
}

func stopNow(t *testing.T, d *Dispatcher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNewDispatcherDefaults(t *testing.T) {
	for _, tc := range []struct {
		throughput, floor int
		idle              time.Duration
		wantT, wantF      int
		wantIdle          time.Duration
	}{
		{0, 0, 0, DefaultThroughput, DefaultWorkerFloor, DefaultWorkerIdle},
		{-1, -1, -1, DefaultThroughput, DefaultWorkerFloor, DefaultWorkerIdle},
		{1, 2, time.Millisecond, 1, 2, time.Millisecond},
	} {
		d := NewDispatcher(tc.throughput, tc.floor, tc.idle)
		if d.Throughput() != tc.wantT || d.floor != tc.wantF || d.idleFor != tc.wantIdle {
			t.Errorf("NewDispatcher(%d, %d, %v) = throughput %d floor %d idle %v, want %d %d %v", tc.throughput, tc.floor, tc.idle,
				d.Throughput(), d.floor, d.idleFor, tc.wantT, tc.wantF, tc.wantIdle)
		}
		stopNow(t, d)
	}
}

// TestDispatcherScheduleNeverWaits schedules runs that block until the end
// of the test: Schedule returns for every one of them, whether the workers
// are all busy or the dispatcher has stopped, and every run starts.
func TestDispatcherScheduleNeverWaits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stopped bool
	}{{"every worker busy", false}, {"stopped", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const runs = 50
			d := NewDispatcher(0, 2, 0)
			if tc.stopped {
				stopNow(t, d)
			}
			release := make(chan struct{})
			var started sync.WaitGroup
			started.Add(runs)
			scheduled := make(chan struct{})
			go func() {
				for range runs {
					d.Schedule(func() { started.Done(); <-release })
				}
				close(scheduled)
			}()
			select {
			case <-scheduled:
			case <-time.After(patience):
				t.Fatal("Schedule waited for a busy worker")
			}
			started.Wait()
			if want := map[bool]int{false: runs, true: 0}[tc.stopped]; d.Workers() != want {
				t.Errorf("%d workers run %d blocked runs, want %d", d.Workers(), runs, want)
			}
			close(release)
			stopNow(t, d)
		})
	}
}

// busy schedules n runs on d that block until the returned channel closes,
// and waits until they all run.
func busy(d *Dispatcher, n int) chan struct{} {
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	for range n {
		d.Schedule(func() { started.Done(); <-release })
	}
	started.Wait()
	return release
}

func TestDispatcherStopEndsItsWorkers(t *testing.T) {
	before := goleak.IgnoreCurrent()
	d := NewDispatcher(0, 4, 0)
	release := busy(d, 10)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop while runs block = %v, want context.Canceled", err)
	}
	close(release)
	stopNow(t, d) // waits for every worker's goroutine to return
	if d.Workers() != 0 {
		t.Fatalf("%d workers after Stop", d.Workers())
	}
	testkit.NoGoroutineLeft(t, before)
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	<-ran // a late run still runs
}

func TestDispatcherIdleWorkersLeaveDownToTheFloor(t *testing.T) {
	d := NewDispatcher(0, 2, time.Millisecond)
	defer stopNow(t, d)
	close(busy(d, 10))
	eventually(t, "idle workers to leave", func() bool { return d.Workers() == 2 })
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	<-ran
}

// TestABoundedDispatcherQueuesRunsPastItsLimitInOrder: with every worker of
// a bounded dispatcher busy, Schedule still returns at once and no worker
// starts past the limit; the one worker then freed runs the queued runs in
// the order they came, stopped or not.
func TestABoundedDispatcherQueuesRunsPastItsLimitInOrder(t *testing.T) {
	for _, stop := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "stopped"}[stop], func(t *testing.T) {
			d := NewBoundedDispatcher(1) // the floor, 8, is the least limit
			releaseRest := busy(d, DefaultWorkerFloor-1)
			releaseOne := busy(d, 1)
			const queued = 50
			var order []int // appended by one worker at a time
			var ran sync.WaitGroup
			ran.Add(queued)
			for i := range queued {
				d.Schedule(func() { order = append(order, i); ran.Done() })
			}
			if n := d.Workers(); n != DefaultWorkerFloor {
				t.Fatalf("%d workers with every one busy and %d runs queued, want %d", n, queued, DefaultWorkerFloor)
			}
			stopped := make(chan error, 1)
			if stop {
				go func() { stopped <- d.Stop(context.Background()) }()
			}
			close(releaseOne)
			ran.Wait()
			close(releaseRest)
			for i, n := range order {
				if n != i {
					t.Fatalf("queued runs ran in the order %v", order)
				}
			}
			if stop {
				if err := <-stopped; err != nil {
					t.Fatal(err)
				}
				return
			}
			stopNow(t, d)
		})
	}
}

// recorder checks that no two runs of its mailbox overlap (the race
// detector sees its unsynchronised state too) and keeps the order of what
// it receives.
type recorder struct {
	inside atomic.Int32
	got    []int
	done   chan<- []int
	want   int
}

func (r *recorder) Receive(c actor.Context) {
	n, ok := c.Message().(int)
	if !ok {
		return
	}
	if r.inside.Add(1) != 1 {
		panic("two runs of one mailbox at once")
	}
	defer r.inside.Add(-1)
	r.got = append(r.got, n)
	if len(r.got) == r.want {
		r.done <- r.got
	}
}

// TestDispatcherKeepsMailboxOrder: each sender's messages arrive in the
// order it sent them, one at a time, with a throughput of 1 so every
// message is a run of its own.
func TestDispatcherKeepsMailboxOrder(t *testing.T) {
	const senders, each = 4, 500
	d := NewDispatcher(1, 2, time.Millisecond)
	sys := NewSystem(zerolog.Nop())
	done := make(chan []int, 1)
	pid := sys.Root.Spawn(Props(zerolog.Nop(), func() actor.Actor { return &recorder{done: done, want: senders * each} }, OnDispatcher(d)))
	var send sync.WaitGroup
	for s := range senders {
		send.Go(func() {
			for i := range each {
				sys.Root.Send(pid, s*each+i)
			}
		})
	}
	send.Wait()
	var got []int
	select {
	case got = <-done:
	case <-time.After(patience):
		t.Fatal("the actor did not receive every message")
	}
	next := make([]int, senders)
	for _, n := range got {
		s, i := n/each, n%each
		if i != next[s] {
			t.Fatalf("sender %d: got message %d, want %d", s, i, next[s])
		}
		next[s]++
	}
	if err := sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	sys.Shutdown()
	stopNow(t, d)
}

// TestAnIdleWorkerKeepsItsGrownStack: a worker idle between runs keeps
// the stack a deep run grew. A GC meanwhile moved (halved) the stack of a
// worker idle at its top, and the next deep run copied it back up.
func TestAnIdleWorkerKeepsItsGrownStack(t *testing.T) {
	d := NewDispatcher(1, 1, time.Hour)
	defer stopNow(t, d)
	got := make(chan uintptr)
	run := func(deep bool) uintptr {
		d.Schedule(func() { got <- frameAt(deep) })
		return <-got
	}
	grown := run(true)
	eventually(t, "the worker idle", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.idle) == 1
	})
	runtime.GC()
	runtime.GC()
	if at := run(false); at != grown {
		t.Fatalf("a run's frame is at %#x after a GC, %#x before: the idle worker's stack moved", at, grown)
	}
}

// frameAt is where its frame is on the stack of the goroutine that runs
// it, once a deep call (some 24 KB) has grown that stack when deep.
//
//go:noinline
func frameAt(deep bool) uintptr {
	var here byte
	if deep {
		deepCall(24)
	}
	return uintptr(unsafe.Pointer(&here))
}

//go:noinline
func deepCall(n int) byte {
	var frame [1 << 10]byte
	if n > 0 {
		frame[n] = deepCall(n - 1)
	}
	return frame[n/2]
}

// BenchmarkDeepRunAfterGC is a GC and then a deep run (some 24 KB of
// stack) on a worker idle through it, as a model call's run after the
// cycles since its worker's last one; moves/op counts the GCs that moved
// (halved) the worker's stack, which the deep run then copied back up.
func BenchmarkDeepRunAfterGC(b *testing.B) {
	d := NewDispatcher(1, 1, time.Hour)
	defer func() { _ = d.Stop(context.Background()) }()
	done := make(chan uintptr)
	run := func(deep bool) uintptr {
		d.Schedule(func() { done <- frameAt(deep) })
		return <-done
	}
	grown, moves := run(true), 0
	for b.Loop() {
		runtime.GC()
		if run(false) != grown {
			moves++
		}
		grown = run(true)
	}
	b.ReportMetric(float64(moves)/float64(b.N), "moves/op")
}
