package hub

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/actors/session"
)

// TestAReplyBoxTakesOneAnswerAndFreesARefusedTurn: an accepted turn
// reaches the caller and keeps its slot; a refusal, or no answer within
// the timeout, reaches the caller and frees the slot, once, whether the
// caller waits or not; a later answer goes nowhere, and the box leaves the
// actor system's registry once it has its answer.
func TestAReplyBoxTakesOneAnswerAndFreesARefusedTurn(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	for _, tc := range []struct {
		name    string
		answers []any // sent to the box in order; none: the timeout answers
		timeout time.Duration
		refused int
		want    func(reply) bool
	}{
		{name: "accepted", answers: []any{&session.TurnAccepted{TurnID: "t"}}, timeout: time.Hour,
			want: func(r reply) bool {
				a, ok := r.res.(*session.TurnAccepted)
				return ok && a.TurnID == "t" && r.err == nil
			}},
		{name: "refused, then a late answer", answers: []any{&session.Rejected{Err: session.ErrCancelled}, &session.TurnAccepted{}}, timeout: time.Hour, refused: 1,
			want: func(r reply) bool {
				rj, ok := r.res.(*session.Rejected)
				return ok && errors.Is(rj.Err, session.ErrCancelled)
			}},
		{name: "no answer in time", timeout: time.Millisecond, refused: 1,
			want: func(r reply) bool { return errors.Is(r.err, actor.ErrTimeout) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused := 0
			b := newReplyBox(sys, tc.timeout, func() { refused++ })
			// A box the timeout answers may be answered, and gone, already.
			if _, ok := sys.ProcessRegistry.Get(b.pid); !ok && len(tc.answers) > 0 {
				t.Fatal("the box is not in the registry")
			}
			for _, a := range tc.answers {
				sys.Root.Send(b.pid, a)
			}
			r := <-b.c
			if !tc.want(r) {
				t.Fatalf("the caller got %+v", r)
			}
			b.settle(reply{res: &session.TurnAccepted{}}) // one more, as a late answer would
			if refused != tc.refused {
				t.Fatalf("refused called %d times, want %d", refused, tc.refused)
			}
			if len(b.c) != 0 {
				t.Fatalf("a second answer reached the caller: %+v", <-b.c)
			}
			if p, _ := sys.ProcessRegistry.Get(b.pid); p == b {
				t.Fatal("the answered box is still in the registry")
			}
		})
	}
}
