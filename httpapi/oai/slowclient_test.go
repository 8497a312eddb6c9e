package oai_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
)

// stallingClient takes what is written to it until its text holds
// stallAfter, then takes nothing more: each later write waits until the
// test lets it fail, as the server's write deadline fails a write to a
// client whose window stays full.
type stallingClient struct {
	header     http.Header
	stallAfter string
	cut        chan struct{} // closed: every waiting write fails
	resume     chan struct{} // closed: the client reads again

	mu      sync.Mutex
	got     bytes.Buffer
	late    bytes.Buffer  // what it read once it resumed
	stalled chan struct{} // closed once a write waits
	once    sync.Once
}

func newStallingClient(after string) *stallingClient {
	return &stallingClient{header: http.Header{}, stallAfter: after, cut: make(chan struct{}), resume: make(chan struct{}), stalled: make(chan struct{})}
}

func (c *stallingClient) Header() http.Header { return c.header }
func (c *stallingClient) WriteHeader(int)     {}
func (c *stallingClient) Flush()              {}

func (c *stallingClient) Write(b []byte) (int, error) {
	c.mu.Lock()
	full := strings.Contains(c.got.String(), c.stallAfter)
	if !full {
		c.got.Write(b)
	}
	c.mu.Unlock()
	if !full {
		return len(b), nil
	}
	c.once.Do(func() { close(c.stalled) })
	select {
	case <-c.cut:
		return 0, errors.New("write deadline exceeded")
	case <-c.resume:
		c.mu.Lock()
		defer c.mu.Unlock()
		c.late.Write(b)
		return len(b), nil
	}
}

func (c *stallingClient) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got.String()
}

// roundsScript has the model call the calculator rounds times before it
// answers: each round is four events that must be delivered (the call's
// message, its usage, tool.call, tool.result), so a stream that takes
// none of them falls its buffer's 256 behind.
func roundsScript(rounds int) testkit.Script {
	return func(r testkit.Received) testkit.Reply {
		n := 0
		for _, m := range r.Messages {
			if m.Role == chat.RoleTool {
				n++
			}
		}
		if n < rounds {
			return testkit.Reply{Text: "Working on it.", ToolCalls: []chat.ToolCall{{ID: "call_" + strings.Repeat("x", n%7+1), Name: "calculate", Arguments: `{"expression":"6*7"}`}}}
		}
		return testkit.Reply{Text: "All rounds done."}
	}
}

var responseIDPattern = regexp.MustCompile(`"id":"(resp_[0-9a-zA-Z]+)"`)

// stalledResponse streams a response that runs rounds of tools to a
// client that stalls after response.in_progress; it returns the client,
// a channel closed once the handler returned, and the response's id.
func stalledResponse(t *testing.T, d *daemontest.Daemon) (*stallingClient, <-chan struct{}, string) {
	t.Helper()
	c := newStallingClient("response.in_progress")
	served, id := stallResponse(t, d, c, c)
	return c, served, id
}

// stallResponse is stalledResponse written to w, whose writes c takes.
func stallResponse(t *testing.T, d *daemontest.Daemon, c *stallingClient, w http.ResponseWriter) (<-chan struct{}, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v1/responses",
		strings.NewReader(`{"model":"fake/m","input":"go round","stream":true}`))
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("Authorization", "Bearer tok-a")
	r.Header.Set("Content-Type", "application/json")
	served := make(chan struct{})
	go func() { defer close(served); d.Server.Config.Handler.ServeHTTP(w, r) }()
	select {
	case <-c.stalled:
	case <-time.After(30 * time.Second):
		t.Fatalf("the stream never wrote past response.in_progress: %q", c.text())
	}
	m := responseIDPattern.FindStringSubmatch(c.text())
	if m == nil {
		t.Fatalf("no response id in %q", c.text())
	}
	return served, m[1]
}

