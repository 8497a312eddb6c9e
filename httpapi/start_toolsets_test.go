package httpapi_test

import (
	"context"
	"encoding/json"
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

	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
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
	srv := hangingMCP(t, true)

	var mu sync.Mutex
	var aliceTools [][]string
	d, alice, _ := aliceOnAHeldServerBobNot(t, srv, func(r testkit.Received) testkit.Reply {
		if requestKind(r) != kindTurn {
			return testkit.Reply{Text: "[]"}
		}
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "alice") {
			mu.Lock()
			aliceTools = append(aliceTools, r.Tools)
			mu.Unlock()
		}
		return testkit.Reply{Text: "ok"}
	})
	ctx := context.Background()
	aliceChat, err := alice.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}

	srv.hanging.Store(true)
	d = d.Restart() // returned before alice's server gave up (only release ends it)
	alice, bob := asTenant(d, "tok-a"), asTenant(d, "tok-b")
	srv.waitAsked(t)

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

	srv.release()
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

// heldMCP is an MCP server whose initialize, while hanging is set, is held
// until release, then refused (the connect gives up) or, unless giveUp,
// answered.
type heldMCP struct {
	*httptest.Server
	hanging atomic.Bool
	asked   chan struct{} // closed at the first initialize held
	release func()
}

// aliceOnAHeldServerBobNot starts a two-tenant daemon whose model answers
// by script, where alice stores an MCP toolset "slow" on srv and bob a
// client toolset "crm"; tune, if any, changes the configuration first.
func aliceOnAHeldServerBobNot(t *testing.T, srv *heldMCP, script func(testkit.Received) testkit.Reply, tune ...func(*configs.Config)) (d *daemontest.Daemon, alice, bob *api.Client) {
	t.Helper()
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: script})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Toolsets.WebhooksAllowPrivate = true
	for _, f := range tune {
		f(&cfg)
	}
	d = daemontest.Start(t, cfg, twoTenants)
	ctx := context.Background()
	alice, bob = asTenant(d, "tok-a"), asTenant(d, "tok-b")
	if _, err := alice.PutToolset(ctx, "slow", api.PutToolsetRequest{Executor: api.Executor{Kind: "mcp", URL: srv.URL}}); err != nil {
		t.Fatalf("alice's MCP toolset: %v", err)
	}
	if _, err := bob.PutToolset(ctx, "crm", api.PutToolsetRequest{Tools: crmTools, Executor: api.Executor{Kind: "client"}}); err != nil {
		t.Fatalf("bob's toolset: %v", err)
	}
	return d, alice, bob
}

