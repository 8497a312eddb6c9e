// Package testkit holds the parts shared by agentd's protocol fakes: a
// scripted reply, what a fake received, and the neutral token count every
// fake uses. The fakes themselves (openaifake, anthropicfake, ollamafake) are
// httptest servers that speak each provider's real wire protocol, so the
// adapters are tested exactly as they run against the real thing.
package testkit

import (
	"context"
	"sync"
	"time"

	"github.com/agentd/agentd/chat"
)

// Reply is what a fake answers to one request.
type Reply struct {
	Text      string
	Thinking  string
	ToolCalls []chat.ToolCall
	// Finish overrides the finish reason ("stop", "length", "tool_calls").
	Finish string
	// Refusal is a refusal's text. The OpenAI fake streams it as
	// delta.refusal (structured outputs), or sends it as message.refusal,
	// and finishes with "stop" as OpenAI does. The Anthropic fake sends it
	// as stop_details.explanation with stop_reason "refusal"; without it,
	// Finish "content_filter" (or "refusal") is that stop reason, its
	// stop_details naming no explanation.
	Refusal string

	// Status and Body make a non-2xx answer with the body sent verbatim.
	Status int
	Body   string
	// StreamError sends an error event after HTTP 200 (as LM Studio and the
	// OpenAI Responses stream do).
	StreamError string

	// ChunkRunes splits the text into deltas of this many runes (default 4).
	ChunkRunes int
	// Hang never answers; the fake waits until the client goes away.
	Hang bool
	// CutAfterChunks closes the connection after that many chunks.
	CutAfterChunks int
	// Garbage streams bytes that are not the protocol.
	Garbage bool
	// Usage overrides the counted usage. The OpenAI fake sends its
	// ReasoningTokens as usage.completion_tokens_details.reasoning_tokens,
	// as OpenAI does (0 unless set: the fakes count no reasoning apart).
	Usage *chat.Usage
}

// Received is what a fake saw in one request, in protocol-neutral form.
type Received struct {
	Model       string
	System      string
	Messages    []chat.Message
	Tools       []string
	MaxTokens   int
	NumCtx      int
	InputTokens int    // counted by CountTokens over every text sent
	Raw         []byte // the request body as sent
	// CachedTokens is the part of InputTokens the provider served from its
	// prompt cache (OpenAI's cached_tokens, Anthropic's
	// cache_read_input_tokens); CacheWriteTokens is Anthropic's
	// cache_creation_input_tokens.
	CachedTokens     int
	CacheWriteTokens int
	// CacheKey is the request's prompt_cache_key (OpenAI), "" if none.
	CacheKey string
}

// Script decides the reply to each request.
type Script func(r Received) Reply

// CountTokens is the neutral token count of the fakes: a fixed, simple rule
// (one token per four bytes, at least one per word) that no side of a
// comparison tunes itself to.
func CountTokens(s string) int {
	// A word starts at a byte that is not a space after one that is (or
	// at the start). Counted without branches: the fakes count every
	// request's whole prompt, ≈100 KB on 32K, on the cores the benches
	// measure agentd on.
	words := 0
	prev := uint8(0)
	for i := 0; i < len(s); i++ {
		c := wordByte[s[i]]
		words += int(c &^ prev)
		prev = c
	}
	return max((len(s)+3)/4, words)
}

// wordByte is 1 for a byte CountTokens reads as part of a word, 0 for a
// space, tab, CR or LF.
var wordByte = func() (t [256]uint8) {
	for i := range t {
		t[i] = 1
	}
	for _, c := range " \t\r\n" {
		t[c] = 0
	}
	return t
}()

// Log records what a fake received, safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	reqs []Received
}

// Add appends one request.
func (l *Log) Add(r Received) {
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
}

// All returns a copy of every request so far.
func (l *Log) All() []Received {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Received(nil), l.reqs...)
}

// Chunks cuts s into pieces of n runes (n <= 0 means 4): the deltas a fake
// streams.
func Chunks(s string, n int) []string {
	if n <= 0 {
		n = 4
	}
	var out []string
	r := []rune(s)
	for len(r) > 0 {
		k := min(n, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}

// Sleep waits d, or until ctx ends or quit closes (nil: never); false
// means it was cut short.
func Sleep(ctx context.Context, d time.Duration, quit <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-quit:
	}
	return false
}
