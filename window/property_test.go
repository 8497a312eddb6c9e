package window

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// genChat draws a transcript: turns of a person's message, up to three tool
// rounds (some results huge, some missing, some stray) and an answer.
func genChat(t *rapid.T) []Msg {
	b := &builder{}
	size := func(label string) int {
		switch rapid.IntRange(0, 9).Draw(t, label+"-kind") {
		case 0:
			return rapid.IntRange(2000, 60000).Draw(t, label+"-huge")
		case 1, 2:
			return rapid.IntRange(200, 3000).Draw(t, label+"-mid")
		default:
			return rapid.IntRange(0, 200).Draw(t, label)
		}
	}
	turns := rapid.IntRange(1, 30).Draw(t, "turns")
	for range turns {
		b.user(text(rapid.Uint64().Draw(t, "seed"), max(1, size("user"))))
		rounds := rapid.IntRange(0, 3).Draw(t, "rounds")
		for range rounds {
			n := rapid.IntRange(1, 3).Draw(t, "calls")
			var calls []ToolCall
			for range n {
				b.ids++
				calls = append(calls, ToolCall{ID: fmt.Sprintf("c%d", b.ids), Name: "tool", Arguments: `{"q":1}`})
			}
			b.add(Msg{Role: Assistant, Text: text(rapid.Uint64().Draw(t, "seed"), rapid.IntRange(0, 100).Draw(t, "think")), ToolCalls: calls})
			for _, c := range calls {
				switch rapid.IntRange(0, 19).Draw(t, "result-kind") {
				case 0: // the result was never stored
				case 1: // a stray result for a call that does not exist
					b.add(Msg{Role: Tool, ToolCallID: "nowhere", ToolName: "tool", Text: "stray"})
				default:
					b.add(Msg{Role: Tool, ToolCallID: c.ID, ToolName: c.Name, Text: text(rapid.Uint64().Draw(t, "seed"), size("result"))})
				}
			}
		}
		if rapid.Bool().Draw(t, "answer") {
			b.assistant(text(rapid.Uint64().Draw(t, "seed"), rapid.IntRange(1, 300).Draw(t, "answer-len")))
		}
	}
	if rapid.Bool().Draw(t, "cache-tokens") {
		for i := range b.ms {
			b.ms[i].Tokens = EstimateMsg(b.ms[i])
		}
	}
	return b.ms
}

func genCalibration(t *rapid.T) Calibration {
	var c Calibration
	for range rapid.IntRange(0, 3).Draw(t, "reports") {
		sent := rapid.IntRange(100, 200_000).Draw(t, "sent")
		ratio := rapid.Float64Range(0.8, 1.4).Draw(t, "ratio")
		c.Observe(sent, int(float64(sent)*ratio))
	}
	return c
}

func TestPlanAssembleProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := genChat(t)
		before := deepCopy(ms)
		bud := NewBudget(rapid.IntRange(4<<10, 1<<20).Draw(t, "window"),
			rapid.IntRange(0, 400).Draw(t, "system"), rapid.IntRange(0, 400).Draw(t, "tools"))
		bud.Stale = rapid.IntRange(0, 2).Draw(t, "stale")
		cal := genCalibration(t)
		summary := text(rapid.Uint64().Draw(t, "seed"), rapid.IntRange(0, 400).Draw(t, "summary"))
		res := Plan(PlanInput{Msgs: ms, Budget: bud, Calibration: cal, Summary: summary})
		out := Assemble(AssembleInput{Msgs: ms, Plan: res, Summary: summary})

		assertUnchanged(t, before, ms)
		if out[0].Role != User {
			t.Fatalf("request starts with %s", out[0].Role)
		}
		assertPaired(t, out)

		lastUser := 0
		for i, m := range ms {
			if m.Role == User {
				lastUser = i
			}
		}
		if res.Fits {
			if got := requestEstimate(out, bud, cal); got > bud.Limit() {
				t.Fatalf("estimate %d over limit %d (plan said %d)", got, bud.Limit(), res.Estimate)
			}
		} else if res.FirstKept != ms[lastUser].Seq || (res.CutChars != minCutChars && hasLongText(ms[lastUser:])) {
			// Not fitting is allowed only once everything that may go has gone.
			t.Fatalf("gave up early: %+v", res)
		}
		assertLastTurnWhole(t, ms[lastUser:], out, res.CutChars)
	})
}

func hasLongText(ms []Msg) bool {
	for _, m := range ms {
		if m.Role != Assistant && len(m.Text) > minCutChars {
			return true
		}
	}
	return false
}

// assertLastTurnWhole checks every message of the turn being answered is in
// the request, unchanged or (person's and tool texts only) shortened.
func assertLastTurnWhole(t *rapid.T, turn, out []Msg, cut int) {
	sent := map[string]Msg{}
	for _, m := range out {
		sent[fmt.Sprint(m.Seq, m.Role, m.ToolCallID)] = m
	}
	for k, m := range turn {
		if m.Role == Tool && m.ToolCallID == "nowhere" {
			continue // a stray result is left out by design
		}
		got, ok := sent[fmt.Sprint(m.Seq, m.Role, m.ToolCallID)]
		if !ok {
			t.Fatalf("last turn message seq %d (%s) missing", m.Seq, m.Role)
		}
		if k == 0 {
			if i := strings.Index(got.Text, SummaryClose+"\n\n"); i >= 0 {
				got.Text = got.Text[i+len(SummaryClose)+2:]
			}
		}
		switch {
		case got.Text == m.Text:
		case m.Role != Assistant && cut > 0 && strings.Contains(got.Text, "[TRUNCATED "):
		default:
			t.Fatalf("last turn message seq %d (%s) changed", m.Seq, m.Role)
		}
		if m.Role == Assistant && (got.Thinking != m.Thinking || len(got.ToolCalls) != len(m.ToolCalls)) {
			t.Fatalf("assistant message seq %d changed", m.Seq)
		}
	}
}

