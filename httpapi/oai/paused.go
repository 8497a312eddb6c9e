package oai

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/actors/hub"
)

// kindPause is the tenant record kind of the Chat Completions pause index:
// by the first call id of an answer that paused on the client's calls, the
// chats that gave it. A client's tool results find their chat through it
// when its history is not found as agentd answered it: arguments a client
// re-serialized (LangChain's json.dumps), a restart, a forgotten tip. It is
// in the store, as the paused turn itself (its snapshot), so it outlives a
// restart; one read per such request, no scan. An entry goes when the
// results come through Chat Completions, or once its pause has ended for
// certain (pauseLife): a sweep at each new pause and at start drops those.
const kindPause = "cc-pause"

// pauseEntries bounds the chats one call id names: providers that number
// their calls (call_0) give many chats the same ids.
const pauseEntries = 8

// pauseIndex is the record: the newest entry first.
type pauseIndex struct {
	Entries []pauseEntry `json:"entries"`
}

// pauseEntry is one chat that paused on the calls, and the digest of the
// answer that asked for them (callsDigest), which tells apart chats whose
// calls share ids.
type pauseEntry struct {
	ChatID string `json:"chat_id"`
	Digest string `json:"digest"`
	// At is when the answer paused. An entry without one was written
	// before entries were dated: it counts from this process's start.
	At time.Time `json:"at,omitzero"`
}

// pauseLife is how long an entry may name a turn that waits: a paused turn
// ends results_wait after it paused, however it goes (results, a deleted
// chat, tool-results-timeout, across restarts), and its entry is written
// after it paused; a tenth more covers the clocks of other nodes.
func (h *Handler) pauseLife() time.Duration {
	w := h.cfg.Toolsets.ResultsWait.Duration
	return w + w/10
}

// prune drops idx's entries whose pause has ended for certain at now, and
// reports whether any went.
func (h *Handler) prune(idx *pauseIndex, now time.Time) bool {
	n := len(idx.Entries)
	idx.Entries = slices.DeleteFunc(idx.Entries, func(e pauseEntry) bool {
		at := e.At
		if at.IsZero() {
			at = h.started
		}
		return now.Sub(at) > h.pauseLife()
	})
	return len(idx.Entries) != n
}

// putPauses stores idx as the record of key, or deletes it when empty.
func (h *Handler) putPauses(ctx context.Context, tenant, key string, idx pauseIndex) error {
	if len(idx.Entries) == 0 {
		return h.hub.DeleteTenantRecord(ctx, tenant, kindPause, key)
	}
	return h.hub.PutTenantRecord(ctx, tenant, kindPause, key, idx)
}

// pauseLock serialises the read-modify-writes of a tenant's pause index on
// this node (a sweep's among them), a stripe of tenants to a lock.
func (h *Handler) pauseLock(tenant string) *sync.Mutex {
	f := fnv.New32a()
	_, _ = f.Write([]byte(tenant))
	return &h.pauseLocks[f.Sum32()%uint32(len(h.pauseLocks))]
}

// sweepRecords bounds the records of a tenant's pause index one sweep
// reads; startSweeps bounds the sweeps a start makes of each tenant's.
const (
	sweepRecords = 64
	startSweeps  = 64
)

// errSwept ends a sweep's reading at sweepRecords.
var errSwept = errors.New("swept enough records")

// sweepPauses drops, from the first sweepRecords records of the tenant's
// pause index, the entries whose pause has ended for certain, and deletes
// a record left with none (or unreadable). It reports whether it dropped
// any, and whether it read as many as it may (more may follow).
func (h *Handler) sweepPauses(ctx context.Context, tenant string) (dropped, full bool, err error) {
	mu := h.pauseLock(tenant)
	mu.Lock()
	defer mu.Unlock()
	now, read := time.Now(), 0
	stale := map[string]pauseIndex{}
	err = h.hub.TenantRecords(ctx, tenant, kindPause, func(key string, decode func(any) error) error {
		if read == sweepRecords {
			return errSwept
		}
		read++
		var idx pauseIndex
		if decode(&idx) != nil {
			stale[key] = pauseIndex{}
		} else if h.prune(&idx, now) {
			stale[key] = idx
		}
		return nil
	})
	if err != nil && !errors.Is(err, errSwept) {
		return false, false, fmt.Errorf("sweep the pause index of %s: %w", tenant, err)
	}
	for key, idx := range stale {
		if err := h.putPauses(ctx, tenant, key, idx); err != nil {
			return false, false, fmt.Errorf("sweep the pause index of %s: %w", tenant, err)
		}
	}
	return len(stale) > 0, read == sweepRecords, nil
}

