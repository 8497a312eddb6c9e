package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/attachments"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
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
	err := h.store.RecordsPrefix(persistence.ReadsFor(ctx, tenant), recordToolset, tenant+"/", func(string, func(any) error) error {
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

// attachTotals counts the attachment bytes tenants hold, each hold at the
// file's full size even where tenants share its bytes: per tenant (for
// attachments.max_bytes_per_tenant) and of all tenants together (for
// attachments.max_bytes). held is what the ownership records say: summed
// once at start (loadAttachTotals), then kept where a hold is written
// (ownAttachment) or dropped (DeleteChat), the only places either happens;
// pending is what uploads charged and have not recorded (or given back)
// yet. disk bounds the bytes the store has on disk: its measure at start
// plus, at full size, each file a tenant took a hold on since (once per
// tenant and file: onDisk). A dropped hold's bytes stay on disk until the
// sweep (sweepAttachments) deletes the files nobody holds, so a drop gives
// back no room there at once; after a sweep, disk is taken again from
// what is held and pending and from what came unheld since the sweep's
// cutoff (unheld: bytes of dropped holds and of charges that recorded no
// hold, each at full size, since the last sweep began; unheldBefore: in
// the round before), which bounds what the sweep spared. None of it
// depends on whether another tenant stored or holds the bytes: a drop's
// room comes back two sweeps later whether its file went or stayed.
// The zero value is ready.
type attachTotals struct {
	locks tenantLocks // a tenant's charges, hold writes and drops take turns

	mu         sync.Mutex // guards the rest
	held       map[string]int64
	heldAll    int64
	pending    map[string]int64
	pendingAll int64
	disk       int64
	onDisk     map[string]bool // "<tenant>/<id>" counted in disk

	unheld, unheldBefore int64
}

// reset takes what each tenant holds from a reading of the records.
func (t *attachTotals) reset(held map[string]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held, t.heldAll = held, 0
	for _, n := range held {
		t.heldAll += n
	}
}

// measured takes the bytes on disk from the store's measure.
func (t *attachTotals) measured(disk int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.disk = disk
}

// charge reserves size bytes for tenant, or refuses them (wrapping
// attachments.ErrStorageFull) past its share (0: none) or the store's
// limit (0: none). The store's refusal tells no count: what fits there
// moves with every tenant's holds, never with whether bytes were stored,
// and the count is no tenant's business.
func (t *attachTotals) charge(tenant, id string, size, share, limit int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if used := t.held[tenant] + t.pending[tenant]; share > 0 && used+size > share {
		return fmt.Errorf("this tenant holds %d bytes of its %d (attachments.max_bytes_per_tenant), file needs %d: %w", used, share, size, attachments.ErrStorageFull)
	}
	key, disk := tenant+"/"+id, t.disk
	if !t.onDisk[key] {
		disk += size
	}
	if limit > 0 && max(t.heldAll+t.pendingAll+size, disk) > limit {
		return fmt.Errorf("this file of %d bytes does not fit in the attachment store (attachments.max_bytes): %w", size, attachments.ErrStorageFull)
	}
	t.pending = addTo(t.pending, tenant, size)
	t.pendingAll += size
	if t.onDisk == nil {
		t.onDisk = map[string]bool{}
	}
	t.disk, t.onDisk[key] = disk, true
	return nil
}

// settle gives back what an upload charged and counts what its hold
// added: the file's size when the hold is new, else nothing; a drop adds
// less than nothing. What was charged or held and is held no more may lie
// on disk unheld until a sweep: it counts as unheld.
func (t *attachTotals) settle(tenant string, charged, added int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = addTo(t.pending, tenant, -charged)
	t.pendingAll -= charged
	t.held = addTo(t.held, tenant, added)
	t.heldAll += added
	t.unheld += max(charged-added, 0)
}

// sweepBegins starts a sweep's round of unheld bytes.
func (t *attachTotals) sweepBegins() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unheldBefore, t.unheld = t.unheld, 0
}

// swept takes disk again once a sweep whose cutoff was the previous
// sweep's beginning has deleted every unheld file stored before it: what
// is left on disk is held, pending, or came unheld since that cutoff.
func (t *attachTotals) swept() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.disk = t.heldAll + t.pendingAll + t.unheldBefore + t.unheld
	t.onDisk = nil
}

// heldBy is what the records say tenant holds.
func (t *attachTotals) heldBy(tenant string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held[tenant]
}

// addTo adds n to m[k], dropping a count that comes to nothing.
func addTo(m map[string]int64, k string, n int64) map[string]int64 {
	if m == nil {
		m = map[string]int64{}
	}
	if m[k] += n; m[k] == 0 {
		delete(m, k)
	}
	return m
}

