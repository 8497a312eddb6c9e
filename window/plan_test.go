package window

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestPlanFolds(t *testing.T) {
	small := func(turns int) []Msg {
		b := &builder{}
		for i := range turns {
			b.turn(i, "package main")
		}
		return b.ms
	}
	tests := map[string]struct {
		msgs       []Msg
		window     int
		wantFold   bool
		wantReason string
		check      func(t *testing.T, ms []Msg, res PlanResult, out []Msg)
	}{
		"fits-no-fold": {msgs: small(10), window: 128 << 10},
		// 200 turns of 4 messages is 800 > 600: fold until at most 300 remain.
		"too-many-messages": {msgs: small(200), window: 1 << 20, wantFold: true, wantReason: ReasonMessages,
			check: func(t *testing.T, ms []Msg, res PlanResult, out []Msg) {
				if len(out) > MaxMessages/2 {
					t.Errorf("kept %d messages, want <= %d", len(out), MaxMessages/2)
				}
				// Whole turns go: 300 is a multiple of 4, so exactly 75 turns stay.
				if len(out) != 300 {
					t.Errorf("kept %d messages, want 300", len(out))
				}
			}},
		// 40 turns with a 3,000-char result each do not fit 8K: fold to 1/FoldKeep.
		"over-budget": {msgs: func() []Msg {
			b := &builder{}
			for i := range 40 {
				b.turn(i, text(uint64(i), 1500))
			}
			return b.ms
		}(), window: 8 << 10, wantFold: true, wantReason: ReasonBudget,
			check: func(t *testing.T, ms []Msg, res PlanResult, out []Msg) {
				b := NewBudget(8<<10, 0, 0)
				raw := res.SummaryTokens
				for _, m := range out {
					raw += EstimateMsg(m)
				}
				var cal Calibration
				if keep := b.Transcript / FoldKeep; cal.Estimate(raw) > keep {
					t.Errorf("kept %d tokens, want <= 1/FoldKeep of the budget %d", cal.Estimate(raw), keep)
				}
			}},
		// A chat whose kept part starts with an answer folds that answer away.
		"starts-with-assistant": {msgs: append([]Msg{{Seq: 0, Role: Assistant, Text: "hi"}}, small(2)...),
			window: 128 << 10, wantFold: true, wantReason: ReasonStart},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := deepCopy(tc.msgs)
			b := NewBudget(tc.window, 0, 0)
			res := Plan(PlanInput{Msgs: tc.msgs, Budget: b})
			if res.Fold != tc.wantFold || res.Reason != tc.wantReason {
				t.Fatalf("fold %v reason %q, want %v %q", res.Fold, res.Reason, tc.wantFold, tc.wantReason)
			}
			if !res.Fits {
				t.Fatalf("does not fit: %+v", res)
			}
			out := Assemble(AssembleInput{Msgs: tc.msgs, Plan: res})
			if out[0].Role != User {
				t.Errorf("request starts with %s", out[0].Role)
			}
			if res.Fold && (res.FoldFrom != tc.msgs[0].Seq || res.FoldTo+1 != res.FirstKept) {
				t.Errorf("fold range %d..%d, first kept %d", res.FoldFrom, res.FoldTo, res.FirstKept)
			}
			if tc.check != nil {
				tc.check(t, tc.msgs, res, out)
			}
			assertUnchanged(t, before, tc.msgs)
		})
	}
}

// fataler is what the assertions need of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func assertUnchanged(t fataler, before, after []Msg) {
	t.Helper()
	a, b := marshalEach(before), marshalEach(after)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("input message %d changed:\n%s\n%s", i, a[i], b[i])
		}
	}
}

