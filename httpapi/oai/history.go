package oai

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"time"
)

// How long and how many histories Chat Completions recognises (docs/openai.md):
// up to three tips per chat (its answer's, an open and an asked one), the
// newest historyTips of each tenant, each for
// historyIdle after it was last answered or matched. A history past either
// bound is unknown: it starts a new chat holding what the client sent.
const (
	historyTips = 10_000
	historyIdle = 7 * 24 * time.Hour
)

// HistoryMessage is one message of a Chat Completions history as the
// rolling hash reads it: the client's view, never agentd's stored log (a
// turn agentd ran with its own tools is one assistant message to the
// client). System and developer messages are not in it: they are the chat's
// instructions, which a client may change without changing the chat.
type HistoryMessage struct {
	Role       string
	Content    string
	ToolCalls  []HistoryCall
	ToolCallID string
}

// HistoryCall is one tool call of an assistant message.
type HistoryCall struct{ ID, Name, Arguments string }

// Digest is the rolling hash of a history's first n messages.
type Digest [sha256.Size]byte

// Chain returns the digest of every prefix of msgs: out[0] is the empty
// history's, out[i] that of msgs[:i]. Each step hashes the previous digest
// and the message, every field length-prefixed, so no two histories share
// a digest by moving bytes between fields or messages.
func Chain(msgs []HistoryMessage) []Digest {
	out := make([]Digest, len(msgs)+1)
	for i, m := range msgs {
		out[i+1] = Step(out[i], m)
	}
	return out
}

// Step extends the digest d of a history by m.
func Step(d Digest, m HistoryMessage) Digest {
	h := sha256.New()
	h.Write(d[:])
	field := func(s string) {
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	field(m.Role)
	field(m.Content)
	field(m.ToolCallID)
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(m.ToolCalls)))])
	for _, c := range m.ToolCalls {
		field(c.ID)
		field(c.Name)
		field(c.Arguments)
	}
	var out Digest
	h.Sum(out[:0])
	return out
}

// Histories recognises the histories agentd answered, per tenant: each
// chat's tip is the digest of the history as its client will re-send it
// (what it sent plus the answer it got). A request whose history starts
// with a tip continues that chat. Only tips are kept, so a history that
// branches from an older point of a chat (an edited or regenerated
// message) is unknown and starts a new chat rather than grafting onto the
// wrong one. A chat may also have an open tip: a history it holds whole
// whose turn failed, so that the client's retry of it is known, while
// the tip of its last answer stays for a client that sends something
// else instead. And a chat may have an asked tip: the history of the
// request it last answered, found only by that request's retry
// (MatchAsked), whose answer its client lost. Safe for concurrent use; no
// I/O, the caller gives the time.
type Histories struct {
	mu      sync.Mutex
	most    int
	idle    time.Duration
	tips    map[tipKey]*list.Element
	byChat  map[chatTip]*list.Element
	tenants map[string]*list.List // each tenant's tips, least recently used first
}

type tipKey struct {
	tenant string
	digest Digest
	asked  bool // an asked tip, apart: Match never finds one
}

// tipKind is which of a chat's tips one is.
type tipKind int8

const (
	answerTip tipKind = iota // its last answer's
	openTip                  // a history it holds whole, unanswered
	askedTip                 // the history its last answer answered
)

// chatTip names one of a chat's tips.
type chatTip struct {
	chatID string
	kind   tipKind
}

type tip struct {
	key tipKey
	chatTip
	n  int // messages in the history
	at time.Time
}

// NewHistories keeps at most most tips per tenant, each for idle after its
// last use.
func NewHistories(most int, idle time.Duration) *Histories {
	return &Histories{most: most, idle: idle, tips: map[tipKey]*list.Element{}, byChat: map[chatTip]*list.Element{}, tenants: map[string]*list.List{}}
}

// Match finds the longest prefix of a history (its Chain) that is a
// tenant's chat's tip, and returns that chat and how many messages of the
// history it already holds. A history that is exactly a tip matches too
// (known == len(chain)-1): nothing in it is new.
func (h *Histories) Match(tenant string, chain []Digest, now time.Time) (chatID string, known int, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(chain) - 1; i > 0; i-- {
		if t := h.use(tipKey{tenant: tenant, digest: chain[i]}, now); t != nil {
			return t.chatID, t.n, true
		}
	}
	return "", 0, false
}

// MatchAsked finds the chat whose last answered request had history d (of
// n messages): a retry of that request, whose answer its client lost.
func (h *Histories) MatchAsked(tenant string, d Digest, now time.Time) (chatID string, n int, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.use(tipKey{tenant: tenant, digest: d, asked: true}, now); t != nil {
		return t.chatID, t.n, true
	}
	return "", 0, false
}

// use returns the tip under k, marked used now, unless it is idle too
// long (then forgotten) or absent.
func (h *Histories) use(k tipKey, now time.Time) *tip {
	e, found := h.tips[k]
	if !found {
		return nil
	}
	t := e.Value.(*tip)
	if now.Sub(t.at) > h.idle {
		h.remove(e)
		return nil
	}
	t.at = now
	h.tenants[k.tenant].MoveToBack(e)
	return t
}

// Remember makes d, the digest of a history of n messages, chatID's tip,
// replacing its previous one and its open one. The tenant's least recently
// used tips past the bound, and any tip idle too long, are forgotten.
func (h *Histories) Remember(tenant, chatID string, d Digest, n int, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop(chatTip{chatID, openTip})
	h.drop(chatTip{chatID, askedTip})
	h.put(tenant, chatTip{chatID, answerTip}, d, n, now)
}

// RememberAsked makes d, the digest of the history of n messages whose
// request chatID answered last (after Remember of its answer), the chat's
// asked tip.
func (h *Histories) RememberAsked(tenant, chatID string, d Digest, n int, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.put(tenant, chatTip{chatID, askedTip}, d, n, now)
}

// RememberOpen makes d, the digest of a history of n messages that chatID
// holds whole and has not answered (its turn failed), the chat's open tip,
// replacing its previous open one; its answer's tip stays.
func (h *Histories) RememberOpen(tenant, chatID string, d Digest, n int, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.put(tenant, chatTip{chatID, openTip}, d, n, now)
}

// Forget drops a chat's tips (the chat is gone).
func (h *Histories) Forget(chatID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, kind := range []tipKind{answerTip, openTip, askedTip} {
		h.drop(chatTip{chatID, kind})
	}
}

func (h *Histories) put(tenant string, which chatTip, d Digest, n int, now time.Time) {
	h.drop(which)
	key := tipKey{tenant: tenant, digest: d, asked: which.kind == askedTip}
	if e, ok := h.tips[key]; ok { // another chat with the very same history: the newest wins
		h.remove(e)
	}
	l := h.tenants[tenant]
	if l == nil {
		l = list.New()
		h.tenants[tenant] = l
	}
	e := l.PushBack(&tip{key: key, chatTip: which, n: n, at: now})
	h.tips[key] = e
	h.byChat[which] = e
	for front := l.Front(); front != nil && (l.Len() > h.most || now.Sub(front.Value.(*tip).at) > h.idle); front = l.Front() {
		h.remove(front)
	}
}

func (h *Histories) drop(which chatTip) {
	if e, ok := h.byChat[which]; ok {
		h.remove(e)
	}
}

func (h *Histories) remove(e *list.Element) {
	t := e.Value.(*tip)
	l := h.tenants[t.key.tenant]
	l.Remove(e)
	if l.Len() == 0 {
		delete(h.tenants, t.key.tenant)
	}
	delete(h.tips, t.key)
	delete(h.byChat, t.chatTip)
}
