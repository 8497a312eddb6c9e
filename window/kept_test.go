package window

import (
	"testing"

	"pgregory.net/rapid"
)

// TestKeptTotalsAreAFullRecount: whatever messages come and fold away, in
// whatever steps, the totals Kept moves equal estimating every kept message
// afresh, and its messages are the chat's from the fold on.
func TestKeptTotalsAreAFullRecount(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		chat := genChat(rt)
		var k Kept
		next := 0
		for next < len(chat) {
			switch rapid.IntRange(0, 3).Draw(rt, "step") {
			case 0: // fold up to a seq among the kept (or past them all)
				if kept := k.Msgs(); len(kept) > 0 {
					k.DropBefore(kept[rapid.IntRange(0, len(kept)-1).Draw(rt, "fold")].Seq + rapid.Int64Range(0, 1).Draw(rt, "past"))
				}
			default: // some messages come
				n := rapid.IntRange(1, len(chat)-next).Draw(rt, "come")
				k.Append(chat[next : next+n]...)
				next += n
			}
			fresh := make([]Msg, len(k.Msgs()))
			for i, m := range k.Msgs() {
				m.Tokens, m.Conservative = 0, 0
				fresh[i] = m
			}
			if got, want := k.Tokens(), EstimateMsgs(fresh); got != want {
				rt.Fatalf("kept tokens %d; a recount says %d", got, want)
			}
			if got, want := k.Conservative(), ConservativeTokens(fresh); got != want {
				rt.Fatalf("kept conservative %d; a recount says %d", got, want)
			}
			if got, want := ConservativeTokens(k.Msgs()), k.Conservative(); got != want {
				rt.Fatalf("the cached conservative counts sum to %d, not %d", got, want)
			}
			if kept := k.Msgs(); len(kept) > 0 && (kept[len(kept)-1].Seq != chat[next-1].Seq) {
				rt.Fatalf("the newest kept message is seq %d, not %d", kept[len(kept)-1].Seq, chat[next-1].Seq)
			}
		}
	})
}

// TestKeptNoFoldNeverMissesAFold: whenever NoFold says a plan of the kept
// messages would not fold, on any budget, calibration, summary and Early,
// Plan does not fold them.
func TestKeptNoFoldNeverMissesAFold(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		chat := genChat(rt)
		var k Kept
		k.Append(chat...)
		if rapid.Bool().Draw(rt, "fold-first") {
			k.DropBefore(chat[rapid.IntRange(0, len(chat)-1).Draw(rt, "fold")].Seq)
		}
		b := NewBudget(rapid.IntRange(4<<10, 1<<20).Draw(rt, "window"),
			rapid.IntRange(0, 400).Draw(rt, "system"), rapid.IntRange(0, 400).Draw(rt, "tools"))
		b.Stale = rapid.IntRange(0, 2).Draw(rt, "stale")
		b.Transcript = int(float64(b.Transcript) * rapid.Float64Range(0.1, 1).Draw(rt, "soft"))
		early := rapid.SampledFrom([]float64{0, 0.3, 0.85}).Draw(rt, "early")
		cal := genCalibration(rt)
		summary := text(rapid.Uint64().Draw(rt, "seed"), rapid.IntRange(0, 400).Draw(rt, "summary"))
		sum := SummaryTokens(summary, "")
		if !k.NoFold(b, cal, sum, early) {
			return
		}
		if res := Plan(PlanInput{Msgs: k.Msgs(), Budget: b, Calibration: cal, Summary: summary, SummaryTokens: sum, Early: early}); res.Fold {
			rt.Fatalf("NoFold, but the plan folds: %+v", res)
		}
	})
}

// TestKeptNoFoldFarFromAFold: a short chat on a big window needs no plan;
// the same chat past the count trigger, or starting with no person's
// message, may fold.
func TestKeptNoFoldFarFromAFold(t *testing.T) {
	short := &builder{}
	for i := range 3 {
		short.turn(i, "package main")
	}
	long := &builder{}
	for i := range 140 {
		long.turn(i, "package main")
	}
	big := NewBudget(1<<20, 100, 100)
	for _, c := range []struct {
		name  string
		ms    []Msg
		early float64
		want  bool
	}{
		{"short", short.ms, 0, true},
		{"short, early", short.ms, 0.85, true},
		{"560 messages", long.ms, 0, true},
		{"560 messages, early", long.ms, 0.85, false},
		{"starting with an answer", short.ms[1:], 0, false},
	} {
		var k Kept
		k.Append(c.ms...)
		if got := k.NoFold(big, Calibration{}, 0, c.early); got != c.want {
			t.Errorf("%s: NoFold %v, want %v", c.name, got, c.want)
		}
	}
	var k Kept
	k.Append(short.ms...)
	if k.NoFold(NewBudget(4<<10, 3000, 600), Calibration{}, 0, 0) {
		t.Error("NoFold on a budget the system prompt and tools fill")
	}
}
