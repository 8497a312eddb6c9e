package session

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/actors/summarizer"
)

// TestAFoldHandsTheSummariserTheChatsLastRequest: the summariser gets the
// chat's own request as it was last sent, up to the fold point, byte for
// byte (what the provider holds in its cache), with its system prompt and
// tools.
func TestAFoldHandsTheSummariserTheChatsLastRequest(t *testing.T) {
	folds := make(chan *summarizer.Fold, 1)
	h := newHarnessWith(t, 32_000, nil, func(h *harness, d *Deps) {
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
	f := <-folds
	last := h.model.requests()[1]
	p := f.Prefix
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
