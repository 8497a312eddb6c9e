package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
)

// stdioServerEnv makes the test binary act as an MCP server on stdio, so
// the stdio path is tested with a real child process and no other binary.
const stdioServerEnv = "AGENTD_TOOLS_TEST_MCP_STDIO"

func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) == "1" {
		if err := newTestMCPServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to say back"`
}

// newTestMCPServer serves a few tools that cover each kind of content.
func newTestMCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "testserver", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Say the text back"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("the widget is jammed")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "picture", Description: "Returns an image and a caption"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a red dot"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte{1, 2, 3}},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "greeting.env", Description: "Reads the greeting from the environment"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: os.Getenv("AGENTD_TEST_GREETING")}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Answers with that many bytes"},
		func(_ context.Context, _ *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("b", in.Bytes)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "Says the server's process id"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil, nil
		})
	return s
}

type bigIn struct {
	Bytes int `json:"bytes"`
}

// wantTestTools are the registry names of newTestMCPServer's tools for a
// server named prefix; the dot of "greeting.env" is not allowed in a
// provider tool name and becomes '_'.
func wantTestTools(prefix string) []string {
	return []string{prefix + "__big", prefix + "__echo", prefix + "__fail", prefix + "__greeting_env", prefix + "__picture", prefix + "__pid"}
}

// testLogger returns a logger and what it wrote; the buffer is locked
// because servers connect in parallel and a child's stderr is copied from
// its own goroutine.
func testLogger(t *testing.T) (zerolog.Logger, *testkit.LogBuffer) {
	t.Helper()
	buf := &testkit.LogBuffer{}
	return zerolog.New(buf), buf
}

// checkMCPTools runs the server's tools through the registry and checks
// each answer.
func checkMCPTools(t *testing.T, r *Registry, prefix, greeting string, trusted bool) {
	t.Helper()
	for _, name := range wantTestTools(prefix) {
		tl, ok := r.Get(name)
		if !ok {
			t.Fatalf("tool %s not registered; have %v", name, r.Specs())
		}
		if tl.Source != "mcp:"+prefix {
			t.Errorf("%s source = %q", name, tl.Source)
		}
	}
	echo, _ := r.Get(prefix + "__echo")
	var schema struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(echo.Parameters, &schema); err != nil || schema.Properties["text"].Description != "the text to say back" {
		t.Errorf("echo schema not carried over: %s (%v)", echo.Parameters, err)
	}
	if echo.Description != "Say the text back" {
		t.Errorf("echo description = %q", echo.Description)
	}

	tests := []struct {
		name       string
		tool, args string
		want       string
		wantError  bool
		wantImages int
		// ours: agentd's own answer, not the server's, so not untrusted.
		ours bool
	}{
		{name: "text result", tool: "echo", args: `{"text":"hi"}`, want: "echo: hi"},
		{name: "tool error is model-visible", tool: "fail", args: `{}`, want: "the widget is jammed", wantError: true},
		{name: "bad arguments refused by their schema", tool: "echo", args: `{"text":5}`, want: `"text" must be a string, not an integer`, wantError: true, ours: true},
		{name: "image passed on", tool: "picture", args: `{}`, want: "a red dot", wantImages: 1},
		{name: "sanitised name calls the original", tool: "greeting_env", args: `{}`, want: greeting},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res := r.Run(ctx, chat.ToolCall{Name: prefix + "__" + tc.tool, Arguments: tc.args}, Limits{Timeout: 5 * time.Second})
			if res.IsError != tc.wantError {
				t.Errorf("IsError = %v, want %v: %q", res.IsError, tc.wantError, res.Text)
			}
			if !strings.Contains(res.Text, tc.want) {
				t.Errorf("text %q does not contain %q", res.Text, tc.want)
			}
			if len(res.Images) != tc.wantImages {
				t.Errorf("%d images, want %d", len(res.Images), tc.wantImages)
			}
			if res.Untrusted == (trusted || tc.ours) {
				t.Errorf("Untrusted = %v for a server with Trusted = %v", res.Untrusted, trusted)
			}
		})
	}
}

