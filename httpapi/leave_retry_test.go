package httpapi_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestAKeyedMessageWhoseClientLeftIsAnsweredOnce: a client that leaves
// right after turn.started, or mid-answer, sends its message again under
// its Idempotency-Key: while the turn runs the retry joins it (its end),
// after it ended the retry is replayed, and the chat holds the message and its
// answer once. One that left while its message waited behind another turn
// finds it dropped, and its retry stores it once.
func TestAKeyedMessageWhoseClientLeftIsAnsweredOnce(t *testing.T) {
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		last := r.Messages[len(r.Messages)-1].Content
		if last == "held" {
			<-gate
		}
		return testkit.Reply{Text: "answer to " + last}
	}})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Limits.RequestsPerSecond = 1e6
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Left right after the acknowledgement.
	leaveCtx, leave := context.WithCancel(ctx)
	_, err = d.Client.SendKeyed(leaveCtx, c.ID, "k-held", api.SendMessageRequest{Content: "held"}, func(ev api.Event) {
		if ev.Type == api.EventTurnStarted {
			leave()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the client that left: %v", err)
	}
	// Left while waiting behind the held turn.
	queuedCtx, leaveQueued := context.WithCancel(ctx)
	queued := make(chan error, 1)
	go func() {
		_, err := d.Client.SendKeyed(queuedCtx, c.ID, "k-queued", api.SendMessageRequest{Content: "queued"}, nil)
		queued <- err
	}()
	time.Sleep(50 * time.Millisecond) // it may or may not have been queued yet: both end the same
	leaveQueued()
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Fatalf("the queued client that left: %v", err)
	}
	// The retry joins the running turn.
	joined := make(chan api.TurnResult, 1)
	go func() {
		res, err := d.Client.SendKeyed(ctx, c.ID, "k-held", api.SendMessageRequest{Content: "held"}, nil)
		if err != nil {
			t.Errorf("the retry while the turn runs: %v", err)
		}
		joined <- res
	}()
	// Joined or, had the turn ended first, replayed: the same answer.
	for deadline := time.Now().Add(liveness); d.Hub.Bus().Watchers(c.ID) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
	}
	open()
	res := <-joined
	if len(res.Messages) != 2 || res.Messages[1].Content != "answer to held" {
		t.Fatalf("the retry of the message whose client left: %+v", res)
	}
	again, err := d.Client.SendKeyed(ctx, c.ID, "k-held", api.SendMessageRequest{Content: "held"}, nil)
	if err != nil || !again.Replayed || len(again.Messages) != 2 {
		t.Fatalf("the retry after the turn: %+v, %v", again, err)
	}
	if _, err := d.Client.SendKeyed(ctx, c.ID, "k-queued", api.SendMessageRequest{Content: "queued"}, nil); err != nil {
		t.Fatal(err)
	}
	ms, err := d.Client.Transcript(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Content)
	}
	if want := "held|answer to held|queued|answer to queued"; strings.Join(got, "|") != want {
		t.Fatalf("transcript %q, want %q", strings.Join(got, "|"), want)
	}
}
