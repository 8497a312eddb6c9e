package fairshare

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

// waitQueued waits until s has n waiters. It is a barrier, not a clock: the
// goroutines asking are known to be on their way, and nothing is timed.
func waitQueued(s *Slots, n int) {
	for {
		s.mu.Lock()
		queued := len(s.ready)
		s.mu.Unlock()
		if queued == n {
			return
		}
		runtime.Gosched()
	}
}

// TestCancelledWaitersLeaveTheQueue: waiters whose context ends give up
// their places (the next slot goes to the one still waiting behind them)
// and leave no ticket, channel or tenant entry behind; a release called
// twice frees one slot.
func TestCancelledWaitersLeaveTheQueue(t *testing.T) {
	s := NewSlots(1, 1)
	release, err := s.Acquire(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 5)
	for range 5 {
		go func() {
			rel, err := s.Acquire(ctx, "b")
			if err == nil {
				rel()
			}
			errs <- err
		}()
	}
	waitQueued(s, 5)
	got := make(chan func(), 1)
	go func() {
		rel, err := s.Acquire(context.Background(), "a")
		if err != nil {
			t.Error(err)
		}
		got <- rel
	}()
	waitQueued(s, 6)
	cancel()
	for range 5 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v, want context.Canceled", err)
		}
	}
	s.mu.Lock()
	if len(s.ready) != 1 || s.share.Tenants() != 2 {
		t.Fatalf("after cancelling b's waiters: %d waiting, %d tenants (want x and a)", len(s.ready), s.share.Tenants())
	}
	s.mu.Unlock()
	release()
	release() // a second call must not free a second slot
	relA := <-got
	s.mu.Lock()
	if s.share.Held() != 1 || s.share.Tenants() != 1 {
		t.Fatalf("a holds the slot: %d held, %d tenants", s.share.Held(), s.share.Tenants())
	}
	s.mu.Unlock()
	relA()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.share.Held() != 0 || s.share.Tenants() != 0 || len(s.ready) != 0 {
		t.Fatalf("all released: %d held, %d tenants, %d waiting", s.share.Held(), s.share.Tenants(), len(s.ready))
	}
}
