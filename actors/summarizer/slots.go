package summarizer

import (
	"context"
	"sync"

	"github.com/agentd/agentd/actors"
)

// slots is one provider's actors.FairShare for the summariser's goroutines: a
// waiter blocks on its own channel, closed when its ticket is granted.
type slots struct {
	mu    sync.Mutex
	share *actors.FairShare
	ready map[uint64]chan struct{} // waiting tickets
}

func newSlots(size, perTenant int) *slots {
	return &slots{share: actors.NewFairShare(size, perTenant), ready: map[uint64]chan struct{}{}}
}

// lane is a provider's slots as one tenant asks for them.
type lane struct {
	s      *slots
	tenant string
}

func (s *slots) lane(tenant string) lane { return lane{s: s, tenant: tenant} }

// acquire waits for a slot until ctx ends. The release it returns must be
// called once the call is over (calling it again does nothing); on error
// the caller holds nothing and its place in the queue is gone.
func (l lane) acquire(ctx context.Context) (release func(), err error) {
	s := l.s
	s.mu.Lock()
	ticket, ok := s.share.Ask(l.tenant)
	if ok {
		s.mu.Unlock()
		return s.releaser(l.tenant), nil
	}
	ch := make(chan struct{})
	s.ready[ticket] = ch
	s.mu.Unlock()
	select {
	case <-ch:
		return s.releaser(l.tenant), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	delete(s.ready, ticket)
	waiting := s.share.Cancel(l.tenant, ticket)
	s.mu.Unlock()
	if !waiting {
		// Granted while ctx ended: the slot is ours, so pass it on.
		s.releaser(l.tenant)()
	}
	return nil, ctx.Err()
}

func (s *slots) releaser(tenant string) func() {
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
