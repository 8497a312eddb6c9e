package window

import (
	"strings"
	"testing"
)

// TestAssembleLeavesOutARefusedExchange: an answer the provider refused
// is not sent again, nor the person's message that drew it with the tool
// round between (Anthropic refuses again while the turn that drew a
// refusal stays); the summary meant for that message rides on the next
// one, and a refused answer that is the last message is kept.
func TestAssembleLeavesOutARefusedExchange(t *testing.T) {
	b := &builder{}
	b.user("forbidden question").call("tool said").assistant("I can't help with")
	b.ms[len(b.ms)-1].Refused = true
	b.user("a fine question")
	res := Plan(PlanInput{Msgs: b.ms, Budget: NewBudget(1<<20, 0, 0), Summary: "They chose Go."})
	out := Assemble(AssembleInput{Msgs: b.ms, Plan: res, Summary: "They chose Go."})
	if len(out) != 1 || !strings.HasPrefix(out[0].Text, SummaryOpen) || !strings.HasSuffix(out[0].Text, "a fine question") {
		t.Fatalf("sent %+v: want only the next question, carrying the summary", out)
	}

	last := b.ms[:len(b.ms)-1]
	if out := Assemble(AssembleInput{Msgs: last, Plan: Plan(PlanInput{Msgs: last, Budget: NewBudget(1<<20, 0, 0)})}); len(out) != len(last) {
		t.Fatalf("sent %d of %d messages ending with the refused answer: nothing follows it, so nothing is left out", len(out), len(last))
	}
}
