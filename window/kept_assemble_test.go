package window

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestKeptAssemblyIsAFreshOne: a chat grows by messages of every kind
// (calls, results late, stray or missing, results long enough to stub,
// refused answers), folds now and then, and its plan's first kept message,
// stale exchanges, cut and summary change; every Kept.Assemble equals an
// assembly from scratch, and the messages it says it reused are the last
// one's.
func TestKeptAssemblyIsAFreshOne(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var k Kept
		var seq int64
		var ids, pending []string
		var last []Msg
		stale := rapid.IntRange(0, 3).Draw(t, "stale")
		for range 14 {
			grow(t, &k, &seq, &ids, &pending)
			ms := k.Msgs()
			if len(ms) == 0 {
				continue
			}
			if rapid.IntRange(0, 9).Draw(t, "fold") == 0 {
				k.DropBefore(ms[rapid.IntRange(0, len(ms)-1).Draw(t, "fold-at")].Seq)
				ms = k.Msgs()
			}
			if rapid.IntRange(0, 9).Draw(t, "stale-change") == 0 {
				stale = rapid.IntRange(0, 3).Draw(t, "stale")
			}
			plan := PlanResult{FirstKept: ms[0].Seq, Stale: stale}
			if rapid.IntRange(0, 5).Draw(t, "first-kept-change") == 0 {
				plan.FirstKept = ms[rapid.IntRange(0, len(ms)-1).Draw(t, "first-kept")].Seq
			}
			if rapid.IntRange(0, 5).Draw(t, "cut") == 0 {
				plan.CutChars = 300
			}
			summary := rapid.SampledFrom([]string{"", "what came before", "what came before"}).Draw(t, "summary")
			got, reused := k.Assemble(plan, summary, "")
			want := AssembleInto(nil, AssembleInput{Msgs: ms, Plan: plan, Summary: summary})
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("kept assembly\n%+v\nfrom scratch\n%+v", got, want)
			}
			if reused > len(last) || reused > 0 && !reflect.DeepEqual(got[:reused], last[:reused]) {
				t.Fatalf("reused %d messages of the last assembly, which were\n%+v\nnow\n%+v", reused, last, got)
			}
			last = deepCopy(got)
		}
	})
}

// TestKeptAssemblyReadsOnlyTheNewestExchanges: a chat's next assembly
// goes on from where its last one stopped changing, without reading the
// messages before it again (a kept message is never written: here one is,
// to show what is read).
func TestKeptAssemblyReadsOnlyTheNewestExchanges(t *testing.T) {
	var k Kept
	k.Append(Msg{Seq: 1, Role: User, Text: "first"}, Msg{Seq: 2, Role: Assistant, Text: "one"},
		Msg{Seq: 3, Role: User, Text: "second"}, Msg{Seq: 4, Role: Assistant, Text: "two"},
		Msg{Seq: 5, Role: User, Text: "third"})
	plan := PlanResult{FirstKept: 1}
	if _, reused := k.Assemble(plan, "", ""); reused != 0 {
		t.Fatalf("a first assembly reused %d messages", reused)
	}
	k.msgs[0].Text = "written over"
	k.Append(Msg{Seq: 6, Role: Assistant, Text: "three"}, Msg{Seq: 7, Role: User, Text: "fourth"})
	got, reused := k.Assemble(plan, "", "")
	if reused != 2 || got[0].Text != "first" || got[len(got)-1].Text != "fourth" {
		t.Errorf("next assembly reused %d, sends %q … %q; want 2 reused, \"first\" … \"fourth\"", reused, got[0].Text, got[len(got)-1].Text)
	}
	k.DropBefore(1) // no fold: the same messages
	if got, _ = k.Assemble(PlanResult{FirstKept: 1, Stale: 1}, "", ""); got[0].Text != "written over" {
		t.Errorf("another plan's assembly did not read the messages again: %q", got[0].Text)
	}
}

