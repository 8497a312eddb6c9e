package hub

import (
	"errors"
	"sync"
)

// ErrTenantBusy: the tenant has limits.turns_per_tenant turns in flight.
var ErrTenantBusy = errors.New("too many turns in flight")

// tenantSlots counts what each tenant has in flight against one limit: its
// turns, where they live (a slot is taken when the hub accepts a message
// and given back when its session says the turn has ended or will never
// run, however long the client that sent it stays), or its MCP servers
// being connected.
type tenantSlots struct {
	limit int
	mu    sync.Mutex
	n     map[string]int
}

func newTenantSlots(limit int) *tenantSlots { return &tenantSlots{limit: limit, n: map[string]int{}} }

// take returns a release function that may be called any number of times,
// or false when the tenant holds every slot.
func (t *tenantSlots) take(tenant string) (func(), bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n[tenant] >= t.limit {
		return nil, false
	}
	t.n[tenant]++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if t.n[tenant]--; t.n[tenant] == 0 {
				delete(t.n, tenant)
			}
		})
	}, true
}