func hangingMCP(t *testing.T, giveUp bool) *heldMCP {
	t.Helper()
	h := &heldMCP{asked: make(chan struct{})}
	released := make(chan struct{})
	var askedOnce, releaseOnce sync.Once
	h.release = func() { releaseOnce.Do(func() { close(released) }) }
	server := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "lookup", Description: "Looks a thing up"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		if h.hanging.Load() && strings.Contains(string(body), `"method":"initialize"`) {
			askedOnce.Do(func() { close(h.asked) })
			select {
			case <-released:
				if giveUp {
					http.Error(w, "gone", http.StatusServiceUnavailable) // the connect gives up
					return
				}
			case <-r.Context().Done():
				return
			}
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(h.Close)
	t.Cleanup(h.release) // before h.Close: its handler returns
	return h
}

// waitAsked waits until the server holds an initialize.
func (h *heldMCP) waitAsked(t *testing.T) {
	t.Helper()
	select {
	case <-h.asked:
	case <-time.After(time.Minute):
		t.Fatal("the start never connected the stored MCP toolset")
	}
}

// /healthz says, without a token and with counts only, that a tenant's
// stored toolsets are still being built while its MCP server is held at
// start, and stays 200 "ok" meanwhile: the node serves every other tenant,
// so a readiness probe keeps it. Once the server gives up, the field is
// gone.
func TestHealthzSaysToolsetsAreBeingBuiltWhileAServerIsHeld(t *testing.T) {
	srv := hangingMCP(t, true)
	d, alice, _ := aliceOnAHeldServerBobNot(t, srv, func(testkit.Received) testkit.Reply { return testkit.Reply{Text: "ok"} })
	ctx := context.Background()
	if _, err := alice.PutToolset(ctx, "crm", api.PutToolsetRequest{Tools: crmTools, Executor: api.Executor{Kind: "client"}}); err != nil {
		t.Fatalf("alice's client toolset: %v", err)
	}
	health := func() (int, string, api.Health) {
		t.Helper()
		res, err := http.Get(d.Server.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		var h api.Health
		if err := json.Unmarshal(body, &h); err != nil {
			t.Fatalf("/healthz body %s: %v", body, err)
		}
		return res.StatusCode, string(body), h
	}
	if code, body, h := health(); code != 200 || h.ToolsetsBuilding != nil {
		t.Fatalf("/healthz before the restart: %d %s; want 200 without toolsets_building", code, body)
	}

	srv.hanging.Store(true)
	d = d.Restart()
	srv.waitAsked(t)
	// Bob's gate opens on its own; wait for it, so alice's held server is
	// all that is left.
	want := api.ToolsetsBuilding{Tenants: 1, Toolsets: 1}
	deadline := time.Now().Add(time.Minute)
	for {
		code, body, h := health()
		if code != 200 || h.Status != api.HealthOK || h.ToolsetsBuilding == nil {
			t.Fatalf("/healthz while alice's MCP server is held: %d %s; want 200 ok with toolsets_building", code, body)
		}
		for _, secret := range []string{"tok-a", "alice", "slow", srv.URL} {
			if strings.Contains(body, secret) {
				t.Fatalf("/healthz, answered without a token, names %q: %s", secret, body)
			}
		}
		if *h.ToolsetsBuilding == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz while alice's MCP server is held: toolsets_building %+v, want %+v", *h.ToolsetsBuilding, want)
		}
		time.Sleep(10 * time.Millisecond)
	}

	srv.release()
	// Alice's turn waits for her toolsets: once it runs, they are built.
	c, err := asTenant(d, "tok-a").CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if code, body, h := health(); code != 200 || h.ToolsetsBuilding != nil {
		t.Fatalf("/healthz once alice's toolsets are built (chat %s): %d %s; want 200 without toolsets_building", c.ID, code, body)
	}
}

// A turn paused on calls that all have their results (a crash after the
// last one was stored, before the turn went on) is resumed when its chat's
// session starts. Woken right after the daemon's start by a request that
// does not wait for the tenant's toolsets (a message
// added here; its grain activating), it called the model before the
// tenant's stored MCP toolset was registered, without its tools; now the
// turn waits for them, and the model is sent them. (A /compact now waits
// for them itself, before it wakes the chat.)
func TestAResumedTurnWaitsForItsTenantsToolsetsAtStart(t *testing.T) {
	srv := hangingMCP(t, false)
	var mu sync.Mutex
	var resumed [][]string // the tools of each request that answers a result
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		if requestKind(r) == kindTurn && r.Messages[len(r.Messages)-1].Role == chat.RoleTool {
			mu.Lock()
			resumed = append(resumed, r.Tools)
			mu.Unlock()
		}
		return crmScript(r)
	}})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Toolsets.WebhooksAllowPrivate = true
	ctx := context.Background()
	d := daemontest.Start(t, cfg, nil)
	if _, err := d.Client.PutToolset(ctx, "slow", api.PutToolsetRequest{Executor: api.Executor{Kind: "mcp", URL: srv.URL}}); err != nil {
		t.Fatalf("the MCP toolset: %v", err)
	}
	c, paused := pausedOnCRM(t, d, "How is Ada doing?", 1, "slow")
	d.Close()
	onStore(t, cfg, func(st snapshotStore) {
		call := paused.ToolCalls[0]
		if _, err := st.Append(ctx, c.ID, chat.Message{Role: chat.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Content: "3 orders"}); err != nil {
			t.Fatal(err)
		}
	})

	srv.hanging.Store(true)
	d = daemontest.Start(t, cfg, nil)
	srv.waitAsked(t)
	sub := d.Hub.Subscribe(c.ID, 64)
	defer sub.Close()
	// Wakes the chat, its session resuming the turn, while the toolset is
	// being built; what the added message is answered is beside the point.
	askJSON(t, d, "", "POST", "/v1/conversations/conv_"+c.ID+"/items",
		map[string]any{"items": []map[string]string{{"type": "message", "role": "user", "content": "still there?"}}}, nil)
	srv.release()
	resumedAndCompleted(t, sub, paused.TurnID)
	mu.Lock()
	defer mu.Unlock()
	if len(resumed) != 1 || !slices.ContainsFunc(resumed[0], func(n string) bool { return strings.HasPrefix(n, "slow") }) {
		t.Fatalf("the resumed turn's requests were sent the tools %v; want the stored MCP toolset's among them", resumed)
	}
}

