package window

import (
	"encoding/json"
	"sync"
	"testing"
)

// chat100K is a 100,000-message chat of tool-using turns, with each
// message's estimate cached as the session actor caches it.
var chat100K = sync.OnceValue(func() []Msg {
	b := &builder{}
	for i := 0; len(b.ms) < 100_000; i++ {
		size := 300
		if i%4 == 0 {
			size = 3000
		}
		b.turn(i, text(uint64(i), size))
	}
	ms := b.ms[:100_000]
	for i := range ms {
		ms[i].Tokens = EstimateMsg(ms[i])
	}
	return ms
})

var benchBudget = NewBudget(200_000, 2000, 3000)

// BenchmarkBuildRequest100K plans and assembles a request from the whole
// 100,000-message chat: the first request after loading it, which folds.
func BenchmarkBuildRequest100K(b *testing.B) {
	ms := chat100K()
	for b.Loop() {
		res := Plan(PlanInput{Msgs: ms, Budget: benchBudget, Summary: "s"})
		_ = Assemble(AssembleInput{Msgs: ms, Plan: res, Summary: "s"})
	}
}

// steady returns the unfolded part after the fold, as the actor keeps it.
func steady() []Msg {
	ms := chat100K()
	res := Plan(PlanInput{Msgs: ms, Budget: benchBudget, Summary: "s"})
	return ms[keptIndex(ms, res.FirstKept):]
}

// BenchmarkBuildRequestSteady is every later turn: plan and assemble from
// the first kept message on.
func BenchmarkBuildRequestSteady(b *testing.B) {
	ms := steady()
	for b.Loop() {
		res := Plan(PlanInput{Msgs: ms, Budget: benchBudget, Summary: "s"})
		_ = Assemble(AssembleInput{Msgs: ms, Plan: res, Summary: "s"})
	}
}

// BenchmarkJSONMarshalRequest encodes the same assembled request with plain
// encoding/json: the yardstick for the two above.
func BenchmarkJSONMarshalRequest(b *testing.B) {
	ms := steady()
	res := Plan(PlanInput{Msgs: ms, Budget: benchBudget, Summary: "s"})
	out := Assemble(AssembleInput{Msgs: ms, Plan: res, Summary: "s"})
	for b.Loop() {
		if _, err := json.Marshal(out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanCutsLongMessage plans a turn whose message alone is larger
// than a 32K window (200 KB pasted), so the plan must find how much of its
// head and tail fit.
func BenchmarkPlanCutsLongMessage(b *testing.B) {
	bl := &builder{}
	for i := range 6 {
		bl.turn(i, text(uint64(i), 600))
	}
	bl.user(text(99, 200_000))
	ms := bl.ms
	for i := range ms {
		ms[i].Tokens = EstimateMsg(ms[i])
	}
	bud := NewBudget(32768, 2000, 1000)
	for _, memo := range []bool{false, true} {
		b.Run(map[bool]string{false: "found", true: "again"}[memo], func(b *testing.B) {
			in := PlanInput{Msgs: ms, Budget: bud, Summary: "s"}
			if memo { // a chat plans the same turn again
				in.Cuts = &CutMemo{}
				Plan(in)
			}
			for b.Loop() {
				if res := Plan(in); res.CutChars == 0 {
					b.Fatal("no cut")
				}
			}
		})
	}
}

// BenchmarkAssembleNextTurn is a 32K chat's next request: about 300
// kept messages of tool-using turns and one turn more each time
// (nextTurns); from scratch (AssembleInto, what a turn did before) and
// going on from the last assembly (Kept.Assemble).
func BenchmarkAssembleNextTurn(b *testing.B) {
	var dst []Msg
	nextTurns(b, func(k *Kept, kept bool) {
		plan := PlanResult{FirstKept: k.msgs[0].Seq, Stale: StaleExchanges}
		if kept {
			_, _ = k.Assemble(plan, "s", "")
		} else {
			dst = AssembleInto(dst, AssembleInput{Msgs: k.Msgs(), Plan: plan, Summary: "s"})
		}
	})
}

// BenchmarkPlanNextTurn is BenchmarkAssembleNextTurn's turns planned on a
// 32K window: from scratch (Plan) and going on from the last scan
// (Kept.Plan).
func BenchmarkPlanNextTurn(b *testing.B) {
	bud := NewBudget(32768, 2000, 3000)
	nextTurns(b, func(k *Kept, kept bool) {
		in := PlanInput{Budget: bud, Summary: "s"}
		if kept {
			_ = k.Plan(in)
		} else {
			in.Msgs = k.Msgs()
			_ = Plan(in)
		}
	})
}

// nextTurns runs turn, from scratch and kept, on a chat's kept messages
// of tool-using turns with one turn more each time, starting again every
// 50 turns (not timed).
func nextTurns(b *testing.B, turn func(k *Kept, kept bool)) {
	all := chat100K()[:3000]
	var users []int // where each turn starts
	for i, m := range all {
		if m.Role == User && i >= 300 {
			users = append(users, i)
		}
	}
	for _, kept := range []bool{false, true} {
		b.Run(map[bool]string{false: "scratch", true: "kept"}[kept], func(b *testing.B) {
			var k Kept
			t := 0
			b.ReportAllocs()
			for b.Loop() {
				if t%50 == 0 { // the fold's own cost is not the turn's
					b.StopTimer()
					k = Kept{}
					k.Append(all[:users[0]]...)
					t = 0
					b.StartTimer()
				}
				k.Append(all[users[t]:users[t+1]]...)
				t++
				turn(&k, kept)
			}
		})
	}
}

// BenchmarkCompactTurnUnderPressure is the in-turn safety net's check of a
// 32K chat's next turn under context pressure with nothing in its live
// turn to cut: 300 kept messages, the live turn the newest.
func BenchmarkCompactTurnUnderPressure(b *testing.B) {
	var k Kept
	k.Append(chat100K()[:300]...)
	ms := k.Msgs()
	start := len(ms) - 1
	for ms[start].Role != User {
		start--
	}
	bud := NewBudget(32768, 2000, 3000)
	b.ReportAllocs()
	for b.Loop() {
		if _, rep := CompactTurn(ms, k.Conservative(), start, 2000, bud.Window-bud.Answer); rep.Targets > 0 {
			b.Fatalf("cut %d messages", rep.Targets)
		}
	}
}
