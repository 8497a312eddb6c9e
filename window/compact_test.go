package window

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// monsterTurn is a task, then n rounds of a call and a big result.
func monsterTurn(n, resultChars int) []Msg {
	ms := []Msg{{Seq: 1, Role: User, Text: "Read all forty mails and list every invoice number."}}
	for i := range n {
		seq := int64(2 + 2*i)
		id := fmt.Sprintf("c%d", i)
		ms = append(ms,
			Msg{Seq: seq, Role: Assistant, Text: "Reading the next mail.", ToolCalls: []ToolCall{{ID: id, Name: "read_mail", Arguments: fmt.Sprintf(`{"n":%d}`, i)}}},
			Msg{Seq: seq + 1, Role: Tool, ToolCallID: id, ToolName: "read_mail", Text: strings.Repeat(fmt.Sprintf("mail %d body ", i), resultChars/12), Images: 1})
	}
	return ms
}

func TestCompactTurnReachesTheTargetAndProtectsWhatItMust(t *testing.T) {
	ms := monsterTurn(40, 20_000)
	const budget = 6964 // an 8K window less its answer room
	if !NeedsCompaction(ConservativeTokens(ms), 300, 0, budget) {
		t.Fatal("a 40×20 KB turn does not trigger compaction on an 8K window")
	}
	out, rep := CompactTurn(ms, ConservativeTokens(ms), 0, 300, budget)
	// The three protected results alone pass the target here, so every other
	// result is cut to the least it keeps; the request's fit is then the fold
	// plan's job (Plan shortens protected texts too).
	for i := 2; i < len(ms)-6; i += 2 {
		if n := len(out[i].Text); n > compactKeepChars+120 {
			t.Fatalf("unprotected result %d keeps %d chars", i, n)
		}
	}
	if rep.ImagesStripped != 40 || rep.Targets == 0 || rep.Before <= rep.After {
		t.Fatalf("report %+v", rep)
	}
	if out[0].Text != ms[0].Text {
		t.Fatal("the task message was cut")
	}
	for i := len(ms) - 6; i < len(ms); i++ { // last 3 assistants and last 3 results
		if out[i].Text != ms[i].Text {
			t.Fatalf("protected message %d was cut", i)
		}
	}
	if !strings.Contains(out[2].Text, "[TRUNCATED") {
		t.Fatal("an old tool result was not truncated with a label")
	}
	if ms[2].Images != 1 || strings.Contains(ms[2].Text, "TRUNCATED") {
		t.Fatal("the input was modified")
	}
}

func TestCompactTurnMeetsAReachableTarget(t *testing.T) {
	ms := monsterTurn(40, 1_500)
	const budget = 60_000
	if !NeedsCompaction(ConservativeTokens(ms), 300, 0, budget/2) {
		t.Fatal("no trigger")
	}
	_, rep := CompactTurn(ms, ConservativeTokens(ms), 0, 300, budget/2)
	if rep.After > int(CompactTarget*budget/2) {
		t.Fatalf("after %d, target %d", rep.After, int(CompactTarget*budget/2))
	}
}

func TestCompactTurnLeavesASmallTurnAlone(t *testing.T) {
	ms := monsterTurn(2, 100)
	if NeedsCompaction(ConservativeTokens(ms), 300, 0, 100_000) {
		t.Fatal("a small turn triggers compaction")
	}
	if NeedsCompaction(ConservativeTokens(ms), 300, 80_000, 100_000) == false {
		t.Fatal("the provider's reported count past the trigger does not trigger")
	}
}

func TestCompactTurnProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 30).Draw(t, "rounds")
		size := rapid.IntRange(10, 30_000).Draw(t, "chars")
		budget := rapid.IntRange(2_000, 200_000).Draw(t, "budget")
		ms := monsterTurn(n, size)
		orig := make([]Msg, len(ms))
		copy(orig, ms)
		out, rep := CompactTurn(ms, ConservativeTokens(ms), 0, 100, budget)
		if !reflect.DeepEqual(ms, orig) {
			t.Fatal("input modified")
		}
		if len(out) != len(ms) || rep.After > rep.Before {
			t.Fatalf("compaction grew the request: %+v", rep)
		}
		for i := range out {
			if out[i].Seq != ms[i].Seq || out[i].Role != ms[i].Role || out[i].ToolCallID != ms[i].ToolCallID || len(out[i].ToolCalls) != len(ms[i].ToolCalls) {
				t.Fatalf("message %d changed identity", i)
			}
			if out[i].IsError != ms[i].IsError {
				t.Fatal("error flag changed")
			}
		}
	})
}

