package testkit

import (
	"strings"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// Always answers every request with r.
func Always(r Reply) Script { return func(Received) Reply { return r } }

// Ask is a request's messages for one person's line.
func Ask(text string) []chat.Message { return []chat.Message{{Role: chat.RoleUser, Content: text}} }

// Events records what an adapter's Stream emitted.
type Events struct{ List []providers.Event }

// Emit is the callback to hand to Stream.
func (e *Events) Emit(ev providers.Event) { e.List = append(e.List, ev) }

// Joined returns the text of every event of kind, joined, and how many
// there were.
func (e *Events) Joined(kind providers.EventKind) (string, int) {
	var b strings.Builder
	n := 0
	for _, ev := range e.List {
		if ev.Kind == kind {
			b.WriteString(ev.Text)
			n++
		}
	}
	return b.String(), n
}
