package hub

import (
	"context"
	"fmt"
	"sync"
)

// tenantLocks gives each tenant a mutex of its own, so that a check of one
// tenant's quota and the write that adds to it are one step, and one
// tenant's checks never wait for another's. The zero value is ready; it
// keeps one mutex per tenant seen (tenants are the configured tokens').
type tenantLocks struct {
	mu sync.Mutex
	of map[string]*sync.Mutex
}

// lock locks tenant's mutex and returns its unlock.
func (l *tenantLocks) lock(tenant string) (unlock func()) {
	l.mu.Lock()
	m, ok := l.of[tenant]
	if !ok {
		if l.of == nil {
			l.of = map[string]*sync.Mutex{}
		}
		m = &sync.Mutex{}
		l.of[tenant] = m
	}
	l.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// toolsetRoom refuses a new toolset of a tenant that has
// toolsets.max_per_tenant already. The caller holds the tenant's
// toolsetPuts lock, so two PUTs of new names cannot both take the last
// place.
func (h *Hub) toolsetRoom(ctx context.Context, tenant string) error {
	n := 0
	err := h.store.RecordsPrefix(ctx, recordToolset, tenant+"/", func(string, func(any) error) error {
		n++
		return nil
	})
	if err != nil {
		return fmt.Errorf("count toolsets: %w", err)
	}
	if n >= h.cfg.Toolsets.MaxPerTenant {
		return fmt.Errorf("%w: this tenant has %d toolsets, the most allowed (toolsets.max_per_tenant); replace or delete one", ErrLimit, n)
	}
	return nil
}
