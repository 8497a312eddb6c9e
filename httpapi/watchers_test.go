package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
)

// Issue 15, found item 1: watchers that never read must not freeze the
// daemon. Each test drives a whole daemon over HTTP.

// longScript answers with 12 KB in 256-rune deltas: a turn's events are
// about 30 KB of SSE, so a watcher that never reads fills every buffer
// between it and the session within a few turns.
func longScript(r testkit.Received) testkit.Reply {
	last := r.Messages[len(r.Messages)-1].Content
	return testkit.Reply{Text: strings.Repeat(last+" and so on. ", 12_000/(len(last)+12)), ChunkRunes: 256}
}

// stuckWatcher opens GET /v1/chats/{id}/events on a raw connection with a
// small receive buffer, reads the response head (so the stream is
// subscribed) and then never reads again. The connection closes when the
// test ends.
func stuckWatcher(t *testing.T, base, token, chatID string) {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /v1/chats/%s/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", chatID, addr, token)
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 16), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: status %d", resp.StatusCode)
	}
}

// liveness bounds each step of these tests. It is no speed assertion: a
// turn here takes milliseconds, and a frozen daemon never answers at all
// (on the old bus each turn of the watched chat waited 2 s per event).
const liveness = 30 * time.Second

func sendWithin(t *testing.T, c *api.Client, chatID, content string) api.TurnResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	res, err := c.Send(ctx, chatID, api.SendMessageRequest{Content: content}, nil)
	if err != nil || res.Problem != nil {
		t.Fatalf("send %q: %v %+v", content, err, res.Problem)
	}
	return res
}

func TestWatchersThatNeverReadFreezeNoOne(t *testing.T) {
	fake := newFake(t, longScript)
	d := daemontest.Start(t, baseConfig(t, fake.URL()), map[string]string{"tok-a": "a", "tok-b": "b"})
	a := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	b := &api.Client{BaseURL: d.Server.URL, Token: "tok-b"}
	ctx := context.Background()
	ca, err := a.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	stuckWatcher(t, d.Server.URL, "tok-a", ca.ID)
	stuckWatcher(t, d.Server.URL, "tok-a", ca.ID)
	for i := range 50 {
		sendWithin(t, a, ca.ID, fmt.Sprintf("turn %d", i))
	}
	for i := range 5 {
		sendWithin(t, b, cb.ID, fmt.Sprintf("b turn %d", i))
	}
	if w := d.Hub.Bus().Watchers(ca.ID); w != 0 {
		t.Errorf("%d watchers that never read are still subscribed after 50 turns; want them dropped", w)
	}
	health := call(t, ctx, http.MethodGet, d.Server.URL+"/healthz", "", "")
	if health.status != http.StatusOK || !strings.Contains(health.body, `"status":"ok"`) {
		t.Fatalf("healthz: %d %s", health.status, health.body)
	}
	stopped := make(chan struct{})
	go func() { d.Close(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(liveness):
		t.Fatal("the daemon did not stop")
	}
}

// soakScript answers tenant b's short lines at once and everything else at
// length (longScript).
func soakScript(r testkit.Received) testkit.Reply {
	if last := r.Messages[len(r.Messages)-1].Content; strings.HasPrefix(last, "b ") {
		return testkit.Reply{Text: "ok: " + last}
	}
	return longScript(r)
}

// medianTurn is the median wall time of n turns of c in chatID, calling
// before ahead of each.
func medianTurn(t *testing.T, c *api.Client, chatID string, n int, before func()) time.Duration {
	t.Helper()
	took := make([]time.Duration, n)
	for i := range took {
		before()
		start := time.Now()
		sendWithin(t, c, chatID, fmt.Sprintf("b %d", i))
		took[i] = time.Since(start)
	}
	slices.Sort(took)
	return took[n/2]
}

// Tenant a's chat runs turns back to back all along; tenant b's turns are
// timed without watchers on a's chat, then with two more that never read
// joining before each of b's turns (the bus drops each within a few of a's
// turns, so new ones keep the lag going). The
// comparison is within one run, so a slow machine slows both sides; the
// 25 ms beside the 2× absorb scheduler noise on turns of a few
// milliseconds. On the old bus b's turns took seconds.
func TestLaggingWatchersOnOneChatDoNotSlowAnotherTenant(t *testing.T) {
	fake := newFake(t, soakScript)
	d := daemontest.Start(t, baseConfig(t, fake.URL()), map[string]string{"tok-a": "a", "tok-b": "b"})
	a := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	b := &api.Client{BaseURL: d.Server.URL, Token: "tok-b"}
	ctx, cancel := context.WithCancel(context.Background())
	ca, _ := a.CreateChat(ctx, api.CreateChatRequest{})
	cb, _ := b.CreateChat(ctx, api.CreateChatRequest{})
	busy := make(chan error, 1)
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := a.Send(ctx, ca.ID, api.SendMessageRequest{Content: fmt.Sprintf("turn %d", i)}, nil); err != nil && ctx.Err() == nil {
				busy <- err
				return
			}
		}
		busy <- nil
	}()
	defer func() {
		cancel()
		if err := <-busy; err != nil {
			t.Errorf("tenant a's turns: %v", err)
		}
	}()
	const n = 15
	unloaded := medianTurn(t, b, cb.ID, n, func() {})
	loaded := medianTurn(t, b, cb.ID, n, func() {
		stuckWatcher(t, d.Server.URL, "tok-a", ca.ID)
		stuckWatcher(t, d.Server.URL, "tok-a", ca.ID)
	})
	t.Logf("tenant b's median turn: %s without watchers on a's chat, %s with two that never read", unloaded, loaded)
	if loaded > 2*unloaded+25*time.Millisecond {
		t.Fatalf("tenant b's median turn went from %s to %s while a's chat had watchers that never read", unloaded, loaded)
	}
}