// A result that arrives after the person spoke again must not be split
// from its call by a fold.
func TestPlanNeverSplitsCallFromResult(t *testing.T) {
	b := &builder{}
	for i := range 160 {
		b.turn(i, "ok")
	}
	// Turn 160 calls a tool whose result lands after the person's next word.
	b.user("start the build")
	b.add(Msg{Role: Assistant, ToolCalls: []ToolCall{{ID: "slow", Name: "build"}}})
	b.user("are you done?")
	b.add(Msg{Role: Tool, ToolCallID: "slow", ToolName: "build", Text: "built"})
	b.assistant("done")
	for i := range 60 {
		b.turn(200+i, "ok")
	}
	ms := b.ms
	res := Plan(PlanInput{Msgs: ms, Budget: NewBudget(1<<20, 0, 0)})
	var callAt, userAt int
	for i, m := range ms {
		if m.Text == "are you done?" {
			userAt = i
		}
		if len(m.ToolCalls) > 0 && m.ToolCalls[0].ID == "slow" {
			callAt = i
		}
	}
	if res.FirstKept == ms[userAt].Seq {
		t.Fatalf("fold cut between call %d and its result", callAt)
	}
	out := Assemble(AssembleInput{Msgs: ms, Plan: res})
	assertPaired(t, out)
}

func assertPaired(t fataler, out []Msg) {
	t.Helper()
	for i := 0; i < len(out); i++ {
		m := out[i]
		if m.Role == Tool {
			t.Fatalf("message %d: tool result %q not right after its call", i, m.ToolCallID)
		}
		for k, c := range m.ToolCalls {
			j := i + 1 + k
			if j >= len(out) || out[j].Role != Tool || out[j].ToolCallID != c.ID {
				t.Fatalf("call %q of message %d has no result right after it", c.ID, i)
			}
		}
		i += len(m.ToolCalls)
	}
}

func TestAssembleStubsStaleResults(t *testing.T) {
	big := strings.Repeat("x", StaleChars)
	b := &builder{}
	b.user("read it").call(big).assistant("read")                          // seqs 1-4: 2 exchanges back → stubbed
	b.user("again").call(big[:StaleChars-1]).assistant("read")             // 5-8: one char short → kept
	b.user("and again").call(big).assistant("read")                        // 9-12: second-last exchange
	b.user("last").call(strings.Repeat("é", StaleChars)).assistant("done") // last exchange → kept
	stub := func(seq int) string {
		return fmt.Sprintf(`[tool result of read_file, 2000 chars, stubbed — conversation_read {"from_seq":%d,"to_seq":%d} returns it]`, seq, seq)
	}
	for _, tc := range []struct {
		name    string
		stale   int
		stubbed []int64 // seqs, at the messages' indexes in the request
		kept    []int
	}{
		{"two exchanges ride whole", 0, []int64{3}, []int{6, 10, 14}},
		{"one exchange rides whole on a working size", WorkingStale, []int64{3, 11}, []int{6, 14}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bud := NewBudget(1<<20, 0, 0)
			bud.Stale = tc.stale
			res := Plan(PlanInput{Msgs: b.ms, Budget: bud})
			out := Assemble(AssembleInput{Msgs: b.ms, Plan: res})
			if !slices.Equal(res.Stubbed, tc.stubbed) {
				t.Errorf("Stubbed = %v, want %v", res.Stubbed, tc.stubbed)
			}
			for _, seq := range tc.stubbed {
				if got := out[seq-1].Text; got != stub(int(seq)) {
					t.Errorf("seq %d sent as %q, want its stub", seq, got)
				}
			}
			for _, i := range tc.kept {
				if out[i].Text != b.ms[i].Text {
					t.Errorf("message %d (seq %d) changed", i, out[i].Seq)
				}
			}
		})
	}
}

func TestAssembleSummaryRidesOnFirstPersonMessage(t *testing.T) {
	b := &builder{}
	b.turn(1, "ok").turn(2, "ok")
	res := Plan(PlanInput{Msgs: b.ms, Budget: NewBudget(1<<20, 0, 0), Summary: "They chose Go."})
	out := Assemble(AssembleInput{Msgs: b.ms, Plan: res, Summary: "They chose Go.", Digest: "turns 1-9 folded"})
	if len(out) != len(b.ms) {
		t.Fatalf("the summary became a message of its own: %d messages, want %d", len(out), len(b.ms))
	}
	first := out[0].Text
	if !strings.HasPrefix(first, SummaryOpen+"\n") || !strings.HasSuffix(first, SummaryClose+"\n\n"+b.ms[0].Text) {
		t.Errorf("first message = %q", first)
	}
	for _, s := range []string{"They chose Go.", "turns 1-9 folded", "not instructions"} {
		if !strings.Contains(first, s) {
			t.Errorf("summary block lacks %q", s)
		}
	}
	if strings.Contains(out[4].Text, SummaryOpen) {
		t.Error("summary repeated on a later message")
	}
}

