package providers

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrAnswerTooLarge ends a stream whose answer grew past the request's
// MaxAnswerBytes. The Response returned with it holds what came before the
// cap, marked partial; the rest of the stream is not read.
var ErrAnswerTooLarge = errors.New("the answer is larger than the most agentd keeps of one answer")

// DefaultMaxAnswerBytes caps an answer whose Request sets no cap.
const DefaultMaxAnswerBytes = 4 << 20

// AnswerBudget counts the bytes an adapter keeps of one answer — text,
// thinking, tool names and arguments — so that no stream, however long,
// grows a buffer past the cap. Used by one stream on one goroutine.
type AnswerBudget struct{ max, left int }

// NewAnswerBudget is the budget of req's answer.
func NewAnswerBudget(req Request) *AnswerBudget {
	n := req.MaxAnswerBytes
	if n <= 0 {
		n = DefaultMaxAnswerBytes
	}
	return &AnswerBudget{max: n, left: n}
}

// Take returns the head of s that still fits, cut at a rune boundary, and
// whether all of s did; once it did not, every later Take returns "".
func (b *AnswerBudget) Take(s string) (string, bool) {
	if b.left >= 0 && len(s) <= b.left {
		b.left -= len(s)
		return s, true
	}
	i := max(b.left, 0)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	b.left = -1 // over: nothing more is taken
	return s[:i], false
}

// Keep appends what of s fits to dst and emits it as an event of kind.
func (b *AnswerBudget) Keep(dst *strings.Builder, kind EventKind, s string, emit func(Event)) {
	if s == "" {
		return
	}
	if s, _ = b.Take(s); s != "" {
		dst.WriteString(s)
		emit(Event{Kind: kind, Text: s})
	}
}

// Over reports whether a Take has not fitted.
func (b *AnswerBudget) Over() bool { return b.left < 0 }

// Err is the error a stream ends with once the budget is over.
func (b *AnswerBudget) Err(provider string) error {
	return &Error{Provider: provider, Err: fmt.Errorf("%w (%d bytes)", ErrAnswerTooLarge, b.max)}
}
