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
	word    string
	release chan struct{}
	// midTurn is closed once the held turn's call reached the fake and its
	// message is durable (turn.started): agentd sends the call while the
	// message commits, so either alone is not mid-turn.
	midTurn         chan struct{}
	mu              sync.Mutex
	called, started bool
	releaseOnce     sync.Once
}

// NewHold holds the answer to word.
func NewHold(word string) *Hold {
	return &Hold{word: word, midTurn: make(chan struct{}), release: make(chan struct{})}
}

// Script is the fake's script.
func (h *Hold) Script(r Received) Reply {
	// Two person's messages in a row go as one, blank-line separated.
	parts := strings.Split(r.Messages[len(r.Messages)-1].Content, "\n\n")
	last := parts[len(parts)-1]
	if last == h.word {
		h.mark(&h.called)
		<-h.release
	}
	return Reply{Text: "answer to " + last}
}

// OnEvent is the held turn's Send's event handler (give it to that Send
// alone): it notes the turn's start for MidTurn.
func (h *Hold) OnEvent(e api.Event) {
	if e.Type == api.EventTurnStarted {
		h.mark(&h.started)
	}
}

func (h *Hold) mark(done *bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !*done {
		*done = true
		if h.called && h.started {
			close(h.midTurn)
		}
	}
}

// MidTurn is closed once the held turn is mid-call: its message durable
// and its call held at the fake.
func (h *Hold) MidTurn() <-chan struct{} { return h.midTurn }

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
