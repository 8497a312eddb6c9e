package httpapi_test

// Acceptance tests of issue 17: applications bring their own instructions,
// settings and tool registries over HTTP.

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
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
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
	"github.com/agentd/agentd/tools"
)

// askJSON sends body as JSON with call and decodes the answer into out
// (an *api.Error takes an error answer); it returns the status.
func askJSON(t *testing.T, d *daemontest.Daemon, token, method, path string, body any, out any) int {
	t.Helper()
	raw := ""
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	a := call(t, context.Background(), method, d.Server.URL+path, token, raw)
	if e, ok := out.(*api.Error); ok && a.status >= 400 {
		*e = a.err
		return a.status
	}
	if out != nil && a.status < 300 && a.body != "" {
		if err := json.Unmarshal([]byte(a.body), out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, a.body)
		}
	}
	return a.status
}

var crmTools = []api.Tool{
	{Name: "crm_find", Description: "Find a customer in the CRM by name.", Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)},
	{Name: "crm_note", Description: "Add a note to a customer.", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"text":{"type":"string"}}}`)},
}

// crmScript calls crm_find once, then answers with what it returned.
func crmScript(r testkit.Received) testkit.Reply {
	if requestKind(r) != kindTurn {
		return testkit.Reply{Text: "[]"}
	}
	last := r.Messages[len(r.Messages)-1]
	if last.Role == chat.RoleTool {
		return testkit.Reply{Text: "The CRM says: " + last.Content}
	}
	if strings.Contains(last.Content, "Ada") {
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "call_find_" + fmt.Sprint(len(r.Messages)), Name: "crm_find", Arguments: `{"name":"Ada"}`}}}
	}
	return testkit.Reply{Text: "noted: " + last.Content}
}

func startCRM(t *testing.T, tune func(cfg *configs.Config)) (*daemontest.Daemon, *openaifake.Server, api.Chat) {
	t.Helper()
	fake := openaifake.New(openaifake.Options{Script: crmScript})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	if tune != nil {
		tune(&cfg)
	}
	d := daemontest.Start(t, cfg, nil)
	var ts api.Toolset
	if st := askJSON(t, d, "", "PUT", "/v1/toolsets/crm", api.PutToolsetRequest{Tools: crmTools, Executor: api.Executor{Kind: "client"}}, &ts); st != 200 || ts.Version != 1 || len(ts.Tools) != 2 {
		t.Fatalf("PUT toolset: %d %+v", st, ts)
	}
	c, err := d.Client.CreateChat(context.Background(), api.CreateChatRequest{Toolsets: []string{"crm"}})
	if err != nil {
		t.Fatal(err)
	}
	return d, fake, c
}

func TestAClientToolPausesTheTurnAndItsResultResumesIt(t *testing.T) {
	d, fake, c := startCRM(t, nil)
	ctx := context.Background()

	// JSON: the answer says what the application must run.
	var paused api.TurnResult
	if st := askJSON(t, d, "", "POST", "/v1/chats/"+c.ID+"/messages", api.SendMessageRequest{Content: "How is Ada doing?"}, &paused); st != 200 {
		t.Fatalf("send: %d", st)
	}
	if paused.Status != "requires_action" || len(paused.ToolCalls) != 1 || paused.ToolCalls[0].Name != "crm_find" || paused.ToolCalls[0].Arguments != `{"name":"Ada"}` {
		t.Fatalf("paused = %+v", paused)
	}
	var done api.TurnResult
	results := api.ToolResultsRequest{Results: []api.ToolResult{{CallID: paused.ToolCalls[0].ID, Output: `{"id":"c-7","orders":3}`}}}
	if st := askJSON(t, d, "", "POST", "/v1/chats/"+c.ID+"/tool-results", results, &done); st != 200 {
		t.Fatalf("tool-results: %d", st)
	}
	if done.Status != "completed" || done.TurnID != paused.TurnID || done.Messages[len(done.Messages)-1].Content != `The CRM says: {"id":"c-7","orders":3}` {
		t.Fatalf("resumed = %+v", done)
	}
	// A second answer to the same call is refused: nothing waits for it.
	if st := askJSON(t, d, "", "POST", "/v1/chats/"+c.ID+"/tool-results", results, nil); st != http.StatusConflict {
		t.Fatalf("a second answer: %d, want 409", st)
	}

	// SSE: the stream ends its step with turn.requires_action.
	var types []string
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "And Ada's notes?"}, func(ev api.Event) { types = append(types, ev.Type) })
	if err != nil || res.Status != "requires_action" || types[len(types)-1] != api.EventTurnRequiresAction || !slices.Contains(types, api.EventToolCall) {
		t.Fatalf("stream: %v %+v %v", err, res, types)
	}
	var bad api.Error
	if st := askJSON(t, d, "", "POST", "/v1/chats/"+c.ID+"/tool-results", api.ToolResultsRequest{Results: []api.ToolResult{{CallID: "nope", Output: "x"}}}, &bad); st != 400 || !strings.Contains(bad.Message, res.ToolCalls[0].ID) ||
		strings.Count(bad.Message, "invalid request") != 1 {
		t.Fatalf("an unknown call id: %d %q (naming the awaited call, and saying %q once)", st, bad.Message, "invalid request")
	}
	res, err = d.Client.SendToolResults(ctx, c.ID, api.ToolResultsRequest{Results: []api.ToolResult{{CallID: res.ToolCalls[0].ID, Output: "no notes"}}}, nil)
	if err != nil || res.Status != "completed" || res.Messages[len(res.Messages)-1].Content != "The CRM says: no notes" {
		t.Fatalf("stream resumed: %v %+v", err, res)
	}
	// The model saw the application's tools natively, after agentd's own.
	turns := requestsOf(fake, kindTurn)
	if tl := turns[0].Tools; !slices.Contains(tl, "crm_find") || !slices.Contains(tl, "crm_note") || tl[len(tl)-1] != "crm_note" {
		t.Fatalf("tools sent = %v", tl)
	}
}

func TestAPausedTurnSurvivesARestart(t *testing.T) {
	d, _, c := startCRM(t, nil)
	var paused api.TurnResult
	askJSON(t, d, "", "POST", "/v1/chats/"+c.ID+"/messages", api.SendMessageRequest{Content: "How is Ada doing?"}, &paused)
	if paused.Status != "requires_action" {
		t.Fatalf("paused = %+v", paused)
	}
	d = d.Restart()
	var done api.TurnResult
	st := askJSON(t, d, "", "POST", "/v1/chats/"+c.ID+"/tool-results", api.ToolResultsRequest{Results: []api.ToolResult{{CallID: paused.ToolCalls[0].ID, Output: "3 orders"}}}, &done)
	if st != 200 || done.Status != "completed" || done.TurnID != paused.TurnID || done.Messages[len(done.Messages)-1].Content != "The CRM says: 3 orders" {
		t.Fatalf("after restart: %d %+v", st, done)
	}
}

func TestATurnLeftPausedEndsWithAProblemAndTheNextMessageGoesOn(t *testing.T) {
	d, fake, c := startCRM(t, func(cfg *configs.Config) { cfg.Toolsets.ResultsWait.Duration = 100 * time.Millisecond })
	sub := d.Hub.Subscribe(c.ID, 64)
	defer sub.Close()
	var paused api.TurnResult
	askJSON(t, d, "", "POST", "/v1/chats/"+c.ID+"/messages", api.SendMessageRequest{Content: "How is Ada doing?"}, &paused)
	var ended api.TurnResult
	for ev := range sub.C {
		if ev.Type == api.EventTurnCompleted {
			ended = ev.Data.(api.TurnResult)
			break
		}
	}
	if ended.Problem == nil || ended.Problem.Kind != api.ProblemToolResults || !strings.Contains(ended.Problem.Message, paused.ToolCalls[0].ID) {
		t.Fatalf("ended = %+v", ended)
	}
	res, err := d.Client.Send(context.Background(), c.ID, api.SendMessageRequest{Content: "never mind"}, nil)
	if err != nil || res.Problem != nil || res.Messages[len(res.Messages)-1].Content != "noted: never mind" {
		t.Fatalf("next message: %v %+v", err, res)
	}
	// The unanswered call reached the model with its error result.
	turns := requestsOf(fake, kindTurn)
	last := turns[len(turns)-1].Messages
	if r := last[len(last)-2]; r.Role != chat.RoleTool || !strings.Contains(r.Content, "did not send one") {
		t.Fatalf("the call's result in the next request = %+v", r)
	}
}

func TestAWebhookToolsetIsSignedAndItsFailuresAreResults(t *testing.T) {
	const secretEnv = "AGENTD_TEST_WEBHOOK_SECRET"
	t.Setenv(secretEnv, "a-long-shared-secret")
	var mu sync.Mutex
	verified := 0
	quit := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		want := tools.SignWebhook([]byte("a-long-shared-secret"), r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), body)
		if !hmac.Equal([]byte(r.Header.Get("webhook-signature")), []byte("v1,"+want)) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		verified++
		mu.Unlock()
		var c tools.WebhookCall
		_ = json.Unmarshal(body, &c)
		switch c.Tool {
		case "inv_total":
			fmt.Fprintf(w, "total for %s: 42 EUR", c.Arguments)
		case "inv_fail":
			http.Error(w, "ledger offline", http.StatusInternalServerError)
		case "inv_slow":
			select {
			case <-r.Context().Done():
			case <-quit:
			}
		}
	}))
	defer hook.Close()
	defer close(quit)
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleTool {
			return testkit.Reply{Text: "done"}
		}
		return testkit.Reply{ToolCalls: []chat.ToolCall{
			{ID: "w1", Name: "inv_total", Arguments: `{"id":"A1"}`}, {ID: "w2", Name: "inv_fail", Arguments: `{}`}, {ID: "w3", Name: "inv_slow", Arguments: `{}`}}}
	}})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Toolsets.AllowedEnv = []string{secretEnv}
	d := daemontest.Start(t, cfg, nil)
	params := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)
	// The timeout cuts inv_slow, which never answers; inv_total and inv_fail
	// answer at once, well within it however loaded the machine.
	body := api.PutToolsetRequest{Tools: []api.Tool{{Name: "inv_total", Parameters: params}, {Name: "inv_fail", Parameters: params}, {Name: "inv_slow", Parameters: params}},
		Executor: api.Executor{Kind: "webhook", URL: hook.URL, SecretEnv: secretEnv, Timeout: "2s"}}
	var refused api.Error
	if st := askJSON(t, d, "", "PUT", "/v1/toolsets/invoices", body, &refused); st != 400 || !strings.Contains(refused.Message, "private") {
		t.Fatalf("a loopback webhook without the yaml's leave: %d %q", st, refused.Message)
	}
	d.Close()
	cfg.Toolsets.WebhooksAllowPrivate = true
	d = daemontest.Start(t, cfg, nil)
	other := body
	other.Executor.SecretEnv = "HOME"
	if st := askJSON(t, d, "", "PUT", "/v1/toolsets/invoices", other, &refused); st != 400 || !strings.Contains(refused.Message, "allowed_env") {
		t.Fatalf("a variable the operator did not allow: %d %q", st, refused.Message)
	}
	if st := askJSON(t, d, "", "PUT", "/v1/toolsets/invoices", body, nil); st != 200 {
		t.Fatalf("PUT: %d", st)
	}
	c, _ := d.Client.CreateChat(context.Background(), api.CreateChatRequest{Toolsets: []string{"invoices"}})
	res, err := d.Client.Send(context.Background(), c.ID, api.SendMessageRequest{Content: "total of A1?"}, nil)
	if err != nil || res.Problem != nil || res.Status != "completed" {
		t.Fatalf("turn: %v %+v", err, res)
	}
	got := map[string]api.Message{}
	for _, m := range res.Messages {
		if m.Role == api.RoleTool {
			got[m.ToolCallID] = m
		}
	}
	if m := got["w1"]; m.IsError || m.Content != `total for {"id":"A1"}: 42 EUR` {
		t.Fatalf("the answer = %+v", m)
	}
	if m := got["w2"]; !m.IsError || !strings.Contains(m.Content, "500") || !strings.Contains(m.Content, "ledger offline") {
		t.Fatalf("the 500 = %+v", m)
	}
	if m := got["w3"]; !m.IsError || !strings.Contains(m.Content, "did not answer within 2s") {
		t.Fatalf("the timeout = %+v", m)
	}
	mu.Lock()
	defer mu.Unlock()
	if verified != 3 {
		t.Fatalf("%d calls carried a valid signature, want 3", verified)
	}
}

func TestAnMCPToolsetIsRegisteredOverHTTPAndRemoved(t *testing.T) {
	const tokenEnv = "AGENTD_TEST_MCP_TOKEN"
	t.Setenv(tokenEnv, "Bearer mcp-s3cret")
	server := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1"}, nil)
	type cityIn struct {
		City string `json:"city"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "forecast", Description: "Tomorrow's weather in a city"},
		func(_ context.Context, _ *mcp.CallToolRequest, in cityIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sunny in " + in.City}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer mcp-s3cret" {
			http.Error(w, "unauthorised", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleTool {
			return testkit.Reply{Text: last.Content}
		}
		if slices.Contains(r.Tools, "wx__forecast") {
			return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "m1", Name: "wx__forecast", Arguments: `{"city":"Lyon"}`}}}
		}
		return testkit.Reply{Text: "no weather tool"}
	}})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Toolsets.WebhooksAllowPrivate = true
	cfg.Toolsets.AllowedEnv = []string{tokenEnv}
	d := daemontest.Start(t, cfg, nil)
	var ts api.Toolset
	if st := askJSON(t, d, "", "PUT", "/v1/toolsets/wx", api.PutToolsetRequest{Executor: api.Executor{Kind: "mcp", URL: srv.URL, HeadersEnv: map[string]string{"Authorization": tokenEnv}}}, &ts); st != 200 {
		t.Fatalf("PUT: %d", st)
	}
	if len(ts.Tools) != 1 || ts.Tools[0].Name != "wx__forecast" {
		t.Fatalf("toolset = %+v", ts)
	}
	c, _ := d.Client.CreateChat(context.Background(), api.CreateChatRequest{Toolsets: []string{"wx"}})
	res, err := d.Client.Send(context.Background(), c.ID, api.SendMessageRequest{Content: "weather in Lyon?"}, nil)
	if err != nil || res.Messages[len(res.Messages)-1].Content != "sunny in Lyon" {
		t.Fatalf("turn: %v %+v", err, res)
	}
	var list struct{ Toolsets []api.Toolset }
	if askJSON(t, d, "", "GET", "/v1/toolsets", nil, &list); len(list.Toolsets) != 1 || list.Toolsets[0].Name != "wx" {
		t.Fatalf("list = %+v", list)
	}
	if st := askJSON(t, d, "", "DELETE", "/v1/toolsets/wx", nil, nil); st != http.StatusNoContent {
		t.Fatalf("DELETE: %d", st)
	}
	if st := askJSON(t, d, "", "GET", "/v1/toolsets/wx", nil, nil); st != 404 {
		t.Fatalf("GET after DELETE: %d", st)
	}
	res, err = d.Client.Send(context.Background(), c.ID, api.SendMessageRequest{Content: "weather in Lyon?"}, nil)
	if err != nil || res.Messages[len(res.Messages)-1].Content != "no weather tool" {
		t.Fatalf("after removal the chat goes on without it: %v %+v", err, res)
	}
}