// A /compact right after the start waits for its tenant's stored toolsets,
// as a turn does: its summary request, which carries the chat's tools (the
// turn's cached prefix), is sent only once the held MCP server's toolset
// is registered, and carries it. It asked at once, without that toolset.
// Another tenant's /compact meanwhile is not held.
func TestACompactWaitsForItsTenantsToolsetsAtStart(t *testing.T) {
	srv := hangingMCP(t, false)
	var released atomic.Bool
	type summaryReq struct {
		tools    []string
		released bool
	}
	var mu sync.Mutex
	asked := map[string][]summaryReq{} // by tenant, told by the chat's words
	d, alice, bob := aliceOnAHeldServerBobNot(t, srv, func(r testkit.Received) testkit.Reply {
		// A summary asked on the chat's own prefix ends with the summariser's
		// question.
		if len(r.Messages) == 0 || !strings.HasPrefix(r.Messages[len(r.Messages)-1].Content, summarizer.PrefixMark) {
			return testkit.Reply{Text: "Noted."}
		}
		who := "bob"
		if strings.Contains(string(r.Raw), "note from alice") {
			who = "alice"
		}
		mu.Lock()
		asked[who] = append(asked[who], summaryReq{tools: r.Tools, released: released.Load()})
		mu.Unlock()
		return testkit.Reply{Text: "What the person wants: orders.\nDecided or done: nothing.\nStill open: nothing."}
	}, func(cfg *configs.Config) { cfg.Limits.FoldAsLines = false })
	ctx := context.Background()
	chats := map[string]string{}
	for who, cl := range map[string]*api.Client{"alice": alice, "bob": bob} {
		c, err := cl.CreateChat(ctx, api.CreateChatRequest{Toolsets: []string{map[string]string{"alice": "slow", "bob": "crm"}[who]}})
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{"first note from " + who, "second note from " + who} {
			if res, err := cl.Send(ctx, c.ID, api.SendMessageRequest{Content: text}, nil); err != nil || res.Status != "completed" {
				t.Fatalf("%s's turn: %+v %v", who, res, err)
			}
		}
		chats[who] = c.ID
	}

	srv.hanging.Store(true)
	d = d.Restart()
	srv.waitAsked(t)
	alice, bob = asTenant(d, "tok-a"), asTenant(d, "tok-b")
	aliceDone := make(chan error, 1)
	go func() {
		var folded api.Compacted
		aliceDone <- alice.Post(ctx, "/v1/chats/"+chats["alice"]+"/compact", map[string]string{}, &folded)
	}()
	var folded api.Compacted
	if err := bob.Post(ctx, "/v1/chats/"+chats["bob"]+"/compact", map[string]string{}, &folded); err != nil || folded.FirstKeptSeq <= 1 {
		t.Fatalf("bob's /compact while alice's toolset is being connected: %+v %v; want it folded", folded, err)
	}

	released.Store(true)
	srv.release()
	select {
	case err := <-aliceDone:
		if err != nil {
			t.Fatalf("alice's /compact once her toolset is built: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("alice's /compact never answered once her toolset was built")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked["bob"]) != 1 {
		t.Fatalf("bob's summary requests: %+v; want one (all: %+v)", asked["bob"], asked)
	}
	if a := asked["alice"]; len(a) != 1 || !a[0].released || !slices.ContainsFunc(a[0].tools, func(n string) bool { return strings.HasPrefix(n, "slow") }) {
		t.Fatalf("alice's summary requests: %+v; want one, sent once her MCP toolset was built, with its tools", a)
	}
}
