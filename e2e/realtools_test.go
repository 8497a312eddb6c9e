package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/api"
)

// toolKit is an MCP server (streamable HTTP, in the test process) with 150
// tools, which records the calls it runs.
type toolKit struct {
	URL   string
	mu    sync.Mutex
	calls []string
}

const kitTools = 150

// maxLoaded is how many loaded tools a lean chat keeps (session's maxLoadedTools).
const maxLoaded = 10

func newToolKit(t *testing.T) *toolKit {
	t.Helper()
	k := &toolKit{}
	s := mcp.NewServer(&mcp.Implementation{Name: "kit", Version: "1"}, nil)
	type in struct {
		City string `json:"city,omitempty" jsonschema:"the city"`
	}
	for i := range kitTools {
		name := fmt.Sprintf("tool_%03d", i)
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: fmt.Sprintf("Report reading number %d for a city", i)},
			func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
				k.record(name)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " reads 42 for " + a.City}}}, nil, nil
			})
	}
	k.serve(t, s)
	return k
}

// serve runs s over streamable HTTP for the test's life.
func (k *toolKit) serve(t *testing.T, s *mcp.Server) {
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	k.URL = srv.URL
}

func (k *toolKit) record(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, name)
}

func (k *toolKit) ran(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Contains(k.calls, name)
}

func (k *toolKit) yaml() string {
	return "mcp_servers:\n  - name: kit\n    url: " + k.URL + "\n"
}

// requestTools names the tools a chat request offered (OpenAI and Ollama
// shapes alike: tools[].function.name).
func requestTools(t *testing.T, body []byte) []string {
	t.Helper()
	var req struct {
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("request body: %v", err)
	}
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Function.Name)
	}
	return names
}

// loopDone checks a tool turn's shape: every call has a result with its id
// right after it, and the turn ends answered.
func loopDone(t *testing.T, rt realTurn) {
	t.Helper()
	answered(t, "tool turn", rt)
	if len(rt.calls) == 0 {
		t.Fatalf("no tool call in the turn: %+v", rt.res.Messages)
	}
	for _, c := range rt.calls {
		if !json.Valid([]byte(c.Arguments)) {
			t.Errorf("call %s has arguments that are not JSON: %q", c.Name, c.Arguments)
		}
		found := false
		for _, r := range rt.results {
			found = found || r.ToolCallID == c.ID
		}
		if !found {
			t.Errorf("call %s (%s) got no result", c.ID, c.Name)
		}
	}
}

// TestRealLeanToolLoop: on a 2K llama-server with 150 tools the chat is
// lean: a request offers find_tools and the tool the person names, never
// the 150; the model's call runs, its result goes back, and the model
// answers. A call to the named tool completes by its name.
//
// Which offered tool the tiny model picks is sampling, and one daemon's
// prompts can make it pick find_tools in every chat (it did, 12 chats in
// a row, once in six runs). So the tap, past the point where the daemon's
// request is recorded and checked, narrows the first request of the turn
// to the named tool with tool_choice "required": llama-server's grammar
// then makes the call, natively, and the daemon's side — what it offered,
// running the call by name, the loop — is what the test checks.
func TestRealLeanToolLoop(t *testing.T) {
	url := realURL(t, envLlama)
	tp := newTap(t, url)
	kit := newToolKit(t)
	ref := "llama/" + realModel
	d := startReal(t, daemonConfig{Providers: realYAML(ref, llamaProvider("llama", tp.URL)), Extra: kit.yaml()})
	d.waitModel(t, ref)
	const named = "kit__tool_042"
	tp.setRewrite(func(kind string, body []byte) []byte {
		if kind != "turn" {
			return body
		}
		return onlyTool(t, body, named)
	})
	before := tp.count()
	id := d.newChat(t, ref)
	rt := d.send(t, id, "Please use "+named+" to get the reading for Paris.")
	loopDone(t, rt)
	// The first request offers find_tools and the named tool; once
	// find_tools has run, the tools it loaded are offered too — never one
	// of the 150 it was not offered.
	first := true
	for _, c := range tp.since(before) {
		if c.Kind != "turn" {
			continue
		}
		names := requestTools(t, c.Request)
		if !slices.Contains(names, "find_tools") || len(names) > 1+maxLoaded {
			t.Fatalf("a lean request offered %v, want find_tools and at most %d loaded tools", names, maxLoaded)
		}
		if first && (!slices.Contains(names, named) || len(names) > 4) {
			t.Fatalf("the first lean request offered %v, want find_tools and the named tools only", names)
		}
		first = false
	}
	byName := false
	for _, c := range rt.calls {
		byName = byName || c.Name == named
	}
	if !byName {
		t.Fatalf("the model was made to call %s and the turn holds %+v", named, rt.calls)
	}
	if !kit.ran("tool_042") {
		t.Fatal("the call by name never reached the MCP server")
	}
}