func TestToolsetsAreTenantScoped(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Script: crmScript})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), map[string]string{"token-a": "a", "token-b": "b"})
	if st := askJSON(t, d, "token-a", "PUT", "/v1/toolsets/crm", api.PutToolsetRequest{Tools: crmTools, Executor: api.Executor{Kind: "client"}}, nil); st != 200 {
		t.Fatalf("PUT: %d", st)
	}
	// Each answers as for a name no toolset has.
	bc, err := (&api.Client{BaseURL: d.Server.URL, Token: "token-b"}).CreateChat(context.Background(), api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, probe := range []struct{ method, path, body string }{
		{"GET", "/v1/toolsets/crm", ""}, {"DELETE", "/v1/toolsets/crm", ""},
		{"POST", "/v1/chats", `{"toolsets":["crm"]}`}, {"PATCH", "/v1/chats/" + bc.ID, `{"toolsets":["crm"]}`},
	} {
		got := call(t, context.Background(), probe.method, d.Server.URL+probe.path, "token-b", probe.body)
		none := call(t, context.Background(), probe.method, d.Server.URL+strings.ReplaceAll(probe.path, "crm", "mrc"), "token-b", strings.ReplaceAll(probe.body, "crm", "mrc"))
		if got.status != 404 || strings.ReplaceAll(none.body, "mrc", "crm") != got.body {
			t.Fatalf("%s %s %s as another tenant: %d %s; a name no toolset has: %s", probe.method, probe.path, probe.body, got.status, got.body, none.body)
		}
	}
	var list struct{ Toolsets []api.Toolset }
	if askJSON(t, d, "token-b", "GET", "/v1/toolsets", nil, &list); len(list.Toolsets) != 0 {
		t.Fatalf("another tenant lists %+v", list.Toolsets)
	}
	// The same names are free for the other tenant.
	if st := askJSON(t, d, "token-b", "PUT", "/v1/toolsets/crm", api.PutToolsetRequest{Tools: crmTools, Executor: api.Executor{Kind: "client"}}, nil); st != 200 {
		t.Fatalf("PUT as b: %d", st)
	}
	var bad api.Error
	if st := askJSON(t, d, "token-a", "PUT", "/v1/toolsets/crm2", api.PutToolsetRequest{Tools: crmTools[:1], Executor: api.Executor{Kind: "client"}}, &bad); st != 400 || !strings.Contains(bad.Message, "already in toolset crm") {
		t.Fatalf("a colliding toolset: %d %q", st, bad.Message)
	}
	if st := askJSON(t, d, "token-a", "PUT", "/v1/toolsets/bad", api.PutToolsetRequest{Tools: []api.Tool{{Name: "has space", Parameters: crmTools[0].Parameters}}, Executor: api.Executor{Kind: "client"}}, &bad); st != 400 {
		t.Fatalf("a bad name: %d", st)
	}
}

