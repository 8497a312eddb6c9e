package session

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/testkit"
)

// waitActive waits, with a generous deadline, until n sessions run.
func (h *harness) waitActive(n int) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := h.system.Root.RequestFuture(h.registry, &CountActive{}, time.Minute).Result()
		if err != nil {
			h.t.Fatalf("count sessions: %v", err)
		}
		got := res.(*ActiveCount).N
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d sessions still run, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestASessionThatKeepsPanickingStopsAndRefusesItsCallers: a session that
// panics on every message, Started, Restarting and Stopping included, is
// given up after the registry's bound: its caller is refused with
// ErrFailed (its tenant's slot freed), the session stops, one line logs
// the panic, another chat goes on, and the chat wakes afresh once it no
// longer panics. A panic in Restarting kept the old instance (protoactor
// never made the new one), so every restart ran the same panicking code;
// past the bound the strategy stopped the child, reset its count, and the
// Stopping handler panicked again: restarts forever, and the caller never
// heard back.
func TestASessionThatKeepsPanickingStopsAndRefusesItsCallers(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	var logs testkit.LogBuffer
	h := newHarnessWith(t, 8000, nil, func(_ *harness, d *Deps) {
		d.Log = zerolog.New(&logs)
		d.onReceive = func(chatID string, msg any) {
			if chatID == "c1" && broken.Load() {
				panic("injected bug at " + typeName(msg))
			}
		}
	}, reply("hello from c2"), reply("hello again"))
	h.store.mu.Lock()
	h.store.chats["c2"] = persistence.Chat{ID: "c2", Tenant: "t2", Model: "fake/m"}
	h.store.mu.Unlock()

	ended := make(chan struct{}, 1)
	res, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &SubmitTurn{TurnID: "t1",
		Message: chat.Message{Content: "hi"}, Ended: func() { ended <- struct{}{} }}}, time.Minute).Result()
	if err != nil {
		t.Fatalf("submit to the panicking chat: %v (its caller must hear back)", err)
	}
	if r, ok := res.(*Rejected); !ok || !errors.Is(r.Err, ErrFailed) {
		t.Fatalf("submit to the panicking chat got %#v, want it refused with ErrFailed", res)
	}
	select {
	case <-ended: // it is called just after the refusal is sent
	case <-time.After(time.Minute):
		t.Error("the refused turn's Ended was never called: its tenant's slot stays taken")
	}
	h.waitActive(0)
	if n := strings.Count(logs.String(), "gave up"); n != 1 {
		t.Errorf("%d log lines say the session was given up, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"panic":"injected bug at`) {
		t.Errorf("no log line names the panic:\n%s", logs.String())
	}

	if r, _ := h.submitTo("c2", &SubmitTurn{TurnID: "t2", Message: chat.Message{Content: "hi"}}); r.Problem != nil {
		t.Errorf("another chat's turn ended with %+v", r.Problem)
	}
	broken.Store(false)
	if r, _ := h.turn("again"); r.Problem != nil || len(r.Messages) == 0 || r.Messages[len(r.Messages)-1].Content != "hello again" {
		t.Errorf("the chat woken again answered %+v", r)
	}
}

// panickyMetrics panics when a turn is counted, as the turns counter did
// on a negative token count.
type panickyMetrics struct{ turns atomic.Int32 }

func (m *panickyMetrics) TurnDone(string, chat.Usage) {
	m.turns.Add(1)
	panic("counter cannot decrease in value")
}
func (*panickyMetrics) Fold(bool)          {}
func (*panickyMetrics) Heal()              {}
func (*panickyMetrics) ActiveSessions(int) {}
func (*panickyMetrics) TurnsWaiting(int)   {}

// TestATurnWhoseEndPanicsLeavesTheChatAnswering: the bug that found the
// loop. Closing a turn panics; the restart ends the turn again, which
// panics again: recovered now, so the new instance takes the chat, and
// the next turn runs.
func TestATurnWhoseEndPanicsLeavesTheChatAnswering(t *testing.T) {
	metrics := &panickyMetrics{}
	h := newHarnessWith(t, 8000, nil, func(_ *harness, d *Deps) { d.Metrics = metrics }, reply("one"), reply("two"))
	for _, text := range []string{"first", "second"} {
		if r, _ := h.turn(text); r.Problem != nil {
			t.Fatalf("turn %q ended with %+v", text, r.Problem)
		}
	}
	h.waitActive(1)
	if n := metrics.turns.Load(); n != 2 {
		t.Errorf("the turns were counted %d times, want 2: a restart ended an ended turn again", n)
	}
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	for _, m := range h.store.msgs["c1"] {
		if m.Partial {
			t.Errorf("the log holds a cut mark %q for an answered turn", m.Content)
		}
	}
}
