package summarizer

import (
	"context"
	"sync"
)

// fairShare is the policy of one provider's summarising slots, shared by
// every tenant: who gets a slot now, who waits, and who is next when a slot
// frees. It is plain bookkeeping, with no locks, channels or clocks, so a
// table test can drive it; slots wraps it for goroutines.
//
// Two rules keep one tenant from starving another (a tenant that asked for
// 8 slow /compacts at once made another tenant's single /compact wait for
// all of them, and its turn's fold give up with the digest alone):
//   - a tenant holds at most perTenant slots at once, so with the default
//     (one less than size) a tenant that asks while one other tenant is
//     busy gets a slot at once;
//   - a freed slot goes to the waiting tenant that holds the fewest slots,
//     among equals the one served least recently (round robin), not to the
//     oldest request: a tenant's single request waits for at most one call
//     in flight to end, however many requests another tenant queued.
//
// Within a tenant, requests are served in the order they asked.
type fairShare struct {
	size, perTenant int
	held            int    // slots held, all tenants
	last            uint64 // the last ticket given
	grants          uint64 // slots given so far, to order tenants served
	tenants         map[string]*tenantShare
}

// tenantShare is one tenant's part: the slots it holds and its tickets
// waiting, oldest first. A tenant that holds none and waits for none has
// no entry, so tenants that come and go leave nothing behind.
type tenantShare struct {
	held    int
	served  uint64 // when it last got a slot (fairShare.grants)
	waiting []uint64
}

// grant is a waiting ticket that got a slot.
type grant struct {
	tenant string
	ticket uint64
}

func newFairShare(size, perTenant int) *fairShare {
	size = max(size, 1)
	if perTenant <= 0 || perTenant > size {
		perTenant = size
	}
	return &fairShare{size: size, perTenant: perTenant, tenants: map[string]*tenantShare{}}
}

// ask takes a slot for tenant if the rules allow one now (granted), or
// queues a ticket for it; the ticket names the request in cancel and in
// the grants release returns.
func (f *fairShare) ask(tenant string) (ticket uint64, granted bool) {
	f.last++
	t := f.tenant(tenant)
	if f.held < f.size && t.held < f.perTenant && len(t.waiting) == 0 {
		f.take(t)
		return f.last, true
	}
	t.waiting = append(t.waiting, f.last)
	return f.last, false
}

// release gives back one of tenant's slots and returns the waiting tickets
// that now hold one (at most one: one slot freed). A release for a tenant
// that holds none changes nothing, so the count never goes negative.
func (f *fairShare) release(tenant string) []grant {
	t, ok := f.tenants[tenant]
	if !ok || t.held == 0 {
		return nil
	}
	t.held--
	f.held--
	f.forget(tenant, t)
	return f.fill()
}

// cancel takes a waiting ticket out of the queue and reports whether it was
// waiting. False means it was granted meanwhile (or never asked): the
// caller holds a slot it must release.
func (f *fairShare) cancel(tenant string, ticket uint64) bool {
	t, ok := f.tenants[tenant]
	if !ok {
		return false
	}
	for i, w := range t.waiting {
		if w == ticket {
			t.waiting = append(t.waiting[:i], t.waiting[i+1:]...)
			// No slot frees, and who may take one is unchanged (that
			// depends on slots held, not on queue length): nothing to fill.
			f.forget(tenant, t)
			return true
		}
	}
	return false
}

// fill hands free slots to waiting tenants, fewest held first.
func (f *fairShare) fill() []grant {
	var out []grant
	for f.held < f.size {
		name, t := f.next()
		if t == nil {
			break
		}
		ticket := t.waiting[0]
		t.waiting = t.waiting[1:]
		f.take(t)
		out = append(out, grant{tenant: name, ticket: ticket})
	}
	return out
}

func (f *fairShare) take(t *tenantShare) {
	f.grants++
	t.served = f.grants
	t.held++
	f.held++
}

// next is the waiting tenant under its cap holding the fewest slots; among
// equals the one served least recently (a tenant that had to wait for its
// first slot comes before one that just had its latest). Within the
// tenant its oldest ticket goes first.
func (f *fairShare) next() (string, *tenantShare) {
	var (
		name string
		best *tenantShare
	)
	for n, t := range f.tenants {
		if len(t.waiting) == 0 || t.held >= f.perTenant {
			continue
		}
		if best == nil || before(t, best) {
			name, best = n, t
		}
	}
	return name, best
}

// before orders waiting tenants: fewest held, then least recently served,
// then oldest ticket (tickets are unique, so the order is total and the
// map's order never decides).
func before(t, u *tenantShare) bool {
	if t.held != u.held {
		return t.held < u.held
	}
	if t.served != u.served {
		return t.served < u.served
	}
	return t.waiting[0] < u.waiting[0]
}

func (f *fairShare) tenant(name string) *tenantShare {
	t, ok := f.tenants[name]
	if !ok {
		t = &tenantShare{}
		f.tenants[name] = t
	}
	return t
}

func (f *fairShare) forget(name string, t *tenantShare) {
	if t.held == 0 && len(t.waiting) == 0 {
		delete(f.tenants, name)
	}
}

// slots is one provider's fairShare for the summariser's goroutines: a
// waiter blocks on its own channel, closed when its ticket is granted.
type slots struct {
	mu    sync.Mutex
	share *fairShare
	ready map[uint64]chan struct{} // waiting tickets
}

func newSlots(size, perTenant int) *slots {
	return &slots{share: newFairShare(size, perTenant), ready: map[uint64]chan struct{}{}}
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
	ticket, ok := s.share.ask(l.tenant)
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
	waiting := s.share.cancel(l.tenant, ticket)
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
			for _, g := range s.share.release(tenant) {
				close(s.ready[g.ticket])
				delete(s.ready, g.ticket)
			}
		})
	}
}