// compactTurnWhole is CompactTurn as it was before it worked on the live
// turn alone: a clone of every message, protection (with its map) and cuts
// indexed over all of them. The property below holds the fast path to it.
func compactTurnWhole(ms []Msg, turnStart, fixed, inputBudget int) ([]Msg, CompactReport) {
	out := slices.Clone(ms)
	rep := CompactReport{Before: fixed + ConservativeTokens(ms)}
	for i := turnStart; i < len(out); i++ {
		if out[i].Role == Tool && out[i].Images > 0 {
			rep.ImagesStripped += out[i].Images
			out[i].Images = 0
			out[i].uncache()
		}
	}
	target := int(CompactTarget * float64(inputBudget))
	protected := make([]bool, len(out))
	if turnStart < len(out) {
		protected[turnStart] = true
	}
	seen := map[Role]int{}
	for i := len(out) - 1; i >= turnStart; i-- {
		r := out[i].Role
		if seen[r] < protectedPerRole {
			protected[i] = true
		}
		seen[r]++
		if r == Tool && out[i].IsError {
			protected[i] = true
		}
	}
	// The groups are chosen as before; only their indices were the whole
	// chat's.
	groups := targetGroups(out[turnStart:], protected[turnStart:])
	for _, g := range groups {
		for k := range g {
			g[k] += turnStart
		}
	}
	cut := make([]bool, len(out))
	for _, group := range groups {
		for pass := 0; pass < 4; pass++ {
			excess := fixed + ConservativeTokens(out) - target
			if excess <= 0 || cutProportionally(out, group, int(float64(excess)*conservativeCharsPerToken), cut) == 0 {
				break
			}
		}
	}
	for _, c := range cut {
		if c {
			rep.Targets++
		}
	}
	rep.After = fixed + ConservativeTokens(out)
	return out, rep
}

// TestCompactTurnEqualsTheWholeClone: working on the live turn alone gives
// the same messages and report as cloning and scanning every message, on
// any chat, turn start (a person's message or any index), pictures and
// budget; when it changes nothing it returns the input itself.
func TestCompactTurnEqualsTheWholeClone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := genChat(t)
		for i := range ms {
			if ms[i].Role == Tool && rapid.IntRange(0, 4).Draw(t, "pictures?") == 0 {
				ms[i].Images = rapid.IntRange(1, 3).Draw(t, "pictures")
			}
		}
		start := rapid.IntRange(0, len(ms)).Draw(t, "start")
		if rapid.Bool().Draw(t, "at a person's message") {
			for i := len(ms) - 1; i >= 0; i-- {
				if ms[i].Role == User {
					start = i
					break
				}
			}
		}
		fixed := rapid.IntRange(0, 5_000).Draw(t, "fixed")
		budget := rapid.IntRange(500, 100_000).Draw(t, "budget")
		orig := slices.Clone(ms)
		want, wantRep := compactTurnWhole(ms, start, fixed, budget)
		got, rep := CompactTurn(ms, ConservativeTokens(ms), start, fixed, budget)
		if !reflect.DeepEqual(ms, orig) {
			t.Fatal("input modified")
		}
		if rep != wantRep {
			t.Fatalf("report %+v, the whole clone's %+v", rep, wantRep)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("messages differ from the whole clone's (report %+v)", rep)
		}
		if same := len(got) > 0 && &got[0] == &ms[0]; same != (rep.Targets == 0 && rep.ImagesStripped == 0 && len(ms) > 0) {
			t.Fatalf("returned the input itself: %v, report %+v", same, rep)
		}
	})
}
