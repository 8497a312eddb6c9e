package oai

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentd/agentd/actors/hub"
)

// kindPause is the tenant record kind of the Chat Completions pause index:
// by the first call id of an answer that paused on the client's calls, the
// chats that gave it. A client's tool results find their chat through it
// when its history is not found as agentd answered it: arguments a client
// re-serialized (LangChain's json.dumps), a restart, a forgotten tip. It is
// in the store, as the paused turn itself (its snapshot), so it outlives a
// restart; one read per such request, no scan.
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
	key := answer.ToolCalls[0].ID
	var idx pauseIndex
	if err := h.hub.TenantRecord(ctx, tenant, kindPause, key, &idx); err != nil && !errors.Is(err, hub.ErrNotFound) {
		return err
	}
	idx.Entries = slices.DeleteFunc(idx.Entries, func(e pauseEntry) bool { return e.ChatID == chatID })
	idx.Entries = append([]pauseEntry{{ChatID: chatID, Digest: callsDigest(answer)}}, idx.Entries...)
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
	idx.Entries = slices.DeleteFunc(idx.Entries, func(e pauseEntry) bool { return e.ChatID == chatID })
	switch {
	case len(idx.Entries) == n:
		return nil
	case len(idx.Entries) == 0:
		return h.hub.DeleteTenantRecord(ctx, tenant, kindPause, key)
	}
	return h.hub.PutTenantRecord(ctx, tenant, kindPause, key, idx)
}