// connectInMemory connects s, under name, to a new registry through the
// MCP SDK's in-memory transports; it returns the registry, the log of its
// connection, and what closes the connection (also closed when t ends).
func connectInMemory(t *testing.T, s *mcp.Server, name string) (*Registry, *testkit.LogBuffer, func() error) {
	t.Helper()
	ctx := context.Background()
	clientT, serverT := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, serverT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	r := NewRegistry()
	log, buf := testLogger(t)
	closeAll := connectMCPTargets(ctx, []mcpTarget{{server: MCPServer{Name: name}, transport: func() (mcp.Transport, error) { return clientT, nil }}}, r, log)
	t.Cleanup(func() { _ = closeAll() })
	return r, buf, closeAll
}

func TestMCPInMemory(t *testing.T) {
	r, _, closeAll := connectInMemory(t, newTestMCPServer(), "mem")
	checkMCPTools(t, r, "mem", "", false)

	if err := closeAll(); err != nil {
		t.Errorf("close: %v", err)
	}
	if n := r.Len(); n != 0 {
		t.Errorf("%d tools left after close, want 0", n)
	}
}

func TestMCPStreamableHTTP(t *testing.T) {
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newTestMCPServer() }, nil)
	// The server insists on the configured header, as a hosted MCP server
	// insists on its token.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "unauthorised", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)

	t.Setenv("AGENTD_TEST_MCP_TOKEN", "s3cret")
	r := NewRegistry()
	log, buf := testLogger(t)
	closeAll, err := ConnectMCP(context.Background(), []MCPServer{
		{Name: "web", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer ${AGENTD_TEST_MCP_TOKEN}"}, Trusted: true},
		// A header naming a variable that is not set: refused before connecting.
		{Name: "unset", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer ${AGENTD_TEST_MCP_UNSET}"}},
		// Same server without the header: refused, so skipped.
		{Name: "nokey", URL: srv.URL},
	}, r, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeAll() })

	checkMCPTools(t, r, "web", "", true)
	for _, tl := range r.List() {
		if strings.HasPrefix(tl.Name, "nokey__") {
			t.Errorf("tool %s registered from a server that refused us", tl.Name)
		}
	}
	if !strings.Contains(buf.String(), `"mcp_server":"nokey"`) || !strings.Contains(buf.String(), "skipped") {
		t.Errorf("the failing server was not logged as skipped: %s", buf.String())
	}
	if !strings.Contains(buf.String(), "AGENTD_TEST_MCP_UNSET") {
		t.Errorf("the unset header variable was not named: %s", buf.String())
	}
}

func TestMCPStdio(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip("no test executable path:", err)
	}
	r := NewRegistry()
	log, buf := testLogger(t)
	closeAll, err := ConnectMCP(context.Background(), []MCPServer{
		{Name: "local", Command: []string{exe}, Env: map[string]string{stdioServerEnv: "1", "AGENTD_TEST_GREETING": "hello from env"}},
		{Name: "ghost", Command: []string{"/nonexistent/agentd-mcp-server"}},
	}, r, log)
	if err != nil {
		t.Fatal(err)
	}
	checkMCPTools(t, r, "local", "hello from env", false)
	if _, ok := r.Get("ghost__echo"); ok {
		t.Error("a server that never started has tools")
	}
	if !strings.Contains(buf.String(), `"mcp_server":"ghost"`) {
		t.Errorf("the missing command was not logged: %s", buf.String())
	}
	if err := closeAll(); err != nil {
		t.Errorf("close: %v", err)
	}
	// After close the tools are gone and a stale call is an error result.
	if res := r.Run(context.Background(), chat.ToolCall{Name: "local__echo", Arguments: `{"text":"x"}`}, Limits{}); !res.IsError {
		t.Errorf("call after close = %+v, want an error result", res)
	}
}

func TestConnectMCPConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		servers []MCPServer
	}{
		{"no name", []MCPServer{{URL: "http://127.0.0.1:1"}}},
		{"bad name", []MCPServer{{Name: "a b", URL: "http://127.0.0.1:1"}}},
		{"both transports", []MCPServer{{Name: "x", URL: "http://127.0.0.1:1", Command: []string{"x"}}}},
		{"no transport", []MCPServer{{Name: "x"}}},
		{"empty command", []MCPServer{{Name: "x", Command: []string{""}}}},
		{"repeated name", []MCPServer{{Name: "x", URL: "http://127.0.0.1:1"}, {Name: "x", URL: "http://127.0.0.1:2"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry()
			log, _ := testLogger(t)
			closeAll, err := ConnectMCP(context.Background(), tc.servers, r, log)
			if err == nil {
				t.Error("want a configuration error")
			}
			if closeAll == nil || closeAll() != nil {
				t.Error("close must be callable and harmless after a configuration error")
			}
		})
	}
}