// onlyTool narrows a chat request that offers tool (and holds no tool
// result yet) to that one tool with tool_choice "required"; any other
// request passes unchanged.
func onlyTool(t *testing.T, body []byte, tool string) []byte {
	var req map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil {
		return body
	}
	var msgs []struct {
		Role string `json:"role"`
	}
	_ = json.Unmarshal(req["messages"], &msgs)
	for _, m := range msgs {
		if m.Role == "tool" {
			return body
		}
	}
	var tools []json.RawMessage
	_ = json.Unmarshal(req["tools"], &tools)
	for _, raw := range tools {
		var tl struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &tl) == nil && tl.Function.Name == tool {
			req["tools"], _ = json.Marshal([]json.RawMessage{raw})
			req["tool_choice"] = json.RawMessage(`"required"`)
			out, err := json.Marshal(req)
			if err != nil {
				t.Errorf("re-encode the narrowed request: %v", err)
				return body
			}
			return out
		}
	}
	return body
}

// TestRealToolsInWords: a model configured to call tools in words gets no
// native tools; the tiny model, seeing tools mentioned, writes its call as
// <tool_call>{…}</tool_call> text; agentd reads it, runs it (get_weather is
// no tool of this daemon: a clear error result), sends the result back in
// words, and the model answers. On llama-server and on Ollama.
func TestRealToolsInWords(t *testing.T) {
	for _, tg := range []struct{ name, env, kind string }{{"llama-server", envLlama, "openai"}, {"ollama", envOllama, "ollama"}} {
		t.Run(tg.name, func(t *testing.T) {
			url := realURL(t, tg.env)
			tp := newTap(t, url)
			words := realModelCfg{ID: realModel, Window: 2048, Tools: "words"}
			prov := llamaProvider("real", tp.URL, words)
			if tg.kind == "ollama" {
				prov = ollamaProvider("real", tp.URL, words)
			}
			ref := "real/" + realModel
			d := startReal(t, daemonConfig{Providers: realYAML(ref, prov)})
			d.waitModel(t, ref)
			id := d.newChat(t, ref)
			// "tools" as a word of its own is what the tiny model reacts to.
			rt := d.send(t, id, "tools: what is the weather in Paris?")
			loopDone(t, rt)
			if rt.calls[0].Name != "get_weather" {
				t.Errorf("the words call is %+v, want the tiny model's get_weather", rt.calls[0])
			}
			if !rt.results[0].IsError {
				t.Errorf("a call to a tool this daemon lacks must come back as an error result: %+v", rt.results[0])
			}
			for _, c := range tp.since(0) {
				if c.Kind == "turn" && len(requestTools(t, c.Request)) > 0 {
					t.Errorf("a words model was offered native tools: %v", requestTools(t, c.Request))
				}
			}
			var last api.Message
			for _, m := range rt.res.Messages {
				last = m
			}
			if last.Role != api.RoleAssistant || len(last.ToolCalls) > 0 {
				t.Errorf("the turn does not end with an answer: %+v", last)
			}
		})
	}
}

