package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
	"github.com/agentd/agentd/testkit/pgtest"
)

// TestAPausedNodeResumedAfterATakeoverFailsItsWrite is issue 23's partition:
// two agentd processes on one Postgres; the one holding a chat mid-turn is
// paused (SIGSTOP) while the other takes the chat over and answers; resumed
// (SIGCONT), the old owner's answer must fail its write (problem "moved")
// instead of forking the chat's log.
func TestAPausedNodeResumedAfterATakeoverFailsItsWrite(t *testing.T) {
	dsn := pgtest.DSN(t)
	hold := testkit.NewHold("slow")
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: hold.Script})
	defer fake.Close()
	defer hold.Release()
	cfg := daemonConfig{FakeURL: fake.URL(), Window: 32000, Extra: "store:\n  kind: postgres\n  dsn_env: AGENTD_PG_DSN\n",
		Env: []string{"AGENTD_PG_DSN=" + dsn}}
	a, b := newDaemon(t, cfg), newDaemon(t, cfg)
	a.start()
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	c, err := a.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "one"}, nil); err != nil {
		t.Fatal(err)
	}
	slow := make(chan api.TurnResult, 1)
	go func() {
		res, err := a.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "slow"}, hold.OnEvent)
		if err != nil {
			t.Errorf("the paused node's turn: %v", err)
		}
		slow <- res
	}()
	// (A node paused mid-commit, before mid-turn, fails the message itself
	// as moved: persistence's TestAWriteCutWhileAnotherNodeClaimsFailsAsMoved.)
	select {
	case <-hold.MidTurn():
	case <-ctx.Done():
		t.Fatal("the slow turn never got mid-call")
	}
	pid := a.pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer resume()
	res, err := b.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "two"}, nil)
	if err != nil || res.Problem != nil {
		t.Fatalf("the node taking over: %+v, %v", res, err)
	}
	hold.Release()
	resume()
	old := <-slow
	if old.Problem == nil || old.Problem.Kind != api.ProblemMoved {
		t.Fatalf("the resumed node's turn ended with %+v; want problem %q", old.Problem, api.ProblemMoved)
	}
	msgs, err := b.Client.Transcript(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WantLog(t, msgs, "one", "answer to one", "slow", "two", "answer to two")
}
