package httpapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// One tenant's stored MCP toolset whose server accepts the connection and
// does not answer holds neither the start nor another tenant: the daemon
// starts while it is being connected, bob's chat naming his own stored
// toolset takes its turn meanwhile, and alice's requests wait for her
// toolsets (a request whose caller gives up first gets its context's
// error), then run without the one left out once its server gives up.
func TestAHangingMCPToolsetHoldsOnlyItsTenantAtStart(t *testing.T) {
	var hanging atomic.Bool
	asked, release := make(chan struct{}), make(chan struct{})
	var askedOnce, releaseOnce sync.Once
	server := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "lookup", Description: "Looks a thing up"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		if hanging.Load() && strings.Contains(string(body), `"method":"initialize"`) {
			askedOnce.Do(func() { close(asked) })
			select {
			case <-release:
				http.Error(w, "gone", http.StatusServiceUnavailable) // the connect gives up
			case <-r.Context().Done():
			}
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before srv.Close: its handler returns

	var mu sync.Mutex
	var aliceTools [][]string
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		if requestKind(r) != kindTurn {
			return testkit.Reply{Text: "[]"}
		}
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "alice") {
			mu.Lock()
			aliceTools = append(aliceTools, r.Tools)
			mu.Unlock()
		}
		return testkit.Reply{Text: "ok"}
	}})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Toolsets.WebhooksAllowPrivate = true
	d := daemontest.Start(t, cfg, twoTenants)
	ctx := context.Background()
	alice, bob := asTenant(d, "tok-a"), asTenant(d, "tok-b")
	if _, err := alice.PutToolset(ctx, "slow", api.PutToolsetRequest{Executor: api.Executor{Kind: "mcp", URL: srv.URL}}); err != nil {
		t.Fatalf("alice's MCP toolset: %v", err)
	}
	if _, err := bob.PutToolset(ctx, "crm", api.PutToolsetRequest{Tools: crmTools, Executor: api.Executor{Kind: "client"}}); err != nil {
		t.Fatalf("bob's toolset: %v", err)
	}
	aliceChat, err := alice.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}

	hanging.Store(true)
	d = d.Restart() // returned before alice's server gave up (only release ends it)
	alice, bob = asTenant(d, "tok-a"), asTenant(d, "tok-b")
	select {
	case <-asked:
	case <-time.After(time.Minute):
		t.Fatal("the start never connected alice's stored MCP toolset")
	}

	bobChat, err := bob.CreateChat(ctx, api.CreateChatRequest{Toolsets: []string{"crm"}})
	if err != nil {
		t.Fatalf("bob's chat naming his stored toolset while alice's is being connected: %v", err)
	}
	if res, err := bob.Send(ctx, bobChat.ID, api.SendMessageRequest{Content: "hello from bob"}, nil); err != nil || res.Status != "completed" {
		t.Fatalf("bob's turn while alice's toolset is being connected: %+v %v", res, err)
	}

	// Alice's requests wait for her toolsets: a caller that gives up first
	// is told so, and nothing of hers ran or changed.
	ask := func(ctx context.Context, method, path string) error {
		req, _ := http.NewRequestWithContext(ctx, method, d.Server.URL+path, nil)
		req.Header.Set("Authorization", "Bearer tok-a")
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	for what, call := range map[string]func(context.Context) error{
		"turn": func(ctx context.Context) error {
			_, err := alice.Send(ctx, aliceChat.ID, api.SendMessageRequest{Content: "hello from alice"}, nil)
			return err
		},
		"toolset list":   func(ctx context.Context) error { return ask(ctx, http.MethodGet, "/v1/toolsets") },
		"toolset delete": func(ctx context.Context) error { return ask(ctx, http.MethodDelete, "/v1/toolsets/slow") },
		"toolset put": func(ctx context.Context) error {
			_, err := alice.PutToolset(ctx, "slow", api.PutToolsetRequest{Tools: crmTools, Executor: api.Executor{Kind: "client"}})
			return err
		},
	} {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := call(short)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("alice's %s while her toolset is being connected: %v; want it to wait until its caller gives up", what, err)
		}
	}
	mu.Lock()
	ran := len(aliceTools)
	mu.Unlock()
	if ran != 0 {
		t.Fatalf("alice's turn reached the model while her toolsets were being built")
	}

	releaseOnce.Do(func() { close(release) })
	if res, err := alice.Send(ctx, aliceChat.ID, api.SendMessageRequest{Content: "hello again from alice"}, nil); err != nil || res.Status != "completed" {
		t.Fatalf("alice's turn once her server gave up: %+v %v", res, err)
	}
	var slow api.Toolset
	if st := askJSON(t, d, "tok-a", "GET", "/v1/toolsets/slow", nil, &slow); st != 200 || slow.Version != 1 || slow.Executor.Kind != "mcp" {
		t.Fatalf("alice's toolset after the PUT and DELETE whose callers gave up: %d %+v; want version 1 as stored", st, slow)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, ts := range aliceTools {
		if slices.ContainsFunc(ts, func(n string) bool { return strings.HasPrefix(n, "slow") }) {
			t.Fatalf("alice's turn was sent the toolset left out: %v", ts)
		}
	}
	if _, err := alice.CreateChat(ctx, api.CreateChatRequest{Toolsets: []string{"slow"}}); status(err) != 404 {
		t.Fatalf("a chat naming the toolset left out: %v; want 404 as before", err)
	}
}
