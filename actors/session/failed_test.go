package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/providers"
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

// refusing fails every call with err.
type refusing struct {
	calls atomic.Int32
	err   error
}

func (r *refusing) Stream(context.Context, providers.Request, func(providers.Event)) (providers.Response, error) {
	r.calls.Add(1)
	return providers.Response{}, r.err
}

func (r *refusing) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

// TestAProviderGivenUpOnSaysWhy: a failure worth another try (429, 529,
// 5xx) that is not tried again says why in the turn's problem: the tries
// are spent, or the wait the provider asked for ends past the turn's
// deadline. The bare body read as if agentd had never retried.
func TestAProviderGivenUpOnSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   *providers.Error
		calls int32
		want  string
	}{
		{name: "tries spent", calls: maxRetries + 1, want: fmt.Sprintf("given up after %d tries", maxRetries+1),
			err: &providers.Error{Provider: "fake", Status: 529, Retryable: true, RetryAfter: time.Millisecond,
				Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}},
		{name: "asked to wait past the deadline", calls: 1, want: "1h0m0s, ends past the turn's deadline",
			err: &providers.Error{Provider: "fake", Status: 429, Retryable: true, RetryAfter: time.Hour,
				Body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &refusing{err: tc.err}
			h := newHarnessWith(t, 128_000, nil, func(_ *harness, d *Deps) {
				d.Catalog = oneModel{client: model, info: providers.ModelInfo{Provider: "fake", ID: "m", Window: 128_000}}
			})
			res, _ := h.turn("hello")
			if res.Problem == nil || res.Problem.Kind != chat.ProblemProvider || !strings.Contains(res.Problem.Message, tc.want) {
				t.Fatalf("problem %+v, want a provider problem saying %q", res.Problem, tc.want)
			}
			if !strings.Contains(res.Problem.Message, tc.err.Body) {
				t.Errorf("problem %q leaves out the provider's body", res.Problem.Message)
			}
			if n := model.calls.Load(); n != tc.calls {
				t.Errorf("the model was asked %d times, want %d", n, tc.calls)
			}
		})
	}
}
