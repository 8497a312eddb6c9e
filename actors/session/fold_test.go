package session

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/providers"
)

// TestAFoldHandsTheSummariserTheChatsLastRequest: the summariser gets the
// chat's own request as it was last sent, up to the fold point, byte for
// byte (what the provider holds in its cache), with its system prompt and
// tools.
func TestAFoldHandsTheSummariserTheChatsLastRequest(t *testing.T) {
	for _, lines := range []bool{false, true} {
		f, last := foldAfterTwoTurns(t, lines)
		p := f.Prefix
		if lines {
			if p != nil {
				t.Fatalf("fold_as_lines: a prefix was sent: %+v", p)
			}
			continue
		}
		if p == nil || p.System != last.System || len(p.Tools) != len(last.Tools) || p.CacheKey != "c1" || p.Tokens <= 0 {
			t.Fatalf("prefix %+v, last request %+v", p, last)
		}
		// Folding up to the newest person's message: the two messages before it.
		if len(p.Messages) != 2 || len(last.Messages) < 3 {
			t.Fatalf("prefix messages %+v, last request's %+v", p.Messages, last.Messages)
		}
		for i, m := range p.Messages {
			if l := last.Messages[i]; m.Role != l.Role || m.Content != l.Content || m.Seq != l.Seq {
				t.Fatalf("prefix message %d = %+v, the last request sent %+v", i, m, l)
			}
		}
	}
}

// foldAfterTwoTurns runs two turns, compacts, and returns the Fold the
// summariser got and the last request the model got.
func foldAfterTwoTurns(t *testing.T, lines bool) (*summarizer.Fold, providers.Request) {
	t.Helper()
	folds := make(chan *summarizer.Fold, 1)
	h := newHarnessWith(t, 32_000, nil, func(h *harness, d *Deps) {
		d.FoldAsLines = lines
		d.Summarizer = h.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if f, ok := c.Message().(*summarizer.Fold); ok {
				folds <- f
				c.Respond(&summarizer.Folded{ReqID: f.ReqID, ChatID: f.ChatID, OK: true, Summary: "the person greeted"})
			}
		}))
	}, reply("hi"), reply("fine"))
	h.turn("hello")
	h.turn("how are you?")
	if _, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &Compact{}}, time.Minute).Result(); err != nil {
		t.Fatalf("compact: %v", err)
	}
	return <-folds, h.model.requests()[1]
}
