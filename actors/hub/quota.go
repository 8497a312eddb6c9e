package hub

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentd/agentd/attachments"
	"github.com/agentd/agentd/chat"
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

// attachHolds counts, per tenant, the attachment bytes charged to uploads
// whose hold (the ownership record) is not written yet: what the records
// say plus these is what the tenant holds. The zero value is ready.
type attachHolds struct {
	locks   tenantLocks // a tenant's charges, and its holds' writes, take turns
	mu      sync.Mutex  // guards pending
	pending map[string]int64
}

func (a *attachHolds) add(tenant string, n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil {
		a.pending = map[string]int64{}
	}
	if a.pending[tenant] += n; a.pending[tenant] == 0 {
		delete(a.pending, tenant)
	}
}

func (a *attachHolds) of(tenant string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pending[tenant]
}

// ownAttachment stores a file with put, under tenant's share of the
// attachment store (attachments.max_bytes_per_tenant; none when unset),
// and records the tenant's hold on it. put passes the share to the store,
// whose Charge reserves the file's bytes as pending; the hold is written
// and the reservation given back in one step under the tenant's lock, so
// a charge meanwhile sees the bytes pending or held, never both nor
// neither, and a tenant's concurrent uploads cannot each fit in its last
// room.
func (h *Hub) ownAttachment(ctx context.Context, tenant string, put func(attachments.Quota) (chat.Attachment, error)) (chat.Attachment, error) {
	var q attachments.Quota
	var charged int64
	if limit := h.cfg.Attachments.MaxBytesPerTenant; limit > 0 {
		q = attachments.Quota{Max: limit, Charge: func(id string, size int64) (err error) {
			charged, err = h.chargeAttachment(ctx, tenant, id, size, limit)
			return err
		}}
	}
	a, err := put(q)
	if charged > 0 {
		unlock := h.holds.locks.lock(tenant)
		defer unlock()
		defer h.holds.add(tenant, -charged) // after the hold is written
	}
	if err != nil {
		return a, err
	}
	return a, h.store.PutRecord(ctx, attachmentOwner, tenant+"/"+a.ID, a)
}

// chargeAttachment reserves size bytes of tenant's share for the file id
// and returns what it reserved: nothing for a file the tenant holds
// already, an error wrapping attachments.ErrStorageFull past the share.
func (h *Hub) chargeAttachment(ctx context.Context, tenant, id string, size, limit int64) (int64, error) {
	unlock := h.holds.locks.lock(tenant)
	defer unlock()
	if _, held, err := (owners{h.store}).Owned(ctx, tenant, id); err != nil || held {
		return 0, err
	}
	used, err := h.heldBytes(ctx, tenant)
	if err != nil {
		return 0, err
	}
	used += h.holds.of(tenant)
	if used+size > limit {
		return 0, fmt.Errorf("this tenant holds %d bytes of its %d (attachments.max_bytes_per_tenant), file needs %d: %w", used, limit, size, attachments.ErrStorageFull)
	}
	h.holds.add(tenant, size)
	return size, nil
}

// heldBytes sums the sizes of the attachments tenant holds, from its
// ownership records alone ("<tenant>/<id>"; a tenant's name holds no '/'),
// so it reads no other tenant's and survives a restart as they do.
func (h *Hub) heldBytes(ctx context.Context, tenant string) (int64, error) {
	var total int64
	err := h.store.RecordsPrefix(ctx, attachmentOwner, tenant+"/", func(_ string, decode func(any) error) error {
		var a chat.Attachment
		if err := decode(&a); err != nil {
			return err
		}
		total += a.Size
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("attachments held by %s: %w", tenant, err)
	}
	return total, nil
}