// AssembleInto over an array an earlier assembly filled gives what
// Assemble gives, in that array when it has room: nothing of the earlier
// result shows through.
func TestAssembleIntoReusesAnArrayAndMatchesAssemble(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := genChat(t)
		bud := NewBudget(rapid.IntRange(4<<10, 1<<20).Draw(t, "window"), 0, 0)
		summary := text(rapid.Uint64().Draw(t, "seed"), rapid.IntRange(0, 400).Draw(t, "summary"))
		res := Plan(PlanInput{Msgs: ms, Budget: bud, Summary: summary})
		earlier := Assemble(AssembleInput{Msgs: genChat(t), Plan: PlanResult{}})
		want := Assemble(AssembleInput{Msgs: ms, Plan: res, Summary: summary})
		got := AssembleInto(earlier, AssembleInput{Msgs: ms, Plan: res, Summary: summary})
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("AssembleInto gave\n%v\nAssemble gave\n%v", got, want)
		}
		// Room means for the kept messages plus one and for what the assembly
		// holds: a call whose result was never stored adds a stand-in result.
		if need := max(len(ms)+1, len(got)); cap(earlier) >= need && &got[0] != &earlier[0] {
			t.Fatalf("an array with room for %d (cap %d) was not reused", need, cap(earlier))
		}
	})
}

// Reading a tail from the end splits a text where counting from its start
// does, for any bytes, valid UTF-8 or not.
func TestLastRunesOffsetMatchesCountingFromTheStart(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := string(rapid.SliceOf(rapid.SampledFrom([]byte{'a', ' ', 0x80, 0xbf, 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80, 0xff})).Draw(t, "bytes"))
		n := utf8.RuneCountInString(s)
		k := rapid.IntRange(0, n).Draw(t, "k")
		if got, want := lastRunesOffset(s, k), runeOffset(s, n-k); got != want {
			t.Fatalf("lastRunesOffset(%q, %d) = %d, runeOffset from the start %d", s, k, got, want)
		}
	})
}

// A turn too big for its window keeps nearly as much as fits: the plan's cut
// fits, and a cut a few percent longer does not.
func TestPlanCutKeepsNearlyAllThatFits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := &builder{}
		for i := range rapid.IntRange(0, 3).Draw(t, "turns") {
			b.turn(i, text(uint64(i), 400))
		}
		b.user(text(rapid.Uint64().Draw(t, "seed"), rapid.IntRange(2_000, 120_000).Draw(t, "message")))
		if rapid.Bool().Draw(t, "tool") {
			b.call(text(rapid.Uint64().Draw(t, "seed2"), rapid.IntRange(300, 60_000).Draw(t, "result")))
		}
		for i := range b.ms {
			b.ms[i].Tokens = EstimateMsg(b.ms[i])
		}
		bud := NewBudget(rapid.IntRange(4<<10, 24<<10).Draw(t, "window"), 300, 300)
		res := Plan(PlanInput{Msgs: b.ms, Budget: bud})
		if res.CutChars <= minCutChars {
			t.Skip("nothing to cut, or nothing fits")
		}
		at := func(cut int) int { // with the room the plan keeps for a summary
			r := res
			r.CutChars = cut
			raw := bud.System + bud.Tools + res.SummaryTokens
			for _, m := range Assemble(AssembleInput{Msgs: b.ms, Plan: r}) {
				raw += EstimateMsg(m)
			}
			return Calibration{}.Estimate(raw)
		}
		if got := at(res.CutChars); got > bud.Limit() {
			t.Fatalf("cut %d: estimate %d over limit %d", res.CutChars, got, bud.Limit())
		}
		if longer := res.CutChars + res.CutChars/20 + 64; at(longer) <= bud.Limit() {
			t.Fatalf("cut %d, yet %d fits too (limit %d)", res.CutChars, longer, bud.Limit())
		}
	})
}

// A chat's cut memo changes no plan: plans of one chat, with budgets that
// come and go and messages appended, are what they are without it; and a
// plan found again is the memo's.
func TestCutMemoChangesNoPlan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := &builder{}
		b.turn(0, text(1, 400))
		b.user(text(rapid.Uint64().Draw(t, "seed"), rapid.IntRange(4_000, 60_000).Draw(t, "message")))
		var memo CutMemo
		for i := range rapid.IntRange(1, 6).Draw(t, "plans") {
			if rapid.Bool().Draw(t, "append") {
				b.call(text(uint64(i), rapid.IntRange(100, 30_000).Draw(t, "result")))
			}
			in := PlanInput{Msgs: b.ms, Budget: NewBudget(rapid.SampledFrom([]int{4 << 10, 8 << 10, 16 << 10}).Draw(t, "window"), 300, 300)}
			want := Plan(in)
			in.Cuts = &memo
			if got := Plan(in); !reflect.DeepEqual(got, want) {
				t.Fatalf("plan %d with the memo %+v, without %+v", i, got, want)
			}
			if want.CutChars > 0 && (memo.cutChars != want.CutChars || memo.rawCut != want.Raw) {
				t.Fatalf("plan %d cut %d, the memo holds %d", i, want.CutChars, memo.cutChars)
			}
		}
	})
}