const patInstructions = "You are Pat, the front desk of Acme Dental. Answer in two sentences at most. Never give medical advice."

func TestAChatsInstructionsAreEveryProtocolsSystemPromptByteStable(t *testing.T) {
	for _, kind := range daemontest.Kinds {
		t.Run(kind, func(t *testing.T) {
			fake := startFake(t, kind, fakeOptions{Script: func(r testkit.Received) testkit.Reply { return testkit.Reply{Text: "ok"} }, Models: []fakeModel{{ID: "m", Window: 32000, Loaded: true}}})
			cfg, err := daemontest.ConfigFor(kind, t.TempDir(), fake.URL(), 32000)
			if err != nil {
				t.Fatal(err)
			}
			d := daemontest.Start(t, cfg, nil)
			ctx := context.Background()
			temp := 0.2
			settings := &api.Settings{Temperature: &temp, Stop: []string{"END"}, ReasoningEffort: "high"}
			var refused api.Error
			st := askJSON(t, d, "", "POST", "/v1/chats", api.CreateChatRequest{Instructions: patInstructions, Settings: settings}, &refused)
			if kind == "anthropic" {
				// The Messages API of this SDK has no temperature: refused clearly.
				if st != 400 || !strings.Contains(refused.Message, "temperature") {
					t.Fatalf("anthropic with a temperature: %d %q", st, refused.Message)
				}
				settings.Temperature = nil
			}
			c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{Instructions: patInstructions, Settings: settings})
			if err != nil || c.InstructionsVersion != 1 || c.Settings == nil {
				t.Fatalf("create: %v %+v", err, c)
			}
			for _, text := range []string{"hello", "when are you open?", "thanks"} {
				if res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: text}, nil); err != nil || res.Problem != nil {
					t.Fatalf("send: %v %+v", err, res.Problem)
				}
			}
			var systems []string
			var raws []string
			for _, r := range fake.Requests() {
				if requestKind(r) == kindTurn {
					systems = append(systems, r.System)
					raws = append(raws, string(r.Raw))
				}
			}
			if len(systems) != 3 || !strings.HasPrefix(systems[0], patInstructions+"\n\n") {
				t.Fatalf("%d turns; the first system prompt starts %.120q", len(systems), systems[0])
			}
			if systems[1] != systems[0] || systems[2] != systems[0] {
				t.Fatal("the system prompt changed between turns")
			}
			want := map[string][]string{
				"openai":    {`"temperature":0.2`, `"stop":["END"]`, `"reasoning_effort":"high"`},
				"anthropic": {`"stop_sequences":["END"]`, `"effort":"high"`},
				"ollama":    {`"temperature":0.2`, `"stop":["END"]`, `"think":"high"`},
			}[kind]
			for _, w := range want {
				if !strings.Contains(raws[0], w) {
					t.Errorf("the %s request lacks %s", kind, w)
				}
			}
			bad := api.Settings{ReasoningEffort: "turbo"}
			if st := askJSON(t, d, "", "PATCH", "/v1/chats/"+c.ID, api.PatchChatRequest{Settings: &bad}, &refused); st != 400 || !strings.Contains(refused.Message, "reasoning_effort") {
				t.Fatalf("an effort the protocol has no word for: %d %q", st, refused.Message)
			}
		})
	}
}