// SweepPauses sweeps, at start, the pause index of each tenant: what
// pauses that ended while agentd was down left. A tenant's is swept at
// most startSweeps times; the sweep at each new pause goes on from there.
func (h *Handler) SweepPauses(ctx context.Context, tenants []string) {
	for _, tenant := range tenants {
		for range startSweeps {
			dropped, full, err := h.sweepPauses(ctx, tenant)
			if err != nil {
				h.log.Warn().Err(err).Msg("sweep the pause index at start")
				break
			}
			if !dropped || !full {
				break
			}
		}
	}
}

// callsDigest digests an answer with tool calls as a client may re-send it:
// the arguments are compared as JSON values, not as bytes, so re-serialized
// arguments (spaces, key order, escapes) digest the same.
func callsDigest(m HistoryMessage) string {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
	field(m.Content)
	for _, c := range m.ToolCalls {
		field(c.ID)
		field(c.Name)
		field(canonicalJSON(c.Arguments))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// canonicalJSON is s re-encoded (object keys sorted, no spaces, numbers as
// written), or s itself when it is not JSON.
func canonicalJSON(s string) string {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return s
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return s
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// notePause records that chatID paused on the calls of answer.
func (h *Handler) notePause(ctx context.Context, tenant, chatID string, answer HistoryMessage) error {
	mu := h.pauseLock(tenant)
	mu.Lock()
	defer mu.Unlock()
	key, now := answer.ToolCalls[0].ID, time.Now()
	var idx pauseIndex
	if err := h.hub.TenantRecord(ctx, tenant, kindPause, key, &idx); err != nil && !errors.Is(err, hub.ErrNotFound) {
		return err
	}
	h.prune(&idx, now)
	idx.Entries = slices.DeleteFunc(idx.Entries, func(e pauseEntry) bool { return e.ChatID == chatID })
	idx.Entries = append([]pauseEntry{{ChatID: chatID, Digest: callsDigest(answer), At: now}}, idx.Entries...)
	idx.Entries = idx.Entries[:min(len(idx.Entries), pauseEntries)]
	return h.hub.PutTenantRecord(ctx, tenant, kindPause, key, idx)
}

// pausedOn finds the tenant's chat that paused on the calls of answer
// (as the client re-sends it); "" when none did.
func (h *Handler) pausedOn(ctx context.Context, tenant string, answer HistoryMessage) (string, error) {
	var idx pauseIndex
	err := h.hub.TenantRecord(ctx, tenant, kindPause, answer.ToolCalls[0].ID, &idx)
	if errors.Is(err, hub.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	d := callsDigest(answer)
	for _, e := range idx.Entries {
		if e.Digest != d {
			continue
		}
		// The record names a chat; the tenant's own lookup grants it.
		if _, err := h.hub.Chat(ctx, tenant, e.ChatID); errors.Is(err, hub.ErrNotFound) {
			continue
		} else if err != nil {
			return "", err
		}
		return e.ChatID, nil
	}
	return "", nil
}

// forgetPause drops chatID from the index of the calls of answer, once its
// turn has their results.
func (h *Handler) forgetPause(ctx context.Context, tenant, chatID string, answer HistoryMessage) error {
	mu := h.pauseLock(tenant)
	mu.Lock()
	defer mu.Unlock()
	key := answer.ToolCalls[0].ID
	var idx pauseIndex
	err := h.hub.TenantRecord(ctx, tenant, kindPause, key, &idx)
	if errors.Is(err, hub.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	n := len(idx.Entries)
	pruned := h.prune(&idx, time.Now())
	idx.Entries = slices.DeleteFunc(idx.Entries, func(e pauseEntry) bool { return e.ChatID == chatID })
	if len(idx.Entries) == n && !pruned {
		return nil
	}
	return h.putPauses(ctx, tenant, key, idx)
}
