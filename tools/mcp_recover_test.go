package tools

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/chat"
)

// callMCP makes one call. The time limit only keeps a broken test from
// hanging (17 MB under the race detector on a busy machine is slow); no
// assertion depends on timing.
func callMCP(t *testing.T, r *Registry, name, args string) Result {
	t.Helper()
	return r.Run(context.Background(), chat.ToolCall{Name: name, Arguments: args}, Limits{Timeout: 3 * time.Minute})
}

func stdioServer(t *testing.T, r *Registry) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Skip("no test executable path:", err)
	}
	log, _ := testLogger(t)
	closeAll, err := ConnectMCP(context.Background(), []MCPServer{
		{Name: "local", Command: []string{exe}, Env: map[string]string{stdioServerEnv: "1"}},
	}, r, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeAll() })
	if _, ok := r.Get("local__echo"); !ok {
		t.Fatal("the stdio server did not start")
	}
}

// An answer over the SDK's 16 MiB frame limit used to close the
// connection for good; now it fails that call, clearly, and the server
// answers the next one.
func TestMCPStdioOversizeAnswerFailsOnlyThatCall(t *testing.T) {
	r := NewRegistry()
	stdioServer(t, r)
	res := callMCP(t, r, "local__big", `{"bytes":17000000}`)
	if !res.IsError || !strings.Contains(res.Text, "over agentd's limit") || len(res.Text) > 1000 {
		t.Fatalf("oversize answer = %.300q, want a short refusal naming the limit", res.Text)
	}
	if res := callMCP(t, r, "local__echo", `{"text":"still here"}`); res.IsError || res.Text != "echo: still here" {
		t.Fatalf("the call after the oversize answer = %+v", res)
	}
}

// A stdio server that died is started again by the next call.
func TestMCPStdioServerKilledIsRestarted(t *testing.T) {
	r := NewRegistry()
	stdioServer(t, r)
	first := callMCP(t, r, "local__pid", `{}`)
	pid, err := strconv.Atoi(first.Text)
	if err != nil {
		t.Fatalf("pid answer %+v", first)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The first call may race the death being noticed and fail; the one
	// after it reconnects, with no backoff for a first attempt.
	var res Result
	for range 2 {
		if res = callMCP(t, r, "local__pid", `{}`); !res.IsError {
			break
		}
	}
	if res.IsError || res.Text == first.Text {
		t.Fatalf("after the kill: %+v (first server was %d)", res, pid)
	}
}

// oversizeHTTP runs the test server over streamable HTTP, answering in
// JSON or as an event stream, behind a handler tests can swap.
func oversizeHTTP(t *testing.T, jsonAnswers bool) (*Registry, *atomic.Pointer[http.Handler]) {
	t.Helper()
	var h atomic.Pointer[http.Handler]
	fresh := func() {
		var next http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newTestMCPServer() },
			&mcp.StreamableHTTPOptions{JSONResponse: jsonAnswers})
		h.Store(&next)
	}
	fresh()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { (*h.Load()).ServeHTTP(w, req) }))
	t.Cleanup(srv.Close)
	r := NewRegistry()
	log, _ := testLogger(t)
	closeAll, err := ConnectMCP(context.Background(), []MCPServer{{Name: "web", URL: srv.URL, MaxResultBytes: 64 << 10}}, r, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeAll() })
	if _, ok := r.Get("web__echo"); !ok {
		t.Fatal("the HTTP server did not connect")
	}
	return r, &h
}

func TestMCPHTTPOversizeAnswerFailsOnlyThatCall(t *testing.T) {
	for name, jsonAnswers := range map[string]bool{"event stream": false, "json": true} {
		t.Run(name, func(t *testing.T) {
			r, _ := oversizeHTTP(t, jsonAnswers)
			if res := callMCP(t, r, "web__big", `{"bytes":60000}`); res.IsError || len(res.Text) != 60000 {
				t.Fatalf("an answer under the limit: IsError %v, %d bytes", res.IsError, len(res.Text))
			}
			res := callMCP(t, r, "web__big", `{"bytes":200000}`)
			if !res.IsError || !strings.Contains(res.Text, "over agentd's limit of 65536 bytes") {
				t.Fatalf("oversize answer = %.300q, want a refusal naming the limit", res.Text)
			}
			if res := callMCP(t, r, "web__echo", `{"text":"next"}`); res.IsError || res.Text != "echo: next" {
				t.Fatalf("the call after the oversize answer = %+v", res)
			}
		})
	}
}

// A server that forgot the session (it restarted) answers 404; the call
// is made again on a new session, since the server never ran it.
func TestMCPHTTPSessionGoneReconnects(t *testing.T) {
	r, h := oversizeHTTP(t, false)
	if res := callMCP(t, r, "web__echo", `{"text":"one"}`); res.IsError {
		t.Fatalf("first call: %+v", res)
	}
	var restarted http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newTestMCPServer() }, nil)
	h.Store(&restarted)
	if res := callMCP(t, r, "web__echo", `{"text":"two"}`); res.IsError || res.Text != "echo: two" {
		t.Fatalf("call after the server lost the session: %+v", res)
	}
}

// A server that cannot be reached is tried again on a later call, no
// sooner than the backoff allows; the clock is the test's.
func TestMCPReconnectBacksOff(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	up, dials := false, 0
	var sessions []*mcp.ServerSession
	dial := func() (mcp.Transport, error) {
		mu.Lock()
		defer mu.Unlock()
		dials++
		if !up {
			return nil, errors.New("connection refused")
		}
		clientT, serverT := mcp.NewInMemoryTransports()
		ss, err := newTestMCPServer().Connect(context.Background(), serverT, nil)
		sessions = append(sessions, ss)
		return clientT, err
	}
	log, _ := testLogger(t)
	c := newMCPConn("flaky", dial, log)
	c.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	t.Cleanup(func() {
		_ = c.close()
		for _, ss := range sessions {
			_ = ss.Close()
		}
	})
	ctx := context.Background()
	call := func() error {
		_, err := c.call(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
		return err
	}
	step := func(d time.Duration, serverUp bool) {
		mu.Lock()
		now, up = now.Add(d), serverUp
		mu.Unlock()
	}
	dialsSoFar := func() int { mu.Lock(); defer mu.Unlock(); return dials }

	if err := call(); err == nil || dialsSoFar() != 1 {
		t.Fatalf("server down: err %v after %d dials", err, dialsSoFar())
	}
	step(500*time.Millisecond, true)
	if err := call(); !errors.Is(err, errMCPDown) || dialsSoFar() != 1 {
		t.Fatalf("within the backoff: err %v after %d dials, want errMCPDown without a dial", err, dialsSoFar())
	}
	step(time.Second, true)
	if err := call(); err != nil || dialsSoFar() != 2 {
		t.Fatalf("after the backoff with the server back: err %v after %d dials", err, dialsSoFar())
	}
	if err := call(); err != nil || dialsSoFar() != 2 {
		t.Fatalf("a live connection is reused: err %v after %d dials", err, dialsSoFar())
	}
}
