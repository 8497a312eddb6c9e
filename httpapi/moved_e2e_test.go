package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
	"github.com/agentd/agentd/testkit/pgtest"
)

// Two agentd on one Postgres hold one chat: the node that held it first
// and is mid-turn when the other takes the chat over must fail its write
// (its turn ends with problem "moved") instead of forking the log, and the
// chat goes on from what the new owner wrote.
func TestAChatTakenOverByAnotherNodeEndsTheOldOwnersTurnWithoutForkingTheLog(t *testing.T) {
	t.Setenv("AGENTD_PG_DSN", pgtest.DSN(t))
	hold := testkit.NewHold("slow")
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: hold.Script})
	defer fake.Close()
	defer hold.Release()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Store = configs.Store{Kind: configs.StorePostgres, DSNEnv: "AGENTD_PG_DSN"}
	tokens := map[string]string{"tok": "alice"}
	a := daemontest.Start(t, cfg, tokens)
	cfgB := cfg
	cfgB.DataDir = t.TempDir()
	b := daemontest.Start(t, cfgB, tokens)
	ctx := context.Background()
	onA := &api.Client{BaseURL: a.Server.URL, Token: "tok"}
	onB := &api.Client{BaseURL: b.Server.URL, Token: "tok"}

	c, err := onA.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := onA.Send(ctx, c.ID, api.SendMessageRequest{Content: "one"}, nil); err != nil {
		t.Fatal(err)
	}
	slow := make(chan api.TurnResult, 1)
	go func() {
		res, err := onA.Send(ctx, c.ID, api.SendMessageRequest{Content: "slow"}, hold.OnEvent)
		if err != nil {
			t.Errorf("the old owner's turn: %v", err)
		}
		slow <- res
	}()
	select {
	case <-hold.MidTurn():
	case <-time.After(time.Minute):
		t.Fatal("the slow turn never got mid-call")
	}
	// B takes the chat over while A's turn waits on the model.
	res, err := onB.Send(ctx, c.ID, api.SendMessageRequest{Content: "two"}, nil)
	if err != nil || res.Problem != nil {
		t.Fatalf("the new owner's turn: %+v, %v", res, err)
	}
	hold.Release()
	old := <-slow
	if old.Problem == nil || old.Problem.Kind != api.ProblemMoved {
		t.Fatalf("the old owner's turn ended with %+v; want problem %q", old.Problem, api.ProblemMoved)
	}
	want := []string{"one", "answer to one", "slow", "two", "answer to two"}
	checkLog := func(cl *api.Client, want []string) {
		t.Helper()
		msgs, err := cl.Transcript(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		testkit.WantLog(t, msgs, want...)
	}
	checkLog(onB, want)
	// Back on A, the chat goes on from B's writes: A's session gave the
	// chat up and a new one claimed it and read the log again.
	res, err = onA.Send(ctx, c.ID, api.SendMessageRequest{Content: "three"}, nil)
	if err != nil || res.Problem != nil {
		t.Fatalf("A after the move: %+v, %v", res, err)
	}
	reqs := fake.Requests()
	sent := reqs[len(reqs)-1].Messages
	var sentText []string
	for _, m := range sent {
		sentText = append(sentText, m.Content)
	}
	if !strings.Contains(strings.Join(sentText, "|"), "two|answer to two|three") {
		t.Fatalf("A's request after the move: %q; want B's turn in it", sentText)
	}
	checkLog(onB, append(want, "three", "answer to three"))
	// B's session is now the stale one: its next write is refused or its
	// session moves, never a fork; a message sent again lands once.
	res, err = onB.Send(ctx, c.ID, api.SendMessageRequest{Content: "four"}, nil)
	if statusOf(err) == 503 {
		res, err = onB.Send(ctx, c.ID, api.SendMessageRequest{Content: "four"}, nil)
	}
	if err != nil || res.Problem != nil {
		t.Fatalf("B after A took the chat back: %+v, %v", res, err)
	}
	checkLog(onA, append(want, "three", "answer to three", "four", "answer to four"))
}
