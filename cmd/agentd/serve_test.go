package main

import (
	"context"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestASecondSignalEndsTheShutdownGraceAtOnce: a person who presses
// Ctrl-C twice, or an operator who sends SIGTERM again, while a turn hangs
// on its provider does not wait out the grace (an hour here): the turn is
// cut at once, its stream ends with turn.completed and problem shutdown,
// and serve returns without an error. The second signal was swallowed
// before.
func TestASecondSignalEndsTheShutdownGraceAtOnce(t *testing.T) {
	defer func(g time.Duration) { shutdownGrace = g }(shutdownGrace)
	shutdownGrace = time.Hour
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(testkit.Received) testkit.Reply { return testkit.Reply{Hang: true} }})
	defer fake.Close()
	cfg := testkit.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Listen = testkit.FreeAddr(t)
	sigs := make(chan os.Signal, 2)
	served := make(chan error, 1)
	go func() { served <- serve(context.Background(), cfg, sigs) }()

	c := &api.Client{BaseURL: "http://" + cfg.Listen}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		res, err := http.Get(c.BaseURL + "/healthz")
		if err == nil {
			_ = res.Body.Close()
			break
		}
		select {
		case err := <-served:
			t.Fatalf("serve ended before it served: %v", err)
		case <-ctx.Done():
			t.Fatal("agentd did not serve within 2 minutes")
		case <-time.After(20 * time.Millisecond):
		}
	}
	ch, err := c.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	ended := make(chan api.TurnResult, 1)
	go func() {
		res, err := c.Send(ctx, ch.ID, api.SendMessageRequest{Content: "hello"}, func(ev api.Event) {
			if ev.Type == chat.EventTurnStarted {
				close(started)
			}
		})
		if err != nil {
			t.Errorf("the stream ended without turn.completed: %v", err)
		}
		ended <- res
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the turn did not start")
	}
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGINT
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve after two signals: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("serve did not return within 2 minutes of a second signal: it waits out the grace")
	}
	res := <-ended
	if res.Problem == nil || res.Problem.Kind != chat.ProblemShutdown {
		t.Fatalf("the hung turn ended with %+v; want problem %q", res.Problem, chat.ProblemShutdown)
	}
}