func TestMCPToolName(t *testing.T) {
	tests := []struct {
		server, tool string
		bare         bool
		want         string
	}{
		{"docs", "search", false, "docs__search"},
		{"docs", "files.read", false, "docs__files_read"},
		// Each rune outside [A-Za-z0-9_-] becomes one '_'.
		{"docs", "ünïcode tool", false, "docs___n_code_tool"},
		{"srv", strings.Repeat("t", 100), false, "srv__" + strings.Repeat("t", 64-len("srv__"))},
		// bare_names: the tool's own name, as a model was trained to call it.
		{"wx", "get_weather", true, "get_weather"},
		{"wx", "files.read", true, "files_read"},
		{"wx", strings.Repeat("t", 100), true, strings.Repeat("t", 64)},
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			got := mcpToolName(tc.server, tc.tool, tc.bare)
			if got != tc.want {
				t.Errorf("mcpToolName(%q, %q) = %q, want %q", tc.server, tc.tool, got, tc.want)
			}
			if !ValidName(got) {
				t.Errorf("%q is not a valid tool name", got)
			}
		})
	}
}

// An application's server is held to a toolset's bound on tools: one that
// lists more is refused, not registered (its pages could go on for the
// whole connect timeout).
func TestAnMCPToolsetListingMoreThanMaxToolsIsRefused(t *testing.T) {
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newTestMCPServer() }, nil))
	t.Cleanup(srv.Close)
	log, _ := testLogger(t)
	n := len(wantTestTools("x"))
	if _, _, err := ConnectMCPToolset(context.Background(), MCPServer{Name: "x", URL: srv.URL, MaxTools: n - 1}, true, log); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d tools", n-1)) {
		t.Fatalf("a server over MaxTools: %v", err)
	}
	got, closeFn, err := ConnectMCPToolset(context.Background(), MCPServer{Name: "x", URL: srv.URL, MaxTools: n}, true, log)
	if err != nil || len(got) != n {
		t.Fatalf("a server at MaxTools: %d tools, %v", len(got), err)
	}
	_ = closeFn()
}

// TestAnMCPServerIsFollowedOnlyWithinItsOrigin: a server that redirects
// within its own origin is reached; one that redirects to another origin
// is refused, and the configured header, a token, never reaches there.
func TestAnMCPServerIsFollowedOnlyWithinItsOrigin(t *testing.T) {
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newTestMCPServer() }, nil)
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		handler.ServeHTTP(w, req)
	}))
	t.Cleanup(elsewhere.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/moved":
			http.Redirect(w, req, "/mcp", http.StatusTemporaryRedirect)
		case "/away":
			http.Redirect(w, req, elsewhere.URL+"/mcp", http.StatusTemporaryRedirect)
		default:
			handler.ServeHTTP(w, req)
		}
	}))
	t.Cleanup(srv.Close)
	log, _ := testLogger(t)
	headers := map[string]string{"Authorization": "Bearer s3cret"}
	got, closeFn, err := ConnectMCPToolset(context.Background(), MCPServer{Name: "x", URL: srv.URL + "/moved", Headers: headers}, true, log)
	if err != nil || len(got) != len(wantTestTools("x")) {
		t.Fatalf("a redirect within the origin: %d tools, %v", len(got), err)
	}
	_ = closeFn()
	if _, _, err := ConnectMCPToolset(context.Background(), MCPServer{Name: "y", URL: srv.URL + "/away", Headers: headers}, true, log); err == nil || !strings.Contains(err.Error(), "another origin") {
		t.Fatalf("a redirect to another origin: %v", err)
	}
	if n := leaked.Load(); n != 0 {
		t.Fatalf("the token reached the other origin in %d requests", n)
	}
}