// grow adds up to six messages of any kind to k: a person's, calls, their
// results (mostly in order; late, stray, missing; long enough to stub), answers, refused ones.
func grow(t *rapid.T, k *Kept, seq *int64, ids, pending *[]string) {
	for range rapid.IntRange(0, 6).Draw(t, "new") {
		*seq++
		m := Msg{Seq: *seq, Text: strings.Repeat("w", rapid.IntRange(0, 40).Draw(t, "len"))}
		switch rapid.IntRange(0, 5).Draw(t, "kind") {
		case 0, 1:
			m.Role = User
		case 2:
			m.Role = Assistant
			for range rapid.IntRange(0, 2).Draw(t, "calls") {
				*ids = append(*ids, fmt.Sprintf("c%d", len(*ids)))
				*pending = append(*pending, (*ids)[len(*ids)-1])
				m.ToolCalls = append(m.ToolCalls, ToolCall{ID: (*ids)[len(*ids)-1], Name: "tool"})
			}
		case 3, 4:
			m.Role, m.ToolName, m.ToolCallID = Tool, "tool", "stray"
			switch n := len(*ids); {
			case len(*pending) > 0 && rapid.IntRange(0, 9).Draw(t, "in-order") > 0:
				m.ToolCallID, *pending = (*pending)[0], (*pending)[1:]
			case n > 0:
				m.ToolCallID = (*ids)[n-1-rapid.IntRange(0, min(3, n-1)).Draw(t, "back")]
			}
			if rapid.IntRange(0, 2).Draw(t, "long") == 0 {
				m.Text = strings.Repeat("r", StaleChars+10)
			}
		default:
			m.Role, m.Refused = Assistant, rapid.IntRange(0, 3).Draw(t, "refused") == 0
		}
		k.Append(m)
	}
}

// TestKeptPlanIsAFreshOne: as a chat grows, folds and changes its
// budget's stale exchanges, every Kept.Plan equals a plan from scratch.
func TestKeptPlanIsAFreshOne(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var k Kept
		var seq int64
		var ids, pending []string
		b := NewBudget(rapid.IntRange(1000, 40000).Draw(t, "window"), 100, 100)
		b.Stale = rapid.IntRange(0, 3).Draw(t, "stale")
		summary := rapid.SampledFrom([]string{"", "what came before"}).Draw(t, "summary")
		for range 14 {
			grow(t, &k, &seq, &ids, &pending)
			if ms := k.Msgs(); len(ms) > 0 && rapid.IntRange(0, 9).Draw(t, "fold") == 0 {
				k.DropBefore(ms[rapid.IntRange(0, len(ms)-1).Draw(t, "fold-at")].Seq)
			}
			if rapid.IntRange(0, 9).Draw(t, "stale-change") == 0 {
				b.Stale = rapid.IntRange(0, 3).Draw(t, "stale")
			}
			in := PlanInput{Budget: b, Summary: summary, Early: rapid.SampledFrom([]float64{0, 0.85}).Draw(t, "early")}
			got := k.Plan(in)
			in.Msgs = k.Msgs()
			if want := Plan(in); !reflect.DeepEqual(got, want) {
				t.Fatalf("kept plan\n%+v\nfrom scratch\n%+v", got, want)
			}
		}
	})
}

// TestKeptPlanReadsOnlyTheNewestExchanges: a chat's next plan goes on
// from its last scan, without reading the messages before the newest
// exchanges again (a kept message is never written: here one's cached
// estimate is, to show what is read).
func TestKeptPlanReadsOnlyTheNewestExchanges(t *testing.T) {
	var k Kept
	k.Append(Msg{Seq: 1, Role: User, Text: "first"}, Msg{Seq: 2, Role: Assistant, Text: "one"},
		Msg{Seq: 3, Role: User, Text: "second"}, Msg{Seq: 4, Role: Assistant, Text: "two"},
		Msg{Seq: 5, Role: User, Text: "third"})
	in := PlanInput{Budget: NewBudget(32768, 100, 100)}
	before := k.Plan(in)
	k.msgs[0].Tokens += 1000
	k.Append(Msg{Seq: 6, Role: Assistant, Text: "three"}, Msg{Seq: 7, Role: User, Text: "fourth"})
	added := EstimateMsgs(k.msgs[5:])
	if got := k.Plan(in); got.Raw != before.Raw+added {
		t.Errorf("next plan's raw estimate %d, want %d: the last one's %d and the new messages' %d", got.Raw, before.Raw+added, before.Raw, added)
	}
}
