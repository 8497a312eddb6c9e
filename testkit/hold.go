package testkit

import (
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/api"
)

// Hold scripts a fake that answers "answer to W" to the person's last
// words W, and holds its answer to one word until Release: a turn caught
// mid-call, for a test to act while it waits (take the chat over, pause
// the node).
type Hold struct {
	word          string
	seen, release chan struct{}
	seenOnce      sync.Once
	releaseOnce   sync.Once
}

// NewHold holds the answer to word.
func NewHold(word string) *Hold {
	return &Hold{word: word, seen: make(chan struct{}), release: make(chan struct{})}
}

// Script is the fake's script.
func (h *Hold) Script(r Received) Reply {
	// Two person's messages in a row go as one, blank-line separated.
	parts := strings.Split(r.Messages[len(r.Messages)-1].Content, "\n\n")
	last := parts[len(parts)-1]
	if last == h.word {
		h.seenOnce.Do(func() { close(h.seen) })
		<-h.release
	}
	return Reply{Text: "answer to " + last}
}

// Seen is closed once the held word reached the fake.
func (h *Hold) Seen() <-chan struct{} { return h.seen }

// Release lets the held answer go (and every later one); safe to call
// more than once, so a test may also defer it.
func (h *Hold) Release() { h.releaseOnce.Do(func() { close(h.release) }) }

// WantLog fails t unless msgs, a chat's transcript, holds exactly want's
// contents in order, at seqs 1, 2, 3…: no message twice, none lost, no
// fork or hole.
func WantLog(t testing.TB, msgs []api.Message, want ...string) {
	t.Helper()
	var got []string
	for i, m := range msgs {
		got = append(got, m.Content)
		if m.Seq != int64(i+1) {
			t.Fatalf("seq %d at position %d: the log forked or has a hole", m.Seq, i)
		}
	}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("log = %q; want %q", got, want)
	}
}
