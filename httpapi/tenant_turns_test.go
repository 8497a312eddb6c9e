package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit"
)

// holdingDaemon is a daemon with turnsPerTenant slots a tenant, whose
// model holds every message with "hold" in it until open is called.
func holdingDaemon(t *testing.T, turnsPerTenant int, tokens map[string]string) (d *ownDaemon, open func()) {
	gate := make(chan struct{})
	var once sync.Once
	open = func() { once.Do(func() { close(gate) }) }
	fake := newFake(t, func(r testkit.Received) testkit.Reply {
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "hold") {
			<-gate
		}
		return echoScript(r)
	})
	t.Cleanup(open) // before the fake closes
	cfg := baseConfig(t, fake.URL())
	cfg.Limits.TurnsPerTenant = turnsPerTenant
	return startDaemon(t, cfg, tokens, nil), open
}

// releaseHeld opens the held model and waits until chatID's turn has ended.
func releaseHeld(t *testing.T, d *ownDaemon, chatID string, open func()) {
	t.Helper()
	sub := d.Hub.Bus().Subscribe(chatID, 64)
	defer sub.Close()
	open()
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				t.Fatalf("the watch of the held chat was dropped: %+v", sub.Dropped())
			}
			if ev.Type == chat.EventTurnCompleted {
				return
			}
		case <-time.After(liveness):
			t.Fatal("the held turn did not end")
		}
	}
}

// Issue 15: turns_per_tenant counted open handlers, so a client that hung
// up freed its slot while its turn ran on. A slot is now held from
// acceptance until the turn really ends.
func TestTurnsPerTenantHoldsASlotUntilTheTurnEndsNotTheRequest(t *testing.T) {
	d, open := holdingDaemon(t, 1, map[string]string{"tok-a": "a", "tok-b": "b"})
	ctx := context.Background()
	a := &api.Client{BaseURL: d.URL, Token: "tok-a"}
	held, _ := a.CreateChat(ctx, api.CreateChatRequest{})
	other, _ := a.CreateChat(ctx, api.CreateChatRequest{})
	send := func(token, chatID string) answer {
		return call(t, ctx, http.MethodPost, d.URL+"/v1/chats/"+chatID+"/messages", token, `{"content":"next"}`)
	}

	// The turn starts, then its client hangs up, and its handler returns.
	hangUp, cancel := context.WithCancel(ctx)
	started := watchStarted(t, d.Hub, held.ID)
	first := post(t, hangUp, d.URL+"/v1/chats/"+held.ID+"/messages", "tok-a", "hold on")
	started()
	cancel()
	<-first
	drained, stop := context.WithTimeout(ctx, liveness)
	defer stop()
	if err := d.Handler.(*httpapi.Server).Drain(drained); err != nil {
		t.Fatalf("the hung-up turn's handler did not return: %v", err)
	}

	// The turn runs on and holds the tenant's one slot; tenant b is free.
	send("tok-a", other.ID).want(t, http.StatusTooManyRequests, "busy")
	b := &api.Client{BaseURL: d.URL, Token: "tok-b"}
	cb, _ := b.CreateChat(ctx, api.CreateChatRequest{})
	if got := send("tok-b", cb.ID); got.status != http.StatusOK {
		t.Fatalf("tenant b: %d %s", got.status, got.body)
	}

	// The turn ends: the slot is free again.
	releaseHeld(t, d, held.ID, open)
	if got := send("tok-a", other.ID); got.status != http.StatusOK {
		t.Fatalf("after the turn ended: %d %s", got.status, got.body)
	}
}

// TestAQueuedTurnWhoseCallerLeftIsDroppedAndFreesItsSlot: a message queued
// behind a running turn, whose client hangs up before its turn starts, is
// dropped: it frees its tenant's turn slot at once, not when the turn
// before it ends, and it never runs or lands in the log.
func TestAQueuedTurnWhoseCallerLeftIsDroppedAndFreesItsSlot(t *testing.T) {
	d, open := holdingDaemon(t, 2, map[string]string{"tok-a": "a"})
	ctx := context.Background()
	a := &api.Client{BaseURL: d.URL, Token: "tok-a"}
	held, _ := a.CreateChat(ctx, api.CreateChatRequest{})
	other, _ := a.CreateChat(ctx, api.CreateChatRequest{})
	url := d.URL + "/v1/chats/" + held.ID + "/messages"

	started := watchStarted(t, d.Hub, held.ID)
	post(t, ctx, url, "tok-a", "hold on")
	started()
	hangUp, cancel := context.WithCancel(ctx)
	queued := post(t, hangUp, url, "tok-a", "queued, then abandoned")
	waitFor(t, "the second message to wait behind the first", func() bool { return turnsWaiting(t, d.Hub) == 1 })
	call(t, ctx, http.MethodPost, d.URL+"/v1/chats/"+other.ID+"/messages", "tok-a", `{"content":"now?"}`).want(t, http.StatusTooManyRequests, "busy")

	cancel()
	<-queued
	waitFor(t, "the abandoned message's slot to be free while the first turn runs", func() bool {
		return call(t, ctx, http.MethodPost, d.URL+"/v1/chats/"+other.ID+"/messages", "tok-a", `{"content":"now?"}`).status == http.StatusOK
	})
	if n := turnsWaiting(t, d.Hub); n != 0 {
		t.Fatalf("%v turns still waiting", n)
	}

	releaseHeld(t, d, held.ID, open)
	msgs, err := d.Hub.Transcript(ctx, "a", held.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := contents(msgs); strings.Contains(got, "abandoned") || len(msgs) != 2 {
		t.Fatalf("the held chat's log: %s; want the held turn's two messages only", got)
	}
}

// turnsWaiting reads the hub's gauge of turns queued behind a running one.
func turnsWaiting(t *testing.T, h *hub.Hub) float64 {
	t.Helper()
	families, err := h.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "agentd_turns_waiting" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no agentd_turns_waiting on the hub's registry")
	return 0
}