// TestRealOllamaLeanToolByName: Ollama has no grammar, so the tiny model
// writes a call to get_weather whatever it is offered, and Ollama passes on
// only a call to an offered tool. With 150 tools on a 2K window the chat is
// lean; the person names get_weather (an MCP tool kept under its own name
// by bare_names), agentd loads it beside find_tools, and the call completes
// natively: call, result from the MCP server, answer.
func TestRealOllamaLeanToolByName(t *testing.T) {
	url := realURL(t, envOllama)
	tp := newTap(t, url)
	kit := newToolKit(t)
	wx := newWeatherServer(t)
	ref := "ollama/" + realModel
	d := startReal(t, daemonConfig{
		Providers: realYAML(ref, ollamaProvider("ollama", tp.URL, realModelCfg{ID: realModel, Window: 2048})),
		Extra:     kit.yaml() + "  - name: wx\n    url: " + wx.URL + "\n    bare_names: true\n",
	})
	d.waitModel(t, ref)
	id := d.newChat(t, ref)
	rt := d.send(t, id, "Use get_weather: is it raining in Paris?")
	loopDone(t, rt)
	if rt.calls[0].Name != "get_weather" || rt.results[0].IsError {
		t.Fatalf("call %+v, result %+v: want get_weather run", rt.calls[0], rt.results[0])
	}
	if !wx.ran("get_weather") {
		t.Fatal("the call never reached the MCP server")
	}
	for _, c := range tp.since(0) {
		if c.Kind != "turn" {
			continue
		}
		if offered := requestTools(t, c.Request); !slices.Contains(offered, "find_tools") || len(offered) > 4 {
			t.Errorf("a lean request offered %v, want find_tools and the named tools only", offered)
		}
	}
}

// newWeatherServer is an MCP server with the one tool the tiny model calls
// without a grammar.
func newWeatherServer(t *testing.T) *toolKit {
	t.Helper()
	k := &toolKit{}
	s := mcp.NewServer(&mcp.Implementation{Name: "wx", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "get_weather", Description: "Get the weather for a city"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			k.record("get_weather")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "18C, light rain"}}}, nil, nil
		})
	k.serve(t, s)
	return k
}

// TestRealCappedToolCall: a lean chat whose settings.max_output_tokens stops
// the model in the middle of a tool call (llama-server streams the call's
// first characters, then finish_reason "length"). The turn ends as it was
// cut — the client asked for no more — and runs no half-written call; the
// chat's next turn, with the cap lifted, is sent and answered: llama-server
// answered it with a 500, its chat template parsing the stored arguments.
// Caps of a few sizes stop the call at different points; at least one of
// them must cut a call, or the test proved nothing.
func TestRealCappedToolCall(t *testing.T) {
	url := realURL(t, envLlama)
	kit := newToolKit(t)
	ref := "llama/" + realModel
	d := startReal(t, daemonConfig{Providers: realYAML(ref, llamaProvider("llama", url)), Extra: kit.yaml()})
	d.waitModel(t, ref)
	cut := 0
	for _, capped := range []int{14, 16, 18, 20, 22} {
		t.Run(fmt.Sprint(capped), func(t *testing.T) {
			ctx, cancel := withTimeout(realSendTimeout)
			defer cancel()
			c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{Model: ref, Settings: &api.Settings{MaxOutputTokens: &capped}})
			if err != nil {
				t.Fatalf("create chat: %v", err)
			}
			rt := d.send(t, c.ID, "Please use find_tools to look for a weather tool.")
			if rt.res.Problem != nil {
				t.Fatalf("the capped turn failed: %+v", *rt.res.Problem)
			}
			for _, call := range rt.calls {
				if !json.Valid([]byte(call.Arguments)) {
					t.Errorf("a half-written call ran: %s(%q)", call.Name, call.Arguments)
				}
			}
			for _, m := range rt.res.Messages {
				for _, call := range m.ToolCalls {
					if !json.Valid([]byte(call.Arguments)) {
						cut++
						if !m.MaxOutputReached || !rt.res.MaxOutputReached {
							t.Errorf("the turn of a call cut at the cap is not marked max_output_reached: %+v", rt.res)
						}
					}
				}
			}
			if _, err := d.Client.PatchChat(ctx, c.ID, api.PatchChatRequest{Settings: &api.Settings{}}); err != nil {
				t.Fatalf("lift the cap: %v", err)
			}
			next := d.send(t, c.ID, "Say something.")
			if next.res.Problem != nil {
				t.Fatalf("the turn after the cut call failed: %+v", *next.res.Problem)
			}
			answered(t, "the turn after the cut call", next)
		})
	}
	if cut == 0 {
		t.Fatal("no cap cut a call in its arguments: the test proved nothing")
	}
}
