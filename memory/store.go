package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/persistence"
)

// Memory states.
const (
	StateActive  = "active"
	StateWaiting = "waiting"
	StateUndone  = "undone"
)

// Run sources: what started a learning run.
const (
	SourceFold  = "fold"  // a fold moved the model's verbatim window
	SourceSweep = "sweep" // the periodic sweep over every chat
	SourceTool  = "tool"  // the model called remember
)

// MaxTextLen caps one memory's text in bytes; a memory is one short fact.
const MaxTextLen = 500

// Memory is one remembered thing. FromSeq..ToSeq is the stretch of the
// chat's log it was learned from.
type Memory struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	Text      string    `json:"text"`
	ChatID    string    `json:"chat_id,omitempty"`
	FromSeq   int64     `json:"from_seq,omitempty"`
	ToSeq     int64     `json:"to_seq,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	State     string    `json:"state"`
	RunID     string    `json:"run_id"`
}

// Run is one learning run: what it added, and whether it was undone.
type Run struct {
	ID     string    `json:"id"`
	Tenant string    `json:"tenant"`
	ChatID string    `json:"chat_id,omitempty"`
	At     time.Time `json:"at"`
	Source string    `json:"source"`
	Added  []string  `json:"added"`
	Undone bool      `json:"undone,omitempty"`
}

// Records is what the store needs of persistence (*persistence.Store).
type Records interface {
	PutRecord(ctx context.Context, kind, id string, v any) error
	// PutRecords stores records in one write: all or none.
	PutRecords(ctx context.Context, recs ...persistence.RecordPut) error
	Record(ctx context.Context, kind, id string, v any) error
	Records(ctx context.Context, kind string, fn func(id string, decode func(v any) error) error) error
	DeleteRecord(ctx context.Context, kind, id string) error
}

// Options tune a Store.
type Options struct {
	// Now is the clock; the memory map's day is Now's calendar day in Now's
	// location. Optional. Defaults to time.Now (the daemon's local zone).
	Now func() time.Time
	// Mask hides secrets in a memory's text before it is stored (wire
	// redact.Mask). Optional. Defaults to keeping the text as it is.
	Mask func(string) string
	// MaxPerTenant is the most memories one tenant keeps, active or
	// waiting for an OK (an approval never passes it): Add past it is
	// ErrFull. Every memory is read to build the map and to spot a fact
	// already known. Optional. 0: no bound.
	MaxPerTenant int
}

// Store is the memory store. See the package comment for its contract.
type Store struct {
	rec  Records
	now  func() time.Time
	mask func(string) string
	max  int

	idMu      sync.Mutex
	lastStamp int64 // the last id's stamp; guarded by idMu

	// mapMu guards maps and tenants; taken after a tenant's locks, never
	// before, and never held across I/O.
	mapMu   sync.Mutex
	maps    map[string]dayMap // tenant → the map last built, cached
	tenants map[string]*tenantLocks
}

// tenantLocks are one tenant's locks, so that one tenant's scans, builds
// and synced writes never hold up another tenant. A tenant's write lock is
// taken before its build lock, never after.
type tenantLocks struct {
	// write serialises read-modify-write of the tenant's records: its
	// memories, runs and its chats' read-until marks.
	write sync.Mutex
	// build serialises reading, building and dropping its stored map.
	build sync.Mutex
}

// New returns a store over rec.
func New(rec Records, o Options) *Store {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Mask == nil {
		o.Mask = func(s string) string { return s }
	}
	return &Store{rec: rec, now: o.Now, mask: o.Mask, max: o.MaxPerTenant, maps: map[string]dayMap{}, tenants: map[string]*tenantLocks{}}
}

// locks returns the tenant's locks.
func (s *Store) locks(tenant string) *tenantLocks {
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	l, ok := s.tenants[tenant]
	if !ok {
		l = &tenantLocks{}
		s.tenants[tenant] = l
	}
	return l
}

// lockWrites takes the tenant's write lock and returns its unlock.
func (s *Store) lockWrites(tenant string) func() {
	l := s.locks(tenant)
	l.write.Lock()
	return l.write.Unlock
}

func memKind(tenant string) string { return "memory/" + url.PathEscape(tenant) }
func runKind(tenant string) string { return "run/" + url.PathEscape(tenant) }

const (
	readUntilKind = "readuntil"
	mapKind       = "memmap"
)

// idPattern is what newID makes. Anything else (an id typed into a URL) is
// ErrNotFound before it reaches a key.
var idPattern = regexp.MustCompile(`^[mr]_[0-9a-f]{16}[0-9a-f]{8}$`)

// newID is time-ordered, so record keys sort oldest first: its stamp is the
// clock's nanoseconds, raised past the last one issued when the clock stands
// still or steps back. The random tail keeps ids unguessable.
func (s *Store) newID(prefix string, at time.Time) string {
	s.idMu.Lock()
	s.lastStamp = max(s.lastStamp+1, at.UnixNano())
	stamp := s.lastStamp
	s.idMu.Unlock()
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return fmt.Sprintf("%s_%016x%s", prefix, uint64(stamp), hex.EncodeToString(b[:]))
}

// AddInput is one learning run to record.
type AddInput struct {
	Tenant  string
	ChatID  string
	Source  string // SourceFold, SourceSweep or SourceTool
	FromSeq int64
	ToSeq   int64
	Texts   []string
	// Wait stores the memories as waiting for an OK instead of active.
	Wait bool
	// ReadTo, when set, raises the chat's read-until mark to it in the
	// same write (SetReadUntil's rule: never lowered).
	ReadTo int64
}

// Add records a run and the memories it learned. Texts are trimmed, masked
// and capped at MaxTextLen; empty ones and ones the tenant already has
// (active or waiting, ignoring case and spacing) are skipped, so a fact
// said twice is remembered once. With nothing left to add it records no
// run and returns a zero Run. The run, its memories and the chat's raised
// mark are one write: one sync, and every stored memory has a run to undo
// it by. New memories past Options.MaxPerTenant are ErrFull, and then
// nothing is stored, the mark included.
func (s *Store) Add(ctx context.Context, in AddInput) (Run, []Memory, error) {
	if in.Tenant == "" {
		return Run{}, nil, errors.New("memory: add: empty tenant")
	}
	defer s.lockWrites(in.Tenant)()
	known := map[string]bool{}
	kept := 0
	err := s.each(ctx, in.Tenant, func(m Memory) {
		if m.State != StateUndone {
			known[normalise(m.Text)] = true
			kept++
		}
	})
	if err != nil {
		return Run{}, nil, fmt.Errorf("add memories for %s: %w", in.Tenant, err)
	}
	now := s.now()
	run := Run{ID: s.newID("r", now), Tenant: in.Tenant, ChatID: in.ChatID, At: now, Source: in.Source}
	state := StateActive
	if in.Wait {
		state = StateWaiting
	}
	var mems []Memory
	for _, t := range in.Texts {
		t = clipText(strings.TrimSpace(s.mask(strings.TrimSpace(t))), MaxTextLen)
		if t == "" || known[normalise(t)] {
			continue
		}
		known[normalise(t)] = true
		m := Memory{ID: s.newID("m", now), Tenant: in.Tenant, Text: t, ChatID: in.ChatID,
			FromSeq: in.FromSeq, ToSeq: in.ToSeq, CreatedAt: now, State: state, RunID: run.ID}
		mems = append(mems, m)
		run.Added = append(run.Added, m.ID)
	}
	if len(mems) > 0 && s.max > 0 && kept+len(mems) > s.max {
		return Run{}, nil, fmt.Errorf("add %d memories for %s: %d kept, at most %d: %w", len(mems), in.Tenant, kept, s.max, ErrFull)
	}
	var recs []persistence.RecordPut
	if len(mems) > 0 {
		recs = append(recs, persistence.RecordPut{Kind: runKind(in.Tenant), ID: run.ID, V: run})
		for _, m := range mems {
			recs = append(recs, persistence.RecordPut{Kind: memKind(in.Tenant), ID: m.ID, V: m})
		}
	}
	if in.ReadTo > 0 {
		mark, err := s.raisedMark(ctx, in.Tenant, in.ChatID, in.ReadTo)
		if err != nil {
			return Run{}, nil, err
		}
		recs = append(recs, mark...)
	}
	if len(recs) > 0 {
		if err := s.rec.PutRecords(ctx, recs...); err != nil {
			return Run{}, nil, fmt.Errorf("add run %s of chat %s: %w", run.ID, in.ChatID, err)
		}
	}
	if len(mems) == 0 {
		return Run{}, nil, nil
	}
	return run, mems, nil
}

// List returns a tenant's memories in the given state ("" for all), oldest
// first.
func (s *Store) List(ctx context.Context, tenant, state string) ([]Memory, error) {
	var out []Memory
	err := s.each(ctx, tenant, func(m Memory) {
		if state == "" || m.State == state {
			out = append(out, m)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list memories of %s: %w", tenant, err)
	}
	return out, nil
}

// Get returns one memory of the tenant.
func (s *Store) Get(ctx context.Context, tenant, id string) (Memory, error) {
	var m Memory
	if !idPattern.MatchString(id) {
		return m, fmt.Errorf("memory %s: %w", id, ErrNotFound)
	}
	if err := s.rec.Record(persistence.ReadsFor(ctx, tenant), memKind(tenant), id, &m); err != nil {
		return Memory{}, fmt.Errorf("get memory %s: %w", id, notFound(err))
	}
	if m.Tenant != tenant {
		return Memory{}, fmt.Errorf("memory %s: %w", id, ErrNotFound)
	}
	return m, nil
}

// Approve makes a waiting memory active. Approving an active memory is a
// no-op; an undone one is ErrState (undo is final: learn it again instead).
// Like a new memory, it shows in the memory map from the next day.
func (s *Store) Approve(ctx context.Context, tenant, id string) (Memory, error) {
	defer s.lockWrites(tenant)()
	m, err := s.Get(ctx, tenant, id)
	if err != nil {
		return m, err
	}
	switch m.State {
	case StateActive:
		return m, nil
	case StateUndone:
		return m, fmt.Errorf("approve memory %s: it was undone: %w", id, ErrState)
	}
	m.State = StateActive
	if err := s.rec.PutRecord(ctx, memKind(tenant), id, m); err != nil {
		return m, fmt.Errorf("approve memory %s: %w", id, err)
	}
	return m, nil
}

// ErrEmpty: an edit left a memory no words.
var ErrEmpty = errors.New("memory: empty text")

// Edit replaces a memory's text with the person's own words, masked and
// clipped as a learned one is; an undone memory is ErrState. The memory map
// drops at once: the person corrected it, which outweighs one prompt-cache
// miss.
func (s *Store) Edit(ctx context.Context, tenant, id, text string) (Memory, error) {
	text = clipText(strings.TrimSpace(s.mask(strings.TrimSpace(text))), MaxTextLen)
	if text == "" {
		return Memory{}, fmt.Errorf("edit memory %s: %w", id, ErrEmpty)
	}
	defer s.lockWrites(tenant)()
	m, err := s.Get(ctx, tenant, id)
	if err != nil {
		return m, err
	}
	if m.State == StateUndone {
		return m, fmt.Errorf("edit memory %s: it was undone: %w", id, ErrState)
	}
	m.Text = text
	if err := s.rec.PutRecord(ctx, memKind(tenant), id, m); err != nil {
		return m, fmt.Errorf("edit memory %s: %w", id, err)
	}
	return m, s.dropMap(ctx, tenant)
}

// Delete forgets one memory for good, and takes it out of the memory map
// at once. Its run keeps the id; undoing the run skips it.
func (s *Store) Delete(ctx context.Context, tenant, id string) error {
	defer s.lockWrites(tenant)()
	if _, err := s.Get(ctx, tenant, id); err != nil {
		return err
	}
	// The map is dropped first, and not built again until the memory is
	// gone: a crash between the two writes leaves the memory, which the
	// client's retry deletes. The other way round it left a stored map of
	// the day naming a deleted memory, and a retry found nothing to delete.
	return s.dropMapThen(ctx, tenant, func() error {
		if err := s.rec.DeleteRecord(ctx, memKind(tenant), id); err != nil {
			return fmt.Errorf("delete memory %s: %w", id, err)
		}
		return nil
	})
}

// GetRun returns one learning run of the tenant.
func (s *Store) GetRun(ctx context.Context, tenant, id string) (Run, error) {
	var r Run
	if !idPattern.MatchString(id) {
		return r, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	if err := s.rec.Record(persistence.ReadsFor(ctx, tenant), runKind(tenant), id, &r); err != nil {
		return Run{}, fmt.Errorf("get run %s: %w", id, notFound(err))
	}
	if r.Tenant != tenant {
		return Run{}, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	return r, nil
}

// Runs returns a tenant's learning runs, oldest first.
func (s *Store) Runs(ctx context.Context, tenant string) ([]Run, error) {
	var out []Run
	err := s.rec.Records(persistence.ReadsFor(ctx, tenant), runKind(tenant), func(_ string, decode func(any) error) error {
		var r Run
		if err := decode(&r); err != nil {
			return err
		}
		if r.Tenant == tenant {
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", tenant, err)
	}
	return out, nil
}

// UndoRun marks every memory the run added undone, and the run undone; a
// second undo changes nothing. It does NOT move the chat's read-until mark
// back: undo removes what was learned, but the words stay read, so neither
// the next fold nor the sweep learns the same thing again behind the
// person's back. Unlike a new memory, an undo takes the memories out of the
// memory map at once: the person asked to forget, which outweighs one
// prompt-cache miss.
func (s *Store) UndoRun(ctx context.Context, tenant, runID string) (Run, error) {
	defer s.lockWrites(tenant)()
	r, err := s.GetRun(ctx, tenant, runID)
	if err != nil {
		return r, err
	}
	var recs []persistence.RecordPut
	for _, id := range r.Added {
		m, err := s.Get(ctx, tenant, id)
		if errors.Is(err, ErrNotFound) {
			continue // a crash between the run and its memories (before Add wrote them together): nothing to undo
		}
		if err != nil {
			return r, fmt.Errorf("undo run %s: %w", runID, err)
		}
		if m.State == StateUndone {
			continue
		}
		m.State = StateUndone
		recs = append(recs, persistence.RecordPut{Kind: memKind(tenant), ID: id, V: m})
	}
	r.Undone = true
	recs = append(recs, persistence.RecordPut{Kind: runKind(tenant), ID: runID, V: r})
	if err := s.rec.PutRecords(ctx, recs...); err != nil {
		return r, fmt.Errorf("undo run %s: %w", runID, err)
	}
	if err := s.dropMap(ctx, tenant); err != nil {
		return r, fmt.Errorf("undo run %s: %w", runID, err)
	}
	return r, nil
}

type readUntil struct {
	Seq int64 `json:"seq"`
}

// ChatRecords names the records the store keeps for one chat (its
// read-until mark), for deleting the chat with them.
func ChatRecords(chatID string) []persistence.RecordKey {
	return []persistence.RecordKey{{Kind: readUntilKind, ID: chatID}}
}

// ReadUntil returns the seq through which the tenant's chat's words have
// been read by the learner (0: nothing read yet). It is read as the
// tenant's (persistence.ReadsFor), not in the lane of reads of no tenant's.
func (s *Store) ReadUntil(ctx context.Context, tenant, chatID string) (int64, error) {
	var r readUntil
	err := s.rec.Record(persistence.ReadsFor(ctx, tenant), readUntilKind, chatID, &r)
	if errors.Is(err, persistence.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read-until mark of %s: %w", chatID, err)
	}
	return r.Seq, nil
}

// SetReadUntil raises the read-until mark of the tenant's chat to seq. It
// never lowers it: a late, older run must not make words unread again.
func (s *Store) SetReadUntil(ctx context.Context, tenant, chatID string, seq int64) error {
	defer s.lockWrites(tenant)()
	mark, err := s.raisedMark(ctx, tenant, chatID, seq)
	if err != nil || len(mark) == 0 {
		return err
	}
	if err := s.rec.PutRecords(ctx, mark...); err != nil {
		return fmt.Errorf("set read-until mark of %s: %w", chatID, err)
	}
	return nil
}

// raisedMark is the record that raises the chat's read-until mark to seq,
// or none when the mark is there already. Call with the chat's tenant's
// write lock held.
func (s *Store) raisedMark(ctx context.Context, tenant, chatID string, seq int64) ([]persistence.RecordPut, error) {
	cur, err := s.ReadUntil(ctx, tenant, chatID)
	if err != nil || seq <= cur {
		return nil, err
	}
	return []persistence.RecordPut{{Kind: readUntilKind, ID: chatID, V: readUntil{Seq: seq}}}, nil
}

// each calls fn for every memory of the tenant, oldest first.
func (s *Store) each(ctx context.Context, tenant string, fn func(Memory)) error {
	return s.rec.Records(persistence.ReadsFor(ctx, tenant), memKind(tenant), func(_ string, decode func(any) error) error {
		var m Memory
		if err := decode(&m); err != nil {
			return err
		}
		if m.Tenant == tenant {
			fn(m)
		}
		return nil
	})
}

func notFound(err error) error {
	if errors.Is(err, persistence.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// normalise folds case and spacing, for spotting a fact already known.
func normalise(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

// clipText cuts s to at most n bytes on a rune boundary, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	cut := n - len(ell)
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut]) + ell
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// sortNewest orders memories newest first, ties by id, so anything built
// from them is deterministic.
func sortNewest(ms []Memory) {
	slices.SortFunc(ms, func(a, b Memory) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}