// TestAStalledResponseStreamIsStillStored: a client that reads
// response.created, then nothing more (its TCP window full), is cut off,
// but the response whose id it was told is stored at its turn's end, as
// docs/openai.md promises of a client that leaves.
func TestAStalledResponseStreamIsStillStored(t *testing.T) {
	d, _, sdk := start(t, 128000, roundsScript(80))
	c, served, id := stalledResponse(t, d)
	// The turn ends while the client takes nothing.
	chatID := onlyChat(t, d)
	answered := func() bool {
		ms, err := (&api.Client{BaseURL: d.Server.URL, Token: "tok-a"}).Transcript(context.Background(), chatID)
		return err == nil && len(ms) > 0 && ms[len(ms)-1].Content == "All rounds done."
	}
	for deadline := time.Now().Add(60 * time.Second); !answered(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the turn did not end")
		}
	}
	close(c.cut) // the write deadline cuts the client
	select {
	case <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not return after its client was cut")
	}
	var got *responses.Response
	var err error
	for deadline := time.Now().Add(10 * time.Second); got == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got, err = sdk.Responses.Get(context.Background(), id, responses.ResponseGetParams{})
	}
	if got == nil {
		t.Fatalf("response %s, told to a client that then stalled, was never stored: %v", id, err)
	}
	if got.Status != "completed" || len(got.Output) != 81 || got.OutputText() != strings.Repeat("Working on it.", 80)+"All rounds done." {
		t.Fatalf("stored response: status %s, %d items, text %q; want completed, 81 items, each round's words", got.Status, len(got.Output), got.OutputText())
	}
}

// TestAResponseStreamFarBehindIsToldSo: a client that stalls while its
// response's turn runs, then reads again, is cut once it is 256 events
// behind: it reads what was queued for it, then an error event of code
// stream_dropped, and nothing after; the response is stored whole.
func TestAResponseStreamFarBehindIsToldSo(t *testing.T) {
	d, _, sdk := start(t, 128000, roundsScript(80))
	c, served, id := stalledResponse(t, d)
	if got := resumeOnceStored(t, sdk, id, c, served); len(got.Output) != 81 {
		t.Fatalf("the response of a stalled stream: %+v", got)
	}
	c.mu.Lock()
	late := c.late.String()
	c.mu.Unlock()
	events := strings.Split(strings.TrimSpace(late), "\n\n")
	// The event it stalled on, the 256 queued behind it, then the error.
	if n := len(events); n != 258 || !strings.Contains(events[n-1], `"code":"stream_dropped"`) || !strings.HasPrefix(events[n-1], "event: error\n") {
		t.Fatalf("after it stalled the client read %d events, the last %q; want 257 then an error of code stream_dropped", n, events[len(events)-1])
	}
}

// deadlinedClient is a stallingClient on a connection that takes write
// deadlines: it keeps the one in force at each write it takes once it
// stalled, and the last one set.
type deadlinedClient struct {
	*stallingClient
	mu   sync.Mutex
	at   time.Time   // the deadline in force
	late []time.Time // in force at each write from the stall on
}

func (c *deadlinedClient) SetWriteDeadline(at time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = at
	return nil
}

func (c *deadlinedClient) Write(b []byte) (int, error) {
	select {
	case <-c.stalled:
		c.mu.Lock()
		c.late = append(c.late, c.at)
		c.mu.Unlock()
	default:
	}
	return c.stallingClient.Write(b)
}

// TestAStreamsLastWritesShareOneDeadline: once its turn ended, what a
// stream still has queued for its client must be written within one
// http.write_timeout (docs/api.md, "A slow reader"), what net/http writes
// after the handler included. Each write's own bound gave every queued
// event a fresh write timeout: a client reading one event every 29 s held
// a stream of 256 queued events for about two hours. The writes after the
// stream's end carry the one deadline the server keeps after the handler.
func TestAStreamsLastWritesShareOneDeadline(t *testing.T) {
	d, _, sdk := start(t, 128000, roundsScript(20))
	c := &deadlinedClient{stallingClient: newStallingClient("response.in_progress")}
	served, id := stallResponse(t, d, c.stallingClient, c)
	// The turn ends and the response is stored while the client takes
	// nothing: the stream has its last events queued, then ends.
	resumeOnceStored(t, sdk, id, c.stallingClient, served)
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.late); n < 2 || !c.late[n-1].Equal(c.at) || !c.late[n-2].Equal(c.at) {
		t.Fatalf("the stream's last writes were bounded by %v, what net/http writes after the handler by %v: want one deadline, the stream's end's", c.late[max(0, n-2):], c.at)
	}
}

// resumeOnceStored waits until response id, whose stream's client c
// stalled, is stored completed, then has c read again and waits for the
// handler to return (served); it returns the stored response.
func resumeOnceStored(t *testing.T, sdk openai.Client, id string, c *stallingClient, served <-chan struct{}) *responses.Response {
	t.Helper()
	var got *responses.Response
	for deadline := time.Now().Add(60 * time.Second); got == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got, _ = sdk.Responses.Get(context.Background(), id, responses.ResponseGetParams{})
	}
	if got == nil || got.Status != "completed" {
		t.Fatalf("the response of a stalled stream: %+v", got)
	}
	close(c.resume)
	select {
	case <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not return")
	}
	return got
}
