package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// Issue 15, found item 1: watchers that never read must not freeze the
// daemon. Each test drives a whole daemon over HTTP.

// longScript answers with 2 KB in 64-rune deltas: about 40 events a turn,
// so a watcher that never reads fills its buffer within a few turns.
func longScript(r testkit.Received) testkit.Reply {
	last := r.Messages[len(r.Messages)-1].Content
	return testkit.Reply{Text: strings.Repeat(last+" and so on. ", 2_000/(len(last)+12)), ChunkRunes: 64}
}

// bigWindow starts a daemon for tenants a and b on a model that reads
// 128K tokens, so fifty turns never fold: what is timed is the turns.
func bigWindow(t testing.TB, script testkit.Script) *daemontest.Daemon {
	const window = 1 << 17
	fake := openaifake.New(openaifake.Options{Window: window, Script: script})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), window)
	cfg.Limits.RequestsPerSecond = 1e6
	return daemontest.Start(t, cfg, map[string]string{"tok-a": "a", "tok-b": "b"})
}

// stuckClient is a client that never reads, its socket buffers already
// full: the stream's first write blocks until the request ends. (A real
// loopback connection that never reads takes about 4 MB before a write
// blocks; this is that client, without the wait.)
type stuckClient struct {
	header http.Header
	status chan int
	ctx    context.Context
}

func (c *stuckClient) Header() http.Header  { return c.header }
func (c *stuckClient) WriteHeader(code int) { c.status <- code }
func (c *stuckClient) Flush()               {}
func (c *stuckClient) Write([]byte) (int, error) {
	<-c.ctx.Done()
	return 0, c.ctx.Err()
}

// stuckWatcher opens GET /v1/chats/{id}/events from a client that never
// reads, once the stream is subscribed; it hangs up when the test ends.
func stuckWatcher(t testing.TB, d *daemontest.Daemon, token, chatID string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/v1/chats/"+chatID+"/events", nil)
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Accept", "text/event-stream")
	c := &stuckClient{header: http.Header{}, status: make(chan int, 1), ctx: ctx}
	served := make(chan struct{})
	go func() { defer close(served); d.Server.Config.Handler.ServeHTTP(c, r) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-served:
		case <-time.After(liveness):
			t.Error("a watch's handler did not return after its client hung up")
		}
	})
	select {
	case code := <-c.status:
		if code != http.StatusOK {
			t.Fatalf("watch: status %d", code)
		}
	case <-time.After(liveness):
		t.Fatal("the watch was not answered: the daemon is frozen")
	}
}

// liveness bounds each step of these tests. It is no speed assertion: a
// turn here takes milliseconds, and a frozen daemon never answers at all
// (on the old bus each turn of the watched chat waited 2 s per event).
const liveness = 30 * time.Second

func sendWithin(t testing.TB, c *api.Client, chatID, content string) api.TurnResult {
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
	d := bigWindow(t, longScript)
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
	stuckWatcher(t, d, "tok-a", ca.ID)
	stuckWatcher(t, d, "tok-a", ca.ID)
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

// BenchmarkTurnBesideLaggingWatchers is tenant b's turn while tenant a's
// chat runs turns back to back, with no watcher on a's chat and with two
// more that never read joining before each of b's turns (the bus drops
// each within a few of a's turns, so new ones keep the lag going). The two
// figures should match: a publisher never waits for a watcher (eventbus's
// TestAFullWatcherIsDroppedAndNobodyWaits; TestWatchersThatNeverReadFreezeNoOne
// above is the daemon's liveness). On the old bus b's turns took seconds.
//
//	go test -run '^$' -bench BenchmarkTurnBesideLaggingWatchers ./httpapi/
func BenchmarkTurnBesideLaggingWatchers(b *testing.B) {
	for _, lagging := range []bool{false, true} {
		b.Run(fmt.Sprintf("lagging=%v", lagging), func(b *testing.B) {
			d := bigWindow(b, soakScript)
			a := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
			other := &api.Client{BaseURL: d.Server.URL, Token: "tok-b"}
			ctx, cancel := context.WithCancel(context.Background())
			ca, _ := a.CreateChat(ctx, api.CreateChatRequest{})
			cb, _ := other.CreateChat(ctx, api.CreateChatRequest{})
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
					b.Errorf("tenant a's turns: %v", err)
				}
			}()
			b.ResetTimer()
			for i := range b.N {
				if lagging {
					b.StopTimer()
					stuckWatcher(b, d, "tok-a", ca.ID)
					stuckWatcher(b, d, "tok-a", ca.ID)
					b.StartTimer()
				}
				sendWithin(b, other, cb.ID, fmt.Sprintf("b %d", i))
			}
		})
	}
}