// ownAttachment stores a file with put, under tenant's share of the
// attachment store (attachments.max_bytes_per_tenant; none when unset) and
// the store's limit (attachments.max_bytes), and records the tenant's
// hold on it. put passes the share to the store, whose Charge reserves the
// file's bytes as pending; the hold is written, counted and the
// reservation given back in one step under the tenant's lock, so a charge
// meanwhile sees the bytes pending or held, never both nor neither, and a
// tenant's concurrent uploads cannot each fit in its last room.
func (h *Hub) ownAttachment(ctx context.Context, tenant string, put func(attachments.Quota) (chat.Attachment, error)) (chat.Attachment, error) {
	var charged int64
	q := attachments.Quota{Max: h.cfg.Attachments.MaxBytesPerTenant, Charge: func(id string, size int64) (err error) {
		charged, err = h.chargeAttachment(ctx, tenant, id, size)
		return err
	}}
	a, err := put(q)
	unlock := h.totals.locks.lock(tenant)
	defer unlock()
	var added int64
	if err == nil {
		added, err = h.recordHold(ctx, tenant, a)
	}
	h.totals.settle(tenant, charged, added)
	return a, err
}

// recordHold writes tenant's hold on a and returns the bytes it adds: a's
// size, unless the tenant held a already. A hold charged nothing because
// it was held, then dropped by the tenant's own chat deletion before this
// write, is counted here unchecked: one file past the share at most, and
// only by the tenant's own doing.
func (h *Hub) recordHold(ctx context.Context, tenant string, a chat.Attachment) (int64, error) {
	_, had, err := (owners{h.store}).Owned(ctx, tenant, a.ID)
	if err != nil {
		return 0, err
	}
	if err := h.store.PutRecord(ctx, attachmentOwner, tenant+"/"+a.ID, heldFile{Attachment: a, Since: time.Now()}); err != nil {
		return 0, fmt.Errorf("record attachment %s of %s: %w", a.ID, tenant, err)
	}
	if had {
		return 0, nil
	}
	return a.Size, nil
}

// chargeAttachment reserves size bytes of tenant's share and of the store
// for the file id and returns what it reserved: nothing for a file the
// tenant holds already, an error wrapping attachments.ErrStorageFull past
// either limit. In cluster mode the other nodes write holds too, so the
// totals are read again from the records first.
func (h *Hub) chargeAttachment(ctx context.Context, tenant, id string, size int64) (int64, error) {
	unlock := h.totals.locks.lock(tenant)
	defer unlock()
	if _, held, err := (owners{h.store}).Owned(ctx, tenant, id); err != nil || held {
		return 0, err
	}
	if h.cfg.Cluster.Enabled {
		held, err := h.heldBytes(ctx, "")
		if err != nil {
			return 0, err
		}
		h.totals.reset(held)
	}
	if err := h.totals.charge(tenant, id, size, h.cfg.Attachments.MaxBytesPerTenant, h.cfg.Attachments.MaxBytes); err != nil {
		return 0, err
	}
	return size, nil
}

// loadAttachTotals sums every tenant's holds from the ownership records,
// and takes the bytes on disk from the store's measure.
func (h *Hub) loadAttachTotals(ctx context.Context) error {
	held, err := h.heldBytes(ctx, "")
	if err != nil {
		return err
	}
	h.totals.reset(held)
	h.totals.measured(h.files.Used())
	return nil
}

// dropHolds deletes with del, under the tenant's lock, the records of
// tenant's holds, and counts the n bytes del says they come to dropped;
// when del fails, some of them may be gone all the same, so the tenant's
// holds are summed again from its records.
func (h *Hub) dropHolds(ctx context.Context, tenant string, del func() (n int64, err error)) error {
	unlock := h.totals.locks.lock(tenant)
	defer unlock()
	n, err := del()
	if err == nil {
		h.totals.settle(tenant, 0, -n)
		return nil
	}
	held, rerr := h.heldBytes(ctx, tenant+"/")
	if rerr == nil {
		h.totals.settle(tenant, 0, held[tenant]-h.totals.heldBy(tenant))
	}
	return errors.Join(err, rerr)
}