// TestAnMCPToolsetPastMaxToolBytesIsRefused: a server that lists its tools
// one a page, each page within the bound on one message, is refused once
// its tools take more than MaxToolBytes, and no page after is asked for.
func TestAnMCPToolsetPastMaxToolBytesIsRefused(t *testing.T) {
	const n, desc = 60, 1 << 20
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return testkit.WideMCPServer(n, desc) }, nil)
	var pages atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"tools/list"`) {
			pages.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	log, _ := testLogger(t)
	_, _, err := ConnectMCPToolset(context.Background(), MCPServer{Name: "x", URL: srv.URL, MaxToolBytes: 3 * desc}, true, log)
	if !errors.Is(err, ErrToolsTooLarge) || !strings.Contains(err.Error(), strconv.Itoa(3*desc)) {
		t.Fatalf("a server whose tools take %d bytes, past MaxToolBytes %d: %v; want ErrToolsTooLarge naming the bound", n*desc, 3*desc, err)
	}
	if got := pages.Load(); got > 3 {
		t.Fatalf("%d pages of tools asked for, want at most 3: the third tool is past the bound", got)
	}
}

// TestAnMCPCallItsInputSchemaRefusesNeverReachesTheServer: arguments an
// MCP tool's inputSchema does not take are answered with the error result
// an application's tool gets, naming the field, and the server is not
// called (its tool here checks nothing, as a server's own may not); a
// call the schema takes goes through.
func TestAnMCPCallItsInputSchemaRefusesNeverReachesTheServer(t *testing.T) {
	ctx := context.Background()
	s := mcp.NewServer(&mcp.Implementation{Name: "lax", Version: "1"}, nil)
	var calls atomic.Int32
	s.AddTool(&mcp.Tool{Name: "count", Description: "Counts", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"],"additionalProperties":false}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "got " + string(req.Params.Arguments)}}}, nil
		})
	r, _, _ := connectInMemory(t, s, "lax")

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, tc := range []struct{ args, want string }{
		{`{"n":"five"}`, `Invalid arguments for lax__count: "n" must be an integer, not a string`},
		{`{}`, `Invalid arguments for lax__count: "n" is required`},
		{`{"n":0}`, `"n" must be at least 1`},
		{`{"n":2,"m":1}`, `has no field "m"`},
	} {
		res := r.Run(ctx, chat.ToolCall{Name: "lax__count", Arguments: tc.args}, Limits{Timeout: 5 * time.Second})
		if !res.IsError || !strings.Contains(res.Text, tc.want) {
			t.Errorf("%s: %+v; want an error result saying %q", tc.args, res, tc.want)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the server got %d calls its schema refuses, want none", n)
	}
	res := r.Run(ctx, chat.ToolCall{Name: "lax__count", Arguments: `{"n":2}`}, Limits{Timeout: 5 * time.Second})
	if res.IsError || res.Text != `got {"n":2}` || calls.Load() != 1 {
		t.Fatalf("a call the schema takes: %+v, %d calls; want it answered by the server", res, calls.Load())
	}
}

// TestAnMCPToolWhoseSchemaCannotBeCheckedIsCalledUnchecked: a server's
// inputSchema agentd refuses to compile (one whose $ref leads back to
// itself for the same value) is logged, and its tool's calls go to the
// server as before there was a check, rather than the tool going.
func TestAnMCPToolWhoseSchemaCannotBeCheckedIsCalledUnchecked(t *testing.T) {
	ctx := context.Background()
	s := mcp.NewServer(&mcp.Implementation{Name: "loops", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "self", Description: "Refers to itself", InputSchema: json.RawMessage(`{"type":"object","$ref":"#"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "got " + string(req.Params.Arguments)}}}, nil
		})
	r, buf, _ := connectInMemory(t, s, "loops")
	if !strings.Contains(buf.String(), "input schema cannot be checked") {
		t.Errorf("log %q does not say the schema goes unchecked", buf.String())
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res := r.Run(ctx, chat.ToolCall{Name: "loops__self", Arguments: `{"a":1}`}, Limits{Timeout: 5 * time.Second})
	if res.IsError || res.Text != `got {"a":1}` {
		t.Fatalf("%+v; want the call answered by the server", res)
	}
}
