package httpapi_test

// Issue 21, point 2: a turn that waits says what it waits for, at least
// once a second, and a tool that reports progress is heard.

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
	"github.com/agentd/agentd/tools"
)

// gate is a wait a test lets go of once, from any goroutine.
type gate struct {
	c    chan struct{}
	once sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{c: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.c) }) }

// waits decodes a turn's fold.waiting events.
func waits(t *testing.T, evs []api.Event) []api.Waiting {
	t.Helper()
	var out []api.Waiting
	for _, ev := range evs {
		if ev.Type != api.EventFoldWaiting {
			continue
		}
		var w api.Waiting
		if err := json.Unmarshal(ev.Data, &w); err != nil {
			t.Fatalf("fold.waiting %s: %v", ev.Data, err)
		}
		out = append(out, w)
	}
	return out
}

// sendUntil sends text and hands each event to until, which opens the gate
// when it has seen enough; it returns the turn's events.
func sendUntil(t *testing.T, d *daemontest.Daemon, chatID, text string, g *gate, until func(evs []api.Event) bool) []api.Event {
	t.Helper()
	var evs []api.Event
	res, err := d.Client.Send(context.Background(), chatID, api.SendMessageRequest{Content: text}, func(ev api.Event) {
		evs = append(evs, ev)
		if until(evs) {
			g.open()
		}
	})
	if err != nil || res.Problem != nil {
		t.Fatalf("send: %v %+v", err, res.Problem)
	}
	return evs
}

func TestASlowFirstWordIsToldOnTheStream(t *testing.T) {
	g := newGate(t)
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		<-g.c // the model takes its time before its first word
		return testkit.Reply{Text: "here at last"}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	c := newChat(t, d, "")
	evs := sendUntil(t, d, c.ID, "hello", g, func(evs []api.Event) bool { return len(waits(t, evs)) >= 3 })
	ws := waits(t, evs)
	if len(ws) < 3 {
		t.Fatalf("%d fold.waiting events, want the 3 the test waited for", len(ws))
	}
	for i, w := range ws[:3] {
		if w.WaitingFor != api.WaitingModel || w.Detail != "fake/m" {
			t.Errorf("wait %d: %+v, want the model fake/m", i, w)
		}
		if i > 0 && w.ElapsedMS <= ws[i-1].ElapsedMS {
			t.Errorf("elapsed_ms %d after %d: one wait, timed from its start", w.ElapsedMS, ws[i-1].ElapsedMS)
		}
	}
	if evs[len(evs)-1].Type != api.EventTurnCompleted {
		t.Fatalf("last event %s", evs[len(evs)-1].Type)
	}
}

func TestALongToolReportsItsProgressAndIsWaitedForByName(t *testing.T) {
	g := newGate(t)
	survey := func(r *tools.Registry) error {
		return tools.Register(r, "survey", "Surveys every page.", func(ctx context.Context, _ struct{}) (tools.Result, error) {
			tools.ReportProgress(ctx, tools.Progress{Message: "page 1 of 3", Done: 1, Total: 3})
			<-g.c
			return tools.Result{Text: "surveyed"}, nil
		})
	}
	fake := newFake(t, toolScript)
	d := daemontest.Start(t, baseConfig(t, fake.URL()), nil, hub.Options{Tools: survey})
	c := newChat(t, d, "")
	seen := func(evs []api.Event) (progress, waited bool) {
		for _, ev := range evs {
			progress = progress || ev.Type == api.EventToolProgress
		}
		for _, w := range waits(t, evs) {
			waited = waited || (w.WaitingFor == api.WaitingTools && w.Detail == "survey")
		}
		return
	}
	evs := sendUntil(t, d, c.ID, "use survey", g, func(evs []api.Event) bool { p, w := seen(evs); return p && w })
	if p, w := seen(evs); !p || !w {
		t.Fatalf("tool.progress seen %v, a wait for survey seen %v", p, w)
	}
	for _, ev := range evs {
		if ev.Type != api.EventToolProgress {
			continue
		}
		var tp api.ToolProgress
		if err := json.Unmarshal(ev.Data, &tp); err != nil {
			t.Fatal(err)
		}
		if tp != (api.ToolProgress{Tool: "survey", CallID: "call_1", Message: "page 1 of 3", Done: 1, Total: 3}) {
			t.Errorf("tool.progress %+v", tp)
		}
	}
}

func TestATurnWaitingForAFoldSaysSo(t *testing.T) {
	g := newGate(t)
	fake := openaifake.New(openaifake.Options{Window: 4096, Script: func(r testkit.Received) testkit.Reply {
		if r.System == summarizer.Instructions {
			<-g.c // the summariser is slow
			return testkit.Reply{Text: "What the person wants: orders shipped."}
		}
		return testkit.Reply{Text: "ok"}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 4096), nil)
	c := newChat(t, d, "")
	long := strings.Repeat("Order 4417 ships to /srv/out/orders.csv today. ", 40)
	for i := 0; ; i++ {
		if i > 40 {
			t.Fatal("no turn waited for a fold in 40 turns on a 4K window")
		}
		var folded []api.Waiting
		evs := sendUntil(t, d, c.ID, long, g, func(evs []api.Event) bool {
			for _, w := range waits(t, evs) {
				if w.WaitingFor == api.WaitingSummary {
					return true
				}
			}
			return false
		})
		for _, w := range waits(t, evs) {
			if w.WaitingFor == api.WaitingSummary {
				folded = append(folded, w)
			}
		}
		if len(folded) > 0 {
			if folded[0].ElapsedMS <= 0 || folded[0].Detail == "" {
				t.Fatalf("fold wait %+v", folded[0])
			}
			return
		}
	}
}
