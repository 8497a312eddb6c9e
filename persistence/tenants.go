package persistence

import "sync"

// maxTenants bounds the tenant cache: some hundred thousand chats' ids and
// tenants, a few megabytes at most. A full cache drops an entry at random.
const maxTenants = 1 << 17

// tenants caches each chat's tenant for the Badger store: a request's
// ownership check (ChatTenant) reads it on every turn, and a chat's tenant
// never changes once created. It is safe only because one process owns a
// Badger directory, so every deletion of a chat goes through this store
// and evicts it here; Postgres, whose chats another node may delete, reads
// its database every time, and caches tenants only to know whose a read
// is (Postgres.lane), where an entry left behind does no harm.
//
// A reader (or CreateChat) takes a generation before it reads (writes) the
// database and caches the tenant only if no eviction came since: a chat
// deleted meanwhile is not put back.
type tenants struct {
	mu  sync.Mutex
	m   map[string]string
	gen uint64 // evictions so far
}

func newTenants() *tenants { return &tenants{m: map[string]string{}} }

// get returns the cached tenant of chat id and, when there is none, the
// generation to hand put after reading it from the database.
func (t *tenants) get(id string) (tenant string, ok bool, gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tenant, ok = t.m[id]
	return tenant, ok, t.gen
}

// put caches tenant for chat id, read from the database after get returned
// gen, unless a chat was evicted since.
func (t *tenants) put(id, tenant string, gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if gen != t.gen {
		return
	}
	if len(t.m) >= maxTenants {
		for k := range t.m {
			delete(t.m, k)
			break
		}
	}
	t.m[id] = tenant
}

// evict forgets chat id; call it once the write that deletes or rewrites
// the chat's record is committed.
func (t *tenants) evict(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, id)
	t.gen++
}