// heldBytes sums the sizes of the attachments each tenant holds, from the
// ownership records whose keys start with prefix ("<tenant>/<id>"; a
// tenant's name holds no '/'), so the sums survive a restart as the
// records do.
func (h *Hub) heldBytes(ctx context.Context, prefix string) (map[string]int64, error) {
	held := map[string]int64{}
	err := h.store.RecordsPrefix(ctx, attachmentOwner, prefix, func(key string, decode func(any) error) error {
		var a chat.Attachment
		if err := decode(&a); err != nil {
			return err
		}
		tenant, _, _ := strings.Cut(key, "/")
		held[tenant] += a.Size
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("attachments held: %w", err)
	}
	return held, nil
}

// heldFile is a tenant's hold on an attachment as its ownership record
// keeps it: the attachment, and when the tenant last uploaded it, from
// which an upload sent to no chat expires (attachments.unsent_ttl). A
// record written before Since was kept has none. Readers that want the
// attachment alone decode the record into a chat.Attachment.
type heldFile struct {
	chat.Attachment
	Since time.Time `json:"since,omitzero"`
}

// expired says whether f, a hold on an upload sent to no chat, is past
// ttl at now; a hold without Since counts from start (the sweeps' first).
func (f heldFile) expired(ttl time.Duration, now, start time.Time) bool {
	since := f.Since
	if since.IsZero() {
		since = start
	}
	return now.Sub(since) > ttl
}

// expireUnsent drops every tenant's holds on the uploads it sent to no
// chat and last uploaded more than attachments.unsent_ttl before now, as
// deleting the last chat one was sent to would (the sweep deletes the file
// once no tenant holds it): else a tenant that uploads and never sends
// keeps every file for good, with no share set. The holds are read first;
// each tenant's links to chats are read, and its expired holds dropped,
// under its lock, which attach takes to link a file, so a message never
// gets a file whose hold went, and an upload again meanwhile keeps it.
func (h *Hub) expireUnsent(ctx context.Context, now, start time.Time) error {
	ttl := h.cfg.Attachments.UnsentTTL.Duration
	old := map[string][]string{}
	err := h.store.RecordsPrefix(ctx, attachmentOwner, "", func(key string, decode func(any) error) error {
		var f heldFile
		if err := decode(&f); err != nil {
			return err
		}
		if f.expired(ttl, now, start) {
			tenant, id, _ := strings.Cut(key, "/")
			old[tenant] = append(old[tenant], id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("attachments held: %w", err)
	}
	var errs []error
	for tenant, ids := range old {
		errs = append(errs, h.dropHolds(ctx, tenant, func() (int64, error) {
			return h.dropUnsent(ctx, tenant, ids, ttl, now, start)
		}))
	}
	return errors.Join(errs...)
}

// dropUnsent deletes tenant's holds on those of ids it sent to no chat and
// that are still expired, and returns the bytes they came to. The caller
// holds the tenant's lock.
func (h *Hub) dropUnsent(ctx context.Context, tenant string, ids []string, ttl time.Duration, now, start time.Time) (int64, error) {
	sent := map[string]bool{}
	ctx = persistence.ReadsFor(ctx, tenant)
	err := h.store.Records(ctx, attachmentUse(tenant), func(id string, _ func(any) error) error {
		att, _, _ := strings.Cut(id, "/")
		sent[att] = true
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("attachments %s sent: %w", tenant, err)
	}
	var n int64
	for _, id := range ids {
		if sent[id] {
			continue
		}
		var f heldFile
		err := h.store.Record(ctx, attachmentOwner, tenant+"/"+id, &f)
		switch {
		case errors.Is(err, persistence.ErrNotFound):
			continue
		case err != nil:
			return n, fmt.Errorf("attachment %s of %s: %w", id, tenant, err)
		case !f.expired(ttl, now, start):
			continue // uploaded again since it was read
		}
		if err := h.store.DeleteRecord(ctx, attachmentOwner, tenant+"/"+id); err != nil {
			return n, fmt.Errorf("drop unsent attachment %s of %s: %w", id, tenant, err)
		}
		n += f.Size
	}
	return n, nil
}

// attachmentSweepEvery is how often the files no tenant holds are
// deleted; a file is deleted at the first sweep that finds it unheld and
// stored before the sweep before it began, so within two of these after
// its last hold went.
const attachmentSweepEvery = time.Hour

// sweepFiles deletes the stored files no tenant holds, every
// attachmentSweepEvery until Close.
func (h *Hub) sweepFiles() {
	h.work.Go(func() {
		cutoff := time.Now() // a Put before this recorded its hold, or failed
		start := cutoff
		tick := time.NewTicker(attachmentSweepEvery)
		defer tick.Stop()
		for {
			select {
			case <-h.ctx.Done():
				return
			case <-tick.C:
			}
			begun := time.Now()
			if err := h.expireUnsent(h.ctx, begun, start); err != nil {
				h.log.Warn().Err(err).Msg("expire unsent attachments")
			}
			if err := h.sweepAttachments(h.ctx, cutoff); err != nil {
				h.log.Warn().Err(err).Msg("sweep attachments")
			}
			cutoff = begun
		}
	})
}

// sweepAttachments deletes the stored files that no tenant holds and that
// were stored before cutoff, which the caller keeps older than any upload
// still to record its hold (the previous sweep's beginning): the holds are
// read first, so an upload that records its hold after that stored its
// bytes after cutoff. Once every such file is gone, the bound on the disk
// is taken again (attachTotals.swept).
func (h *Hub) sweepAttachments(ctx context.Context, cutoff time.Time) error {
	h.totals.sweepBegins()
	held := map[string]bool{}
	err := h.store.RecordsPrefix(ctx, attachmentOwner, "", func(key string, _ func(any) error) error {
		_, id, _ := strings.Cut(key, "/")
		held[id] = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("attachments held: %w", err)
	}
	swept, err := h.files.Sweep(ctx, cutoff, func(id string) bool { return held[id] })
	h.metrics.AttachmentsSwept(swept.Files, swept.Bytes)
	if swept.Files > 0 {
		h.log.Info().Int("files", swept.Files).Int64("bytes", swept.Bytes).Msg("deleted attachments no tenant holds")
	}
	if err != nil {
		return err
	}
	h.totals.swept()
	return nil
}