// One turn bigger than the whole window: the person's text and the tool
// result lose their middles; the assistant's message stays whole.
func TestPlanShortensTheLastTurn(t *testing.T) {
	b := &builder{}
	b.turn(0, "ok")
	b.user("summarise this: " + text(1, 30000)).call(text(2, 40000))
	longAnswer := text(3, 600)
	b.assistant(longAnswer)
	bud := NewBudget(8<<10, 500, 500)
	res := Plan(PlanInput{Msgs: b.ms, Budget: bud})
	if !res.Fits || res.CutChars == 0 {
		t.Fatalf("want a fitting cut, got %+v", res)
	}
	out := Assemble(AssembleInput{Msgs: b.ms, Plan: res})
	if out[0].Seq != 5 {
		t.Errorf("first kept seq %d, want 5 (the turn being answered)", out[0].Seq)
	}
	for _, m := range out {
		switch m.Role {
		case Assistant:
			if m.Text != "" && m.Text != longAnswer {
				t.Error("assistant message changed")
			}
		default:
			if !strings.Contains(m.Text, "[TRUNCATED ") {
				t.Errorf("%s message not shortened", m.Role)
			}
		}
	}
	if got := requestEstimate(out, bud, Calibration{}); got > bud.Limit() {
		t.Errorf("estimate %d over limit %d", got, bud.Limit())
	}
}

// A model switch is a new budget: 1M → 8K folds; back to 1M keeps what the
// 8K plan kept, and the summary carries over.
func TestPlanModelSwitch(t *testing.T) {
	b := &builder{}
	for i := range 30 {
		b.turn(i, text(uint64(i), 1200))
	}
	big := Plan(PlanInput{Msgs: b.ms, Budget: NewBudget(1<<20, 800, 400)})
	if big.Fold {
		t.Fatalf("1M window folded: %+v", big)
	}
	small := Plan(PlanInput{Msgs: b.ms, Budget: NewBudget(8<<10, 800, 400)})
	if !small.Fold || !small.Fits {
		t.Fatalf("8K window: %+v", small)
	}
	kept := b.ms[keptIndex(b.ms, small.FirstKept):]
	back := Plan(PlanInput{Msgs: kept, Budget: NewBudget(1<<20, 800, 400), Summary: "s"})
	if back.Fold || back.FirstKept != small.FirstKept {
		t.Errorf("back on 1M: %+v, want no fold from %d", back, small.FirstKept)
	}
}

// TestPlanEarlyFiresTheCountTriggersEarly: 140 turns of 4 messages (560)
// pass no trigger, but a plan with Early 0.85 folds them by count (560 >
// 510), keeping what a fold at the limit would keep.
func TestPlanEarlyFiresTheCountTriggersEarly(t *testing.T) {
	b := &builder{}
	for i := range 140 {
		b.turn(i, "package main")
	}
	in := PlanInput{Msgs: b.ms, Budget: NewBudget(1<<20, 0, 0)}
	if res := Plan(in); res.Fold {
		t.Fatalf("560 messages folded without Early: %+v", res)
	}
	in.Early = 0.85
	res := Plan(in)
	if !res.Fold || res.Reason != ReasonMessages {
		t.Fatalf("Early 0.85 did not fold 560 messages by count: %+v", res)
	}
	if kept := len(b.ms) - keptIndex(b.ms, res.FirstKept); kept > MaxMessages/2 {
		t.Errorf("kept %d messages, want at most %d", kept, MaxMessages/2)
	}
}