func TestInstructionsPatchedMidChatApplyFromTheNextTurn(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Script: func(testkit.Received) testkit.Reply { return testkit.Reply{Text: "ok"} }})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{Instructions: patInstructions})
	_, _ = d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "hello"}, nil)
	changed := "You are Sam, the night nurse line of Acme Dental."
	var after api.Chat
	if st := askJSON(t, d, "", "PATCH", "/v1/chats/"+c.ID, api.PatchChatRequest{Instructions: &changed}, &after); st != 200 || after.InstructionsVersion != 2 || after.Instructions != changed {
		t.Fatalf("PATCH: %d %+v", st, after)
	}
	_, _ = d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "hello again"}, nil)
	turns := requestsOf(fake, kindTurn)
	if len(turns) != 2 || !strings.HasPrefix(turns[0].System, patInstructions) || !strings.HasPrefix(turns[1].System, changed+"\n\n") {
		t.Fatalf("systems: %.60q / %.60q", turns[0].System, turns[1].System)
	}
	// Nothing else of the chat was lost with the change.
	if msgs, _ := d.Client.Transcript(ctx, c.ID); len(msgs) != 4 {
		t.Fatalf("transcript has %d messages, want 4", len(msgs))
	}
}

func TestInstructionsOverTheLeanShareAreSentWholeAndSaidSo(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Script: func(testkit.Received) testkit.Reply { return testkit.Reply{Text: "ok"} }})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 8192), nil)
	ctx := context.Background()
	long := strings.Repeat("Always greet the caller by name and confirm the appointment date twice. ", 200)
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{Instructions: long})
	var events []api.Event
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "hi"}, func(ev api.Event) { events = append(events, ev) })
	if err != nil {
		t.Fatal(err)
	}
	warned := slices.ContainsFunc(events, func(ev api.Event) bool {
		return ev.Type == api.EventTurnProblem && strings.Contains(string(ev.Data), api.ProblemInstructions)
	})
	if !warned || res.Problem != nil {
		t.Fatalf("warned %v, problem %+v", warned, res.Problem)
	}
	if sys := requestsOf(fake, kindTurn)[0].System; !strings.HasPrefix(sys, long) {
		t.Fatal("lean mode cut the application's instructions")
	}
	v, err := d.Client.Context(ctx, c.ID)
	if err != nil || len(v.Warnings) != 1 || !strings.Contains(v.Warnings[0], "instructions") || v.InstructionsTokens == 0 {
		t.Fatalf("context: %v %+v %d", err, v.Warnings, v.InstructionsTokens)
	}
}

func TestTenantDefaultInstructionsReachChatsWithoutTheirOwn(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Script: func(testkit.Received) testkit.Reply { return testkit.Reply{Text: "ok"} }})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Tenants = map[string]configs.Tenant{"default": {Instructions: "You work for Acme."}}
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	plain, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	own, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{Instructions: patInstructions})
	_, _ = d.Client.Send(ctx, plain.ID, api.SendMessageRequest{Content: "a"}, nil)
	_, _ = d.Client.Send(ctx, own.ID, api.SendMessageRequest{Content: "b"}, nil)
	turns := requestsOf(fake, kindTurn)
	if !strings.HasPrefix(turns[0].System, "You work for Acme.\n\n") || !strings.HasPrefix(turns[1].System, patInstructions) || strings.Contains(turns[1].System, "Acme.\n\n") {
		t.Fatalf("systems: %.40q / %.40q", turns[0].System, turns[1].System)
	}
}

