package window

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// fakeProvider "counts" a request 7% above the raw estimate, as a tokenizer
// the estimator undercounts would.
func fakeProviderCount(raw int) int { return int(math.Ceil(float64(raw) * 1.07)) }

// Fifty turns after a fold: the request must start with the same bytes every
// turn. The only change allowed to an earlier message is its one switch to a
// stub when it becomes older than the last two exchanges.
func TestPrefixStableBetweenFolds(t *testing.T) {
	b := &builder{}
	for i := range 170 { // 680 messages: folds on count, keeping whole turns
		b.turn(i, "ok")
	}
	bud := NewBudget(200_000, 1500, 2500)
	var cal Calibration
	summary := "The person is reviewing a.go."
	res := Plan(PlanInput{Msgs: b.ms, Budget: bud, Calibration: cal, Summary: summary})
	if !res.Fold || res.Reason != ReasonMessages {
		t.Fatalf("setup: want a fold on message count, got %+v", res)
	}
	firstKept := res.FirstKept
	cal.Observe(res.Raw, fakeProviderCount(res.Raw))

	var prev []string
	changes := map[int64]int{}
	for turn := range 50 {
		result := "short result"
		if turn%3 == 0 {
			result = strings.Repeat("line of a long file\n", 150) // 3,000 chars: stubbed two exchanges later
		}
		b.turn(1000+turn, result)
		unfolded := b.ms[keptIndex(b.ms, firstKept):]
		res = Plan(PlanInput{Msgs: unfolded, Budget: bud, Calibration: cal, Summary: summary})
		if res.Fold || !res.Fits || res.FirstKept != firstKept {
			t.Fatalf("turn %d: unexpected fold or overflow: %+v", turn, res)
		}
		cal.Observe(res.Raw, fakeProviderCount(res.Raw))
		cur := marshalEach(Assemble(AssembleInput{Msgs: unfolded, Plan: res, Summary: summary}))
		if prev != nil {
			if cur[0] != prev[0] {
				t.Fatalf("turn %d: first message changed:\n%s\n%s", turn, prev[0], cur[0])
			}
			firstDiff := len(prev)
			for i := range prev {
				if cur[i] == prev[i] {
					continue
				}
				firstDiff = min(firstDiff, i)
				var m Msg
				_ = json.Unmarshal([]byte(cur[i]), &m)
				if !strings.HasPrefix(m.Text, "[tool result of ") {
					t.Fatalf("turn %d: message %d changed but is not a new stub:\n%s\n%s", turn, i, prev[i], cur[i])
				}
				changes[m.Seq]++
			}
			// Everything before the first newly stubbed message is a byte prefix.
			if p, c := strings.Join(prev[:firstDiff], ""), strings.Join(cur, ""); !strings.HasPrefix(c, p) {
				t.Fatalf("turn %d: request does not start with the previous one's first %d messages", turn, firstDiff)
			}
		}
		prev = cur
	}
	for seq, n := range changes {
		if n > 1 {
			t.Errorf("seq %d changed %d times, want at most once", seq, n)
		}
	}
	if len(changes) == 0 {
		t.Error("no result was ever stubbed: the test did not exercise stubbing")
	}
}
