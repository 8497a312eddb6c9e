package fairshare

import (
	"context"
	"sync"
)

// Slots is a Share for goroutines: Acquire blocks its caller, on a channel
// of its own closed when its ticket is granted, until the tenant gets a
// slot. Safe for concurrent use.
type Slots struct {
	mu    sync.Mutex
	share *Share
	ready map[uint64]chan struct{} // waiting tickets
}

// NewSlots returns size slots shared by tenants, at most perTenant held by
// one (see New).
func NewSlots(size, perTenant int) *Slots {
	return &Slots{share: New(size, perTenant), ready: map[uint64]chan struct{}{}}
}

// Acquire waits for a slot for tenant until ctx ends. The release it
// returns must be called once the work is over (calling it again does
// nothing); on error the caller holds nothing and its place in the queue
// is gone.
func (s *Slots) Acquire(ctx context.Context, tenant string) (release func(), err error) {
	s.mu.Lock()
	ticket, ok := s.share.Ask(tenant)
	if ok {
		s.mu.Unlock()
		return s.releaser(tenant), nil
	}
	ch := make(chan struct{})
	s.ready[ticket] = ch
	s.mu.Unlock()
	select {
	case <-ch:
		return s.releaser(tenant), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	delete(s.ready, ticket)
	waiting := s.share.Cancel(tenant, ticket)
	s.mu.Unlock()
	if !waiting {
		// Granted while ctx ended: the slot is ours, so pass it on.
		s.releaser(tenant)()
	}
	return nil, ctx.Err()
}

// Counts is how many slots are held and how many callers wait for one,
// all tenants, read at one moment.
func (s *Slots) Counts() (held, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.share.Held(), len(s.ready)
}

func (s *Slots) releaser(tenant string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, g := range s.share.Release(tenant) {
				close(s.ready[g.Ticket])
				delete(s.ready, g.Ticket)
			}
		})
	}
}