// erpTools is a registry of 5,000 application tools: 20 verbs on 25
// things in 10 regions.
func erpTools() []api.Tool {
	verbs := []string{"refund", "issue", "void", "approve", "audit", "export", "merge", "split", "archive", "restore",
		"price", "tag", "assign", "close", "reopen", "escalate", "forecast", "reconcile", "notify", "sync"}
	things := []string{"invoice", "order", "shipment", "contract", "ticket", "lead", "quote", "payment", "refundable", "subscription",
		"vendor", "asset", "budget", "expense", "timesheet", "project", "campaign", "warranty", "license", "coupon",
		"pallet", "recipe", "survey", "booking", "claim"}
	regions := []string{"emea", "apac", "latam", "nordics", "iberia", "benelux", "dach", "anz", "gulf", "africa"}
	params := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"record id"}},"required":["id"]}`)
	var out []api.Tool
	for _, v := range verbs {
		for _, th := range things {
			for _, r := range regions {
				out = append(out, api.Tool{Name: v + "_" + th + "_" + r, Description: fmt.Sprintf("%s a %s of the %s region's ledger.", v, th, strings.ToUpper(r)), Parameters: params})
			}
		}
	}
	return out
}

func TestFiveThousandApplicationToolsOnAnEightKWindowSendOneToolUntilTheModelAsks(t *testing.T) {
	var mu sync.Mutex
	var toolLists [][]string
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		if requestKind(r) != kindTurn {
			return testkit.Reply{Text: "[]"}
		}
		mu.Lock()
		toolLists = append(toolLists, r.Tools)
		mu.Unlock()
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == chat.RoleTool && last.ToolCallID == "k1" && slices.Contains(r.Tools, "refund_invoice_emea"):
			return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "k2", Name: "refund_invoice_emea", Arguments: `{"id":"INV-4242"}`}}}
		case last.Role == chat.RoleTool:
			return testkit.Reply{Text: "done: " + last.Content}
		case last.Content == "thanks":
			return testkit.Reply{Text: "you're welcome"}
		}
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "k1", Name: "find_tools", Arguments: `{"query":"refund an invoice in the EMEA region"}`}}}
	}})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 8192)
	cfg.Providers[0].Models = append(cfg.Providers[0].Models, configs.Model{ID: "big", Window: 200_000})
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "a", "tok-b": "b"})
	if st := askJSON(t, d, "tok-a", "PUT", "/v1/toolsets/erp", api.PutToolsetRequest{Tools: erpTools(), Executor: api.Executor{Kind: "client"}}, nil); st != 200 {
		t.Fatalf("PUT 5000 tools: %d", st)
	}
	// Another tenant's tool that would match the search better must not come back.
	secret := []api.Tool{{Name: "refund_invoice_emea_fast", Description: "Refund an invoice in the EMEA region, fast.", Parameters: crmTools[0].Parameters}}
	if st := askJSON(t, d, "tok-b", "PUT", "/v1/toolsets/erp", api.PutToolsetRequest{Tools: secret, Executor: api.Executor{Kind: "client"}}, nil); st != 200 {
		t.Fatalf("PUT as b: %d", st)
	}
	client := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	ctx := context.Background()
	c, err := client.CreateChat(ctx, api.CreateChatRequest{Toolsets: []string{"erp"}})
	if err != nil {
		t.Fatal(err)
	}
	var found string
	res, err := client.Send(ctx, c.ID, api.SendMessageRequest{Content: "Please give Ada her money back for INV-4242, the Paris office."}, func(ev api.Event) {
		if ev.Type == api.EventToolResult && strings.Contains(string(ev.Data), "find_tools") {
			found = string(ev.Data)
		}
	})
	if err != nil || res.Status != "requires_action" || res.ToolCalls[0].Name != "refund_invoice_emea" {
		t.Fatalf("turn: %v %+v", err, res)
	}
	if strings.Contains(found, "refund_invoice_emea_fast") {
		t.Fatal("find_tools returned another tenant's tool")
	}
	mu.Lock()
	first, second := toolLists[0], toolLists[1]
	mu.Unlock()
	if !slices.Equal(first, []string{"find_tools"}) {
		t.Fatalf("the first request carried %d tools: %v", len(first), first[:min(len(first), 5)])
	}
	if len(second) > 1+5 || !slices.Contains(second, "refund_invoice_emea") {
		t.Fatalf("after find_tools the request carried %v", second)
	}
	res, err = client.SendToolResults(ctx, c.ID, api.ToolResultsRequest{Results: []api.ToolResult{{CallID: "k2", Output: "refunded"}}}, nil)
	if err != nil || res.Status != "completed" {
		t.Fatalf("resume: %v %+v", err, res)
	}
	if _, err := client.Send(ctx, c.ID, api.SendMessageRequest{Content: "thanks"}, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	lists := slices.Clone(toolLists)
	mu.Unlock()
	// The loaded tools keep their order from one request to the next.
	if a, b := lists[len(lists)-2], lists[len(lists)-1]; !slices.Equal(a, b) || a[0] != "find_tools" {
		t.Fatalf("tool order changed between turns: %v then %v", a, b)
	}

	// A big window defers a registry that would take more than a tenth of it.
	big, _ := client.CreateChat(ctx, api.CreateChatRequest{Model: "fake/big", Toolsets: []string{"erp"}})
	_, _ = client.Send(ctx, big.ID, api.SendMessageRequest{Content: "thanks"}, nil)
	mu.Lock()
	last := toolLists[len(toolLists)-1]
	mu.Unlock()
	if len(last) > 1+maxPreloaded || last[0] != "find_tools" {
		t.Fatalf("a 200K window was sent %d tools", len(last))
	}
}

// maxPreloaded bounds the tools a first lean request may carry besides
// find_tools: those the message names.
const maxPreloaded = 3

// A toolset's name is one path segment, but an escaped slash decodes into
// it: with tenants "a" and "a/b", tenant a must not reach b's toolsets by
// naming "b/crm" (their records share the key "a/b/crm").
func TestAToolsetNameWithASlashReachesNoOtherTenant(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Script: crmScript})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), map[string]string{"token-a": "a", "token-ab": "a/b"})
	if st := askJSON(t, d, "token-ab", "PUT", "/v1/toolsets/crm", api.PutToolsetRequest{Tools: crmTools, Executor: api.Executor{Kind: "client"}}, nil); st != 200 {
		t.Fatalf("PUT as a/b: %d", st)
	}
	for _, probe := range []struct{ method, path string }{{"GET", "/v1/toolsets/b%2Fcrm"}, {"DELETE", "/v1/toolsets/b%2Fcrm"}} {
		if st := askJSON(t, d, "token-a", probe.method, probe.path, nil, nil); st != 404 {
			t.Fatalf("%s %s as tenant a: %d, want 404", probe.method, probe.path, st)
		}
	}
	if st := askJSON(t, d, "token-ab", "GET", "/v1/toolsets/crm", nil, nil); st != 200 {
		t.Fatalf("a/b's toolset after a's probes: %d, want 200", st)
	}
}

// An application's MCP server is held to limits.max_tool_result_bytes as the
// yaml's servers are: a bigger answer fails that call unread, rather than
// being read whole (up to 8 MiB) and cut afterwards.
func TestAnMCPToolsetsAnswerIsBoundedByMaxToolResultBytes(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "dump", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "dump", Description: "Dumps a big table"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("row ", 20_000)}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close) // after the daemon's close, which ends the session
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleTool {
			return testkit.Reply{Text: "done"}
		}
		if slices.Contains(r.Tools, "db__dump") {
			return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "d1", Name: "db__dump", Arguments: `{}`}}}
		}
		return testkit.Reply{Text: "no tool"}
	}})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Toolsets.WebhooksAllowPrivate = true
	cfg.Limits.MaxToolResultBytes = 4096
	d := daemontest.Start(t, cfg, nil)
	if st := askJSON(t, d, "", "PUT", "/v1/toolsets/db", api.PutToolsetRequest{Executor: api.Executor{Kind: "mcp", URL: srv.URL}}, nil); st != 200 {
		t.Fatalf("PUT: %d", st)
	}
	c, _ := d.Client.CreateChat(context.Background(), api.CreateChatRequest{Toolsets: []string{"db"}})
	res, err := d.Client.Send(context.Background(), c.ID, api.SendMessageRequest{Content: "dump the table"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var result *api.Message
	for i, m := range res.Messages {
		if m.Role == api.RoleTool {
			result = &res.Messages[i]
		}
	}
	if result == nil || !result.IsError || !strings.Contains(result.Content, "answered the call to dump, but") {
		t.Fatalf("the oversize answer is not refused as too large: %.300s", fmt.Sprintf("%+v", result))
	}
}

// A restart connects the stored MCP toolsets at once, not one after
// another: here each server answers its first request only when both have
// been asked, so connecting them in turn leaves both out (each waits out
// the connect timeout alone).
func TestARestartConnectsStoredMCPToolsetsAtOnce(t *testing.T) {
	var gated atomic.Bool
	var mu sync.Mutex
	arrived, both := 0, make(chan struct{})
	newServer := func(tool string) *httptest.Server {
		server := mcp.NewServer(&mcp.Implementation{Name: tool, Version: "1"}, nil)
		mcp.AddTool(server, &mcp.Tool{Name: tool, Description: "A tool"},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tool}}}, nil, nil
			})
		handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			if gated.Load() && strings.Contains(string(body), `"method":"initialize"`) {
				mu.Lock()
				if arrived++; arrived == 2 {
					close(both)
				}
				mu.Unlock()
				select {
				case <-both:
				case <-r.Context().Done():
					return
				}
			}
			handler.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	one, two := newServer("one"), newServer("two")
	fake := openaifake.New(openaifake.Options{Script: crmScript})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Toolsets.WebhooksAllowPrivate = true
	d := daemontest.Start(t, cfg, nil)
	for name, srv := range map[string]*httptest.Server{"one": one, "two": two} {
		if st := askJSON(t, d, "", "PUT", "/v1/toolsets/"+name, api.PutToolsetRequest{Executor: api.Executor{Kind: "mcp", URL: srv.URL}}, nil); st != 200 {
			t.Fatalf("PUT %s: %d", name, st)
		}
	}
	gated.Store(true)
	d = d.Restart()
	for _, name := range []string{"one", "two"} {
		var ts api.Toolset
		if st := askJSON(t, d, "", "GET", "/v1/toolsets/"+name, nil, &ts); st != 200 || len(ts.Tools) != 1 {
			t.Fatalf("toolset %s after the restart: %d %+v", name, st, ts)
		}
	}
}

// A webhook is sent only arguments that match its tool's schema: the
// model's others come back to it as an error result naming the mismatch.
func TestAWebhookIsSentOnlyArgumentsThatMatchItsSchema(t *testing.T) {
	const secretEnv = "AGENTD_TEST_WEBHOOK_SECRET"
	t.Setenv(secretEnv, "a-long-shared-secret")
	var mu sync.Mutex
	var sent []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c tools.WebhookCall
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &c)
		mu.Lock()
		sent = append(sent, string(c.Arguments))
		mu.Unlock()
		fmt.Fprint(w, "42 EUR")
	}))
	t.Cleanup(hook.Close)
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleTool {
			return testkit.Reply{Text: "done"}
		}
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "ok", Name: "inv_total", Arguments: `{"id":"A1"}`},
			{ID: "type", Name: "inv_total", Arguments: `{"id":5}`}, {ID: "missing", Name: "inv_total", Arguments: `{}`}}}
	}})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Toolsets.AllowedEnv = []string{secretEnv}
	cfg.Toolsets.WebhooksAllowPrivate = true
	d := daemontest.Start(t, cfg, nil)
	params := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)
	body := api.PutToolsetRequest{Tools: []api.Tool{{Name: "inv_total", Parameters: params}}, Executor: api.Executor{Kind: "webhook", URL: hook.URL, SecretEnv: secretEnv}}
	if st := askJSON(t, d, "", "PUT", "/v1/toolsets/invoices", body, nil); st != 200 {
		t.Fatalf("PUT: %d", st)
	}
	c, _ := d.Client.CreateChat(context.Background(), api.CreateChatRequest{Toolsets: []string{"invoices"}})
	res, err := d.Client.Send(context.Background(), c.ID, api.SendMessageRequest{Content: "total of A1?"}, nil)
	if err != nil || res.Status != "completed" {
		t.Fatalf("turn: %v %+v", err, res)
	}
	for _, m := range res.Messages {
		if m.Role != api.RoleTool {
			continue
		}
		if bad := m.ToolCallID != "ok"; m.IsError != bad || bad && !strings.Contains(m.Content, "Invalid arguments for inv_total") {
			t.Errorf("call %s: %+v", m.ToolCallID, m)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(sent, []string{`{"id":"A1"}`}) {
		t.Fatalf("the webhook was sent %q, want only the matching arguments", sent)
	}
}

// TestAnMCPServerBeingConnectedHoldsUpNoOtherToolsetWrite: while a
// toolset's MCP server takes its time to answer agentd's first request, the
// same tenant's other toolsets are put and deleted; the slow one is put
// once its server answers, and counts once.
func TestAnMCPServerBeingConnectedHoldsUpNoOtherToolsetWrite(t *testing.T) {
	handler := pingServer()
	reached, release := make(chan struct{}), make(chan struct{})
	var first, released sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first.Do(func() {
			close(reached)
			<-release
		})
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close) // after the daemon's close, which ends its MCP session
	letGo := func() { released.Do(func() { close(release) }) }
	t.Cleanup(letGo) // before Close, which waits for the held request
	fake := newFake(t, echoScript)
	cfg := baseConfig(t, fake.URL())
	cfg.Toolsets.WebhooksAllowPrivate = true
	d := daemontest.Start(t, cfg, nil)
	slow := make(chan int, 1)
	var put api.Toolset
	go func() {
		slow <- askJSON(t, d, "", "PUT", "/v1/toolsets/slow", api.PutToolsetRequest{Executor: api.Executor{Kind: "mcp", URL: srv.URL}}, &put)
	}()
	<-reached
	client := api.PutToolsetRequest{Executor: api.Executor{Kind: "client"}, Tools: crmTools}
	var e api.Error
	if st := askJSON(t, d, "", "PUT", "/v1/toolsets/files", client, &e); st != 200 {
		t.Fatalf("PUT of another toolset while the MCP server is being connected: %d %+v", st, e)
	}
	if st := askJSON(t, d, "", "DELETE", "/v1/toolsets/files", nil, nil); st != http.StatusNoContent {
		t.Fatalf("DELETE of another toolset meanwhile: %d", st)
	}
	letGo()
	if st := <-slow; st != 200 || len(put.Tools) != 1 || put.Version != 1 {
		t.Fatalf("the slow MCP toolset's PUT: %d %+v, want version 1 with its server's tool", st, put)
	}
	var list struct{ Toolsets []api.Toolset }
	if askJSON(t, d, "", "GET", "/v1/toolsets", nil, &list); len(list.Toolsets) != 1 || list.Toolsets[0].Name != "slow" {
		t.Fatalf("toolsets %+v, want the slow one alone", list.Toolsets)
	}
}

// pingServer is an MCP server of one tool, ping, over streamable HTTP.
func pingServer() http.Handler {
	server := mcp.NewServer(&mcp.Implementation{Name: "ping", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ping", Description: "Answers pong"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
}

// TestAToolsetPastTheTenantsLimitsConnectsNoServer: a tenant at
// toolsets.max_per_tenant, or with no room left under
// toolsets.max_tools_per_tenant, is refused an MCP toolset of a new name
// (429 limit) before agentd sends its server a single request.
func TestAToolsetPastTheTenantsLimitsConnectsNoServer(t *testing.T) {
	tests := map[string]func(*configs.Config){
		"toolsets.max_per_tenant":       func(cfg *configs.Config) { cfg.Toolsets.MaxPerTenant = 1 },
		"toolsets.max_tools_per_tenant": func(cfg *configs.Config) { cfg.Toolsets.MaxToolsPerTenant = len(crmTools) },
	}
	for limit, tune := range tests {
		t.Run(limit, func(t *testing.T) {
			var hits atomic.Int32
			handler := pingServer()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				handler.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			cfg := baseConfig(t, newFake(t, echoScript).URL())
			cfg.Toolsets.WebhooksAllowPrivate = true
			tune(&cfg)
			d := daemontest.Start(t, cfg, nil)
			if st := askJSON(t, d, "", "PUT", "/v1/toolsets/files", api.PutToolsetRequest{Executor: api.Executor{Kind: "client"}, Tools: crmTools}, nil); st != 200 {
				t.Fatalf("PUT of the client toolset: %d", st)
			}
			for i := range 5 {
				var e api.Error
				if st := askJSON(t, d, "", "PUT", fmt.Sprintf("/v1/toolsets/new%d", i), api.PutToolsetRequest{Executor: api.Executor{Kind: "mcp", URL: srv.URL}}, &e); st != 429 || e.Kind != "limit" || !strings.Contains(e.Message, limit) {
					t.Fatalf("PUT of MCP toolset new%d past %s: %d %+v; want 429 limit naming it", i, limit, st, e)
				}
			}
			if n := hits.Load(); n != 0 {
				t.Fatalf("refused PUTs sent the MCP server %d requests, want none", n)
			}
		})
	}
}

// TestATenantConnectsOnlyAFewMCPServersAtOnce: while a tenant's MCP
// servers are being connected, up to a few at once, its next MCP toolset
// is refused at once (429 busy) without reaching a server; the others are
// put once their servers answer.
func TestATenantConnectsOnlyAFewMCPServersAtOnce(t *testing.T) {
	handler := pingServer()
	reached, release := make(chan struct{}, 100), make(chan struct{})
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 100 {
			reached <- struct{}{}
		}
		<-release
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close) // after the daemon's close, which ends its MCP sessions
	var released sync.Once
	letGo := func() { released.Do(func() { close(release) }) }
	defer letGo() // before the daemon's close, which waits for the held PUTs
	cfg := baseConfig(t, newFake(t, echoScript).URL())
	cfg.Toolsets.WebhooksAllowPrivate = true
	d := daemontest.Start(t, cfg, nil)
	type answer struct {
		status int
		err    api.Error
	}
	answers := make(chan answer, 100)
	put := func(i int) {
		var a answer
		a.status = askJSON(t, d, "", "PUT", fmt.Sprintf("/v1/toolsets/mcp%d", i), api.PutToolsetRequest{Executor: api.Executor{Kind: "mcp", URL: srv.URL}}, &a.err)
		answers <- a
	}
	connecting := 0
	for refused := false; !refused; {
		if connecting == 20 {
			t.Fatalf("%d MCP servers being connected at once for one tenant, and its next PUT still not refused", connecting)
		}
		go put(connecting)
		select {
		case <-reached:
			connecting++
		case a := <-answers:
			if a.status != 429 || a.err.Kind != "busy" || !strings.Contains(a.err.Message, "MCP servers being connected") {
				t.Fatalf("a PUT while %d MCP servers are being connected: %d %+v; want 429 busy", connecting, a.status, a.err)
			}
			refused = true
		}
	}
	if connecting == 0 || hits.Load() != int32(connecting) {
		t.Fatalf("%d servers reached by %d PUTs being connected; the refused one must reach none", hits.Load(), connecting)
	}
	letGo()
	for range connecting {
		if a := <-answers; a.status != 200 {
			t.Fatalf("a PUT whose server answered: %d %+v", a.status, a.err)
		}
	}
}

// TestAnMCPToolsetPastTheBodyLimitIsRefused: an MCP server that lists its
// tools one a page, 60 tools of 1 MiB descriptions, is refused (400 naming
// limits.max_body_bytes, what a client toolset's tools may take) and
// nothing is registered.
func TestAnMCPToolsetPastTheBodyLimitIsRefused(t *testing.T) {
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return testkit.WideMCPServer(60, 1<<20) }, nil)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	cfg := baseConfig(t, newFake(t, echoScript).URL())
	cfg.Toolsets.WebhooksAllowPrivate = true
	d := daemontest.Start(t, cfg, nil)
	var e api.Error
	if st := askJSON(t, d, "", "PUT", "/v1/toolsets/wide", api.PutToolsetRequest{Executor: api.Executor{Kind: "mcp", URL: srv.URL}}, &e); st != 400 || !strings.Contains(e.Message, "limits.max_body_bytes") {
		t.Fatalf("PUT of an MCP toolset of 60 MiB of tools: %d %+v; want 400 naming limits.max_body_bytes", st, e)
	}
	if st := askJSON(t, d, "", "GET", "/v1/toolsets/wide", nil, nil); st != 404 {
		t.Fatalf("the refused toolset: %d, want 404", st)
	}
	var list struct{ Toolsets []api.Toolset }
	if askJSON(t, d, "", "GET", "/v1/toolsets", nil, &list); len(list.Toolsets) != 0 {
		t.Fatalf("toolsets %d, want none", len(list.Toolsets))
	}
	if _, err := d.Client.CreateChat(context.Background(), api.CreateChatRequest{Toolsets: []string{"wide"}}); status(err) != 404 {
		t.Fatalf("a chat naming the refused toolset: %v; want 404, it is registered nowhere", err)
	}
}

// A call to an application's tool that its schema does not take (as small
// local models send) goes back to the model as an error result naming the
// field, and the turn goes on: the application is not asked, and the
// model's corrected call pauses the turn as any call does.
func TestAClientToolCallItsSchemaRefusesGoesBackToTheModel(t *testing.T) {
	var mu sync.Mutex
	var told []chat.Message // the results of the refused calls, as the model read them
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		if requestKind(r) != kindTurn {
			return testkit.Reply{Text: "[]"}
		}
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role != chat.RoleTool:
			return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "bad_type", Name: "crm_find", Arguments: `{"name":5}`},
				{ID: "bad_json", Name: "crm_find", Arguments: `{"name":"Ada"`}, {ID: "bad_field", Name: "crm_find", Arguments: `{"nom":"Ada"}`}}}
		case last.ToolCallID == "good":
			return testkit.Reply{Text: "The CRM says: " + last.Content}
		}
		mu.Lock()
		told = append(told, r.Messages[len(r.Messages)-3:]...)
		mu.Unlock()
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "good", Name: "crm_find", Arguments: `{"name":"Ada"}`}}}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	if st := askJSON(t, d, "", "PUT", "/v1/toolsets/crm", api.PutToolsetRequest{Tools: crmTools, Executor: api.Executor{Kind: "client"}}, nil); st != 200 {
		t.Fatalf("PUT: %d", st)
	}
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{Toolsets: []string{"crm"}})
	if err != nil {
		t.Fatal(err)
	}
	var asked [][]api.ToolCall
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "How is Ada doing?"}, func(ev api.Event) {
		if ev.Type == api.EventTurnRequiresAction {
			var r api.TurnResult
			_ = json.Unmarshal(ev.Data, &r)
			asked = append(asked, r.ToolCalls)
		}
	})
	if err != nil || res.Status != "requires_action" || len(res.ToolCalls) != 1 || res.ToolCalls[0].ID != "good" || len(asked) != 1 {
		t.Fatalf("the application was asked %v: %v %+v", asked, err, res)
	}
	want := map[string]string{
		"bad_type":  `Invalid arguments for crm_find: "name" must be a string, not an integer.`,
		"bad_json":  "The arguments for crm_find are not valid JSON.",
		"bad_field": `Invalid arguments for crm_find: "name" is required.`,
	}
	mu.Lock()
	if len(told) != len(want) {
		t.Fatalf("the model's next request carried %+v", told)
	}
	for _, m := range told {
		if m.Role != chat.RoleTool || !strings.HasPrefix(m.Content, want[m.ToolCallID]) {
			t.Errorf("the model read for %s: %q, want %q", m.ToolCallID, m.Content, want[m.ToolCallID])
		}
	}
	mu.Unlock()
	done, err := d.Client.SendToolResults(ctx, c.ID, api.ToolResultsRequest{Results: []api.ToolResult{{CallID: "good", Output: "3 orders"}}}, nil)
	if err != nil || done.Status != "completed" || done.Messages[len(done.Messages)-1].Content != "The CRM says: 3 orders" {
		t.Fatalf("resumed: %v %+v", err, done)
	}
}

// A schema is checked as it is declared: one a call could never be
// checked against in bounds is refused (400, naming why), and the
// ordinary JSON Schema the SDKs write is accepted, on every way a tool is
// declared.
func TestAToolsSchemaIsCompiledWhenDeclared(t *testing.T) {
	const secretEnv = "AGENTD_TEST_WEBHOOK_SECRET"
	t.Setenv(secretEnv, "a-long-shared-secret")
	fake := openaifake.New(openaifake.Options{Script: crmScript})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Toolsets.AllowedEnv = []string{secretEnv}
	cfg.Toolsets.WebhooksAllowPrivate = true
	d := daemontest.Start(t, cfg, nil)
	declare := map[string]func(params json.RawMessage) (int, api.Error){
		"client toolset": func(params json.RawMessage) (st int, e api.Error) {
			st = askJSON(t, d, "", "PUT", "/v1/toolsets/c", api.PutToolsetRequest{Tools: []api.Tool{{Name: "t1", Parameters: params}}, Executor: api.Executor{Kind: "client"}}, &e)
			return st, e
		},
		"webhook toolset": func(params json.RawMessage) (st int, e api.Error) {
			st = askJSON(t, d, "", "PUT", "/v1/toolsets/w", api.PutToolsetRequest{Tools: []api.Tool{{Name: "t2", Parameters: params}},
				Executor: api.Executor{Kind: "webhook", URL: "http://127.0.0.1:9/hook", SecretEnv: secretEnv}}, &e)
			return st, e
		},
		"chat's own tool": func(params json.RawMessage) (st int, e api.Error) {
			st = askJSON(t, d, "", "POST", "/v1/chats", api.CreateChatRequest{Tools: []api.Tool{{Name: "t3", Parameters: params}}}, &e)
			return st, e
		},
	}
	accepted := []string{
		`{"type":"object","properties":{"name":{"type":"string"},"note":{"type":["string","null"]}},"required":["name","note"],"additionalProperties":false}`,
		`{"type":"object","$defs":{"A":{"type":"object","properties":{"zip":{"type":"number"}}}},"properties":{"home":{"$ref":"#/$defs/A"}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"Id":{"type":"string"}},"properties":{"id":{"$ref":"#/definitions/Id"}}}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{}}`,
		`{"type":"object","properties":{"label":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}}}`,
	}
	for how, put := range declare {
		for _, params := range accepted {
			if st, e := put(json.RawMessage(params)); st != 200 && st != 201 {
				t.Errorf("%s refused %s: %d %s", how, params, st, e.Message)
			}
		}
		if st, e := put(json.RawMessage(`{"type":"object","allOf":[{"$ref":"#"}]}`)); st != 400 || !strings.Contains(e.Message, "refers back to itself for the same value") {
			t.Errorf("%s took a schema that never ends: %d %q", how, st, e.Message)
		}
	}
}
