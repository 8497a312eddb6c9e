package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestClientsLeavingAtOnceLeaveNothingBehind: many clients of one chat go
// away at once — before their message's turn starts, right after it did,
// mid-answer — on the native API and the OpenAI-compatible one. Once the
// turns end, every goroutine they cost is gone and every turn slot of the
// tenant is free again.
func TestClientsLeavingAtOnceLeaveNothingBehind(t *testing.T) {
	const clients = 24
	gate, again := make(chan struct{}), make(chan struct{})
	var gateOnce, againOnce sync.Once
	open := func() { gateOnce.Do(func() { close(gate) }) }
	openAgain := func() { againOnce.Do(func() { close(again) }) }
	t.Cleanup(open)
	t.Cleanup(openAgain)
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		switch last := r.Messages[len(r.Messages)-1].Content; {
		case strings.HasPrefix(last, "held"):
			<-gate
		case strings.HasPrefix(last, "each holds"):
			<-again
		}
		return testkit.Reply{Text: "fine, thanks for asking, and so on and so forth"}
	}})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Limits.RequestsPerSecond = 1e6
	cfg.Limits.TurnsPerChat = clients + 1
	cfg.Limits.TurnsPerTenant = clients + 1
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sendWithin(t, d.Client, c.ID, "warm up")
	http.DefaultClient.CloseIdleConnections()
	// What the daemon runs idle, once the warm-up's connections closed.
	before := runtime.NumGoroutine()
	settle := func(most int) int {
		n := runtime.NumGoroutine()
		for deadline := time.Now().Add(30 * time.Second); n > most && time.Now().Before(deadline); n = runtime.NumGoroutine() {
			time.Sleep(50 * time.Millisecond)
		}
		return n
	}

	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, leave := context.WithCancel(ctx)
			defer leave()
			url, body, accept := d.Server.URL+"/v1/chats/"+c.ID+"/messages", fmt.Sprintf(`{"content":"held %d"}`, i), "text/event-stream"
			switch i % 4 {
			case 1:
				accept = "application/json"
			case 2:
				url, body = d.Server.URL+"/v1/responses", `{"model":"fake/m","conversation":"conv_`+c.ID+`","input":"held","stream":true}`
			case 3:
				url, body = d.Server.URL+"/v1/chat/completions", `{"model":"fake/m","stream":true,"messages":[{"role":"user","content":"held"}]}`
			}
			req, _ := http.NewRequestWithContext(rctx, http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", accept)
			if i%4 == 3 {
				req.Header.Set("X-Agentd-Chat", c.ID)
			}
			go func() {
				time.Sleep(time.Duration(i%6) * 20 * time.Millisecond)
				leave()
			}()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
			}
		}()
	}
	wg.Wait()
	open()
	// The chat answers again once the turns its clients left have ended.
	sendWithin(t, d.Client, c.ID, "after the storm")
	http.DefaultClient.CloseIdleConnections()
	if after := settle(before + 5); after > before+5 {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after the clients left and their turns ended:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
	// Every slot of the tenant's turns is free: as many turns as it may
	// hold run at once, none refused.
	var ids []string
	for range clients + 1 {
		o, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	started, errs := make(chan struct{}, len(ids)), make(chan error, len(ids))
	for _, id := range ids {
		go func() {
			_, err := d.Client.Send(ctx, id, api.SendMessageRequest{Content: "each holds a slot"}, func(ev api.Event) {
				if ev.Type == api.EventTurnStarted {
					started <- struct{}{}
				}
			})
			errs <- err
		}()
	}
	for range ids {
		select {
		case <-started:
		case err := <-errs:
			t.Fatalf("a turn after the storm: %v (a slot left taken?)", err)
		case <-time.After(liveness):
			t.Fatal("the turns after the storm did not start")
		}
	}
	openAgain()
	for range ids {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

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
