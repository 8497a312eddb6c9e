// Package fairshare is the rule that keeps one tenant from holding every
// slot of a resource all tenants share (a provider's summarising calls, the
// learner's runs, Postgres's reading connections): Share is the policy,
// Slots the same policy for goroutines that wait for a slot.
package fairshare

// Share is the policy of slots every tenant shares (a provider's
// summarising calls, the learner's runs, Postgres's reads): who gets a slot now, who waits,
// and who is next when a slot frees. It is plain bookkeeping, with no
// locks, channels or clocks, so a table test can drive it; its owner (an
// actor, or a mutex) keeps it to one goroutine at a time.
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
type Share struct {
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
	served  uint64 // when it last got a slot (Share.grants)
	waiting []uint64
}

// Grant is a waiting ticket that got a slot.
type Grant struct {
	Tenant string
	Ticket uint64
}

// New returns size slots shared by tenants, at most perTenant held
// by one (size when perTenant is not in 1..size).
func New(size, perTenant int) *Share {
	size = max(size, 1)
	if perTenant <= 0 || perTenant > size {
		perTenant = size
	}
	return &Share{size: size, perTenant: perTenant, tenants: map[string]*tenantShare{}}
}

// Ask takes a slot for tenant if the rules allow one now (granted), or
// queues a ticket for it; the ticket names the request in Cancel and in
// the grants Release returns.
func (f *Share) Ask(tenant string) (ticket uint64, granted bool) {
	f.last++
	t := f.tenant(tenant)
	if f.held < f.size && t.held < f.perTenant && len(t.waiting) == 0 {
		f.take(t)
		return f.last, true
	}
	t.waiting = append(t.waiting, f.last)
	return f.last, false
}

// Release gives back one of tenant's slots and returns the waiting tickets
// that now hold one (at most one: one slot freed). A release for a tenant
// that holds none changes nothing, so the count never goes negative.
func (f *Share) Release(tenant string) []Grant {
	t, ok := f.tenants[tenant]
	if !ok || t.held == 0 {
		return nil
	}
	t.held--
	f.held--
	f.forget(tenant, t)
	return f.fill()
}

// Cancel takes a waiting ticket out of the queue and reports whether it was
// waiting. False means it was granted meanwhile (or never asked): the
// caller holds a slot it must release.
func (f *Share) Cancel(tenant string, ticket uint64) bool {
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

// Held is how many slots are held, all tenants.
func (f *Share) Held() int { return f.held }

// Tenants is how many tenants hold or wait for a slot.
func (f *Share) Tenants() int { return len(f.tenants) }

// fill hands free slots to waiting tenants, fewest held first.
func (f *Share) fill() []Grant {
	var out []Grant
	for f.held < f.size {
		name, t := f.next()
		if t == nil {
			break
		}
		ticket := t.waiting[0]
		t.waiting = t.waiting[1:]
		f.take(t)
		out = append(out, Grant{Tenant: name, Ticket: ticket})
	}
	return out
}

func (f *Share) take(t *tenantShare) {
	f.grants++
	t.served = f.grants
	t.held++
	f.held++
}

// next is the waiting tenant under its cap holding the fewest slots; among
// equals the one served least recently (a tenant that had to wait for its
// first slot comes before one that just had its latest). Within the
// tenant its oldest ticket goes first.
func (f *Share) next() (string, *tenantShare) {
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

func (f *Share) tenant(name string) *tenantShare {
	t, ok := f.tenants[name]
	if !ok {
		t = &tenantShare{}
		f.tenants[name] = t
	}
	return t
}

func (f *Share) forget(name string, t *tenantShare) {
	if t.held == 0 && len(t.waiting) == 0 {
		delete(f.tenants, name)
	}
}
