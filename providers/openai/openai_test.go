package openai

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
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
)

var _ providers.Client = (*Client)(nil)

// run streams one request against a fake and collects the events.
type result struct {
	resp   providers.Response
	err    error
	text   string
	think  string
	calls  []chat.ToolCall
	usages []chat.Usage
}

func run(t interface{ Helper() }, c *Client, ctx context.Context, req providers.Request) result {
	t.Helper()
	var r result
	var text, think strings.Builder
	r.resp, r.err = c.Stream(ctx, req, func(e providers.Event) {
		switch e.Kind {
		case providers.EventText:
			text.WriteString(e.Text)
		case providers.EventThinking:
			think.WriteString(e.Text)
		case providers.EventToolCall:
			r.calls = append(r.calls, *e.ToolCall)
		case providers.EventUsage:
			r.usages = append(r.usages, *e.Usage)
		}
	})
	r.text, r.think = text.String(), think.String()
	return r
}

func newClient(t testing.TB, company, base string) *Client {
	t.Helper()
	c, err := New(Config{Name: "test-" + company, Company: company, BaseURL: base, APIKey: "sk-test"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func userReq(text string) providers.Request {
	return providers.Request{Model: "gpt-test", System: "You are terse.", Messages: []chat.Message{{Role: chat.RoleUser, Content: text}}}
}

func TestStreamText(t *testing.T) {
	fake := openaifake.New(openaifake.Options{})
	defer fake.Close()
	c := newClient(t, "openai", fake.URL())

	r := run(t, c, context.Background(), userReq("hello there"))
	if r.err != nil {
		t.Fatalf("Stream: %v", r.err)
	}
	if r.text != openaifake.DefaultAnswer || r.resp.Message.Content != openaifake.DefaultAnswer {
		t.Errorf("text events %q, message %q; want %q", r.text, r.resp.Message.Content, openaifake.DefaultAnswer)
	}
	if r.resp.FinishReason != providers.FinishStop {
		t.Errorf("finish %q, want stop", r.resp.FinishReason)
	}
	got := fake.Requests()
	if len(got) != 1 {
		t.Fatalf("fake saw %d requests", len(got))
	}
	want := chat.Usage{InputTokens: got[0].InputTokens, OutputTokens: testkit.CountTokens(openaifake.DefaultAnswer)}
	if r.resp.Usage != want || len(r.usages) != 1 || r.usages[0] != want {
		t.Errorf("usage %+v, events %+v; want %+v once", r.resp.Usage, r.usages, want)
	}
	if got[0].System != "You are terse." || len(got[0].Messages) != 1 || got[0].Messages[0].Content != "hello there" {
		t.Errorf("fake received system %q messages %+v", got[0].System, got[0].Messages)
	}
	var body map[string]any
	if err := json.Unmarshal(got[0].Raw, &body); err != nil {
		t.Fatal(err)
	}
	if so, _ := body["stream_options"].(map[string]any); so["include_usage"] != true || body["stream"] != true {
		t.Errorf("stream %v stream_options %v; want stream with include_usage", body["stream"], body["stream_options"])
	}
}

func TestMaxTokensFieldByCompany(t *testing.T) {
	cases := []struct {
		company, field, absent string
	}{
		{"openai", "max_completion_tokens", "max_tokens"},
		{"groq", "max_tokens", "max_completion_tokens"},
		{"deepseek", "max_tokens", "max_completion_tokens"},
		{"vllm", "max_tokens", "max_completion_tokens"},
	}
	for _, tc := range cases {
		t.Run(tc.company, func(t *testing.T) {
			fake := openaifake.New(openaifake.Options{})
			defer fake.Close()
			req := userReq("hi")
			req.MaxTokens = 321
			if r := run(t, newClient(t, tc.company, fake.URL()), context.Background(), req); r.err != nil {
				t.Fatal(r.err)
			}
			var body map[string]any
			_ = json.Unmarshal(fake.Requests()[0].Raw, &body)
			if body[tc.field] != float64(321) {
				t.Errorf("%s = %v, want 321", tc.field, body[tc.field])
			}
			if _, ok := body[tc.absent]; ok {
				t.Errorf("%s sent too", tc.absent)
			}
			if fake.Requests()[0].MaxTokens != 321 {
				t.Errorf("fake read max tokens %d", fake.Requests()[0].MaxTokens)
			}
		})
	}
}

func TestToolCallSplitAcrossChunks(t *testing.T) {
	calls := []chat.ToolCall{
		{ID: "call_a", Name: "read_file", Arguments: `{"path":"docs/api.md","offset":12}`},
		{ID: "call_b", Name: "web_search", Arguments: `{"query":"größte Stadt"}`},
	}
	fake := openaifake.New(openaifake.Options{Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "Let me look.", ToolCalls: calls, ChunkRunes: 3}
	}})
	defer fake.Close()
	c := newClient(t, "openai", fake.URL())
	req := userReq("read the api doc")
	req.Tools = []chat.ToolSpec{{Name: "read_file", Description: "Read a file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}}

	r := run(t, c, context.Background(), req)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if fmt.Sprint(r.calls) != fmt.Sprint(calls) {
		t.Errorf("tool call events %+v, want %+v (one per call, whole)", r.calls, calls)
	}
	if fmt.Sprint(r.resp.Message.ToolCalls) != fmt.Sprint(calls) {
		t.Errorf("message tool calls %+v", r.resp.Message.ToolCalls)
	}
	if r.resp.FinishReason != providers.FinishToolCalls {
		t.Errorf("finish %q", r.resp.FinishReason)
	}
	if got := fake.Requests()[0].Tools; len(got) != 1 || got[0] != "read_file" {
		t.Errorf("tools sent %v", got)
	}
	if !bytes.Contains(fake.Requests()[0].Raw, []byte(`"required":["path"]`)) {
		t.Errorf("schema not sent as written: %s", fake.Requests()[0].Raw)
	}
}

func TestThinkingKeptIntact(t *testing.T) {
	// Both spellings of the reasoning delta: DeepSeek's and OpenRouter's.
	for _, field := range []string{"reasoning_content", "reasoning"} {
		t.Run(field, func(t *testing.T) {
			thinking := "  First, 9.11 < 9.8 because 0.11 < 0.80.\n\nSo: 9.8.  "
			fake := openaifake.New(openaifake.Options{ReasoningField: field, Script: func(testkit.Received) testkit.Reply {
				return testkit.Reply{Thinking: thinking, Text: "9.8 is greater.", ChunkRunes: 5}
			}})
			defer fake.Close()
			r := run(t, newClient(t, "deepseek", fake.URL()), context.Background(), userReq("9.11 or 9.8?"))
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.think != thinking || r.resp.Message.Thinking != thinking {
				t.Errorf("thinking events %q message %q; want %q exactly", r.think, r.resp.Message.Thinking, thinking)
			}
			if r.resp.Message.Content != "9.8 is greater." {
				t.Errorf("content %q", r.resp.Message.Content)
			}
		})
	}
}

func TestUsageAsReported(t *testing.T) {
	reported := chat.Usage{InputTokens: 1200, OutputTokens: 34, CachedTokens: 1024}
	fake := openaifake.New(openaifake.Options{Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "ok", Usage: &reported}
	}})
	defer fake.Close()
	r := run(t, newClient(t, "openai", fake.URL()), context.Background(), userReq("hi"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.resp.Usage != reported {
		t.Errorf("usage %+v, want %+v (cached from prompt_tokens_details)", r.resp.Usage, reported)
	}
}

func TestErrors(t *testing.T) {
	long := strings.Repeat("word ", 5000)
	cases := []struct {
		name    string
		window  int
		reply   testkit.Reply
		prompt  string
		check   func(t *testing.T, pe *providers.Error)
		wantCtx bool
	}{
		{
			name: "too long refusal names the window", window: 4096, prompt: long,
			check: func(t *testing.T, pe *providers.Error) {
				if !pe.TooLong || pe.Window != 4096 || pe.Status != 400 {
					t.Errorf("TooLong %v Window %d Status %d; want true 4096 400", pe.TooLong, pe.Window, pe.Status)
				}
			},
		},
		{
			// Real body: OpenAI's TPM limit, ../shared/provider-bodies A102
			// (FoundationAgents/MetaGPT#523), in OpenAI's JSON envelope.
			name: "429 with Retry-After is retryable, not too long", prompt: "hi",
			reply: testkit.Reply{Status: 429, Body: `{"error":{"message":"Rate limit reached for gpt-4 in organization org-uVqpjtJiKqvVJMVfvpaounIh on tokens per min (TPM): Limit 10000, Used 8554, Requested 3082. Please try again in 9.816s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`},
			check: func(t *testing.T, pe *providers.Error) {
				if !pe.Retryable || pe.TooLong || pe.RetryAfter != 7*time.Second {
					t.Errorf("Retryable %v TooLong %v RetryAfter %v; want true false 7s", pe.Retryable, pe.TooLong, pe.RetryAfter)
				}
			},
		},
		{
			// vLLM's envelope has no "error" key, which the SDK cannot
			// decode: message from agent0ai/agent-zero#1102 (A086), envelope
			// as in vllm-project/vllm#4667 (A088).
			name: "vLLM body without an error key", prompt: "hi",
			reply: testkit.Reply{Status: 400, Body: `{"object":"error","message":"This model's maximum context length is 16384 tokens. However, your request has 19427 input tokens. Please reduce the length of the input messages. (parameter=input_tokens, value=19427)","type":"BadRequestError","param":null,"code":400}`},
			check: func(t *testing.T, pe *providers.Error) {
				if !pe.TooLong || pe.Window != 16384 {
					t.Errorf("TooLong %v Window %d; want true 16384", pe.TooLong, pe.Window)
				}
			},
		},
		{
			name: "plain-text 502 from a proxy", prompt: "hi",
			reply: testkit.Reply{Status: 502, Body: "<html><body>502 Bad Gateway</body></html>"},
			check: func(t *testing.T, pe *providers.Error) {
				if !pe.Retryable || pe.Status != 502 {
					t.Errorf("Retryable %v Status %d", pe.Retryable, pe.Status)
				}
			},
		},
		{
			name: "cut mid-stream", prompt: "hi",
			reply: testkit.Reply{Text: "a fairly long answer that gets cut", ChunkRunes: 2, CutAfterChunks: 4},
			check: func(t *testing.T, pe *providers.Error) {
				if !pe.Retryable || pe.TooLong {
					t.Errorf("Retryable %v TooLong %v", pe.Retryable, pe.TooLong)
				}
			},
		},
		{
			name: "cut between finish and usage", prompt: "hi",
			// role chunk + 1 text chunk + finish chunk = 3; the usage chunk
			// and [DONE] never come.
			reply: testkit.Reply{Text: "ok", CutAfterChunks: 3},
			check: func(t *testing.T, pe *providers.Error) {
				if pe.TooLong {
					t.Errorf("TooLong on a cut")
				}
			},
		},
		{
			name: "garbage", prompt: "hi",
			reply: testkit.Reply{Garbage: true},
			check: func(t *testing.T, pe *providers.Error) {
				if pe.TooLong || pe.Err == nil {
					t.Errorf("TooLong %v Err %v; want a decoding error", pe.TooLong, pe.Err)
				}
			},
		},
		{
			name: "error event after 200", prompt: "hi",
			reply: testkit.Reply{StreamError: `{"error":{"message":"The server is overloaded, please try again later.","type":"server_error","code":"overloaded"}}`},
			check: func(t *testing.T, pe *providers.Error) {
				if pe.Status != 200 || !pe.Retryable || pe.TooLong {
					t.Errorf("Status %d Retryable %v TooLong %v", pe.Status, pe.Retryable, pe.TooLong)
				}
			},
		},
		{
			name: "hang until the context ends", prompt: "hi", reply: testkit.Reply{Hang: true}, wantCtx: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reply := tc.reply
			fake := openaifake.New(openaifake.Options{Window: tc.window, Script: func(testkit.Received) testkit.Reply { return reply }})
			defer fake.Close()
			ctx := context.Background()
			if tc.wantCtx {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
			}
			r := run(t, newClient(t, "openai", fake.URL()), ctx, userReq(tc.prompt))
			if r.err == nil {
				t.Fatalf("no error; response %+v", r.resp)
			}
			if tc.wantCtx && !errors.Is(r.err, context.DeadlineExceeded) {
				t.Errorf("err %v, want a deadline error", r.err)
			}
			var pe *providers.Error
			if !errors.As(r.err, &pe) {
				t.Fatalf("err %T %v is not a *providers.Error", r.err, r.err)
			}
			if tc.check != nil {
				tc.check(t, pe)
			}
		})
	}
}

func TestReplay(t *testing.T) {
	think := func(s string) string { return "<" + s + ">" }
	log := []chat.Message{
		{Role: chat.RoleUser, Content: "q1"},
		{Role: chat.RoleAssistant, Content: "a1", Thinking: think("t1")},
		{Role: chat.RoleUser, Content: "q2", Images: []chat.Image{{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0, 1, 2}}}},
		{Role: chat.RoleAssistant, Thinking: think("t2"), ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "clock", Arguments: "{}"}}},
		{Role: chat.RoleTool, ToolCallID: "call_1", ToolName: "clock", Content: "12:00"},
		{Role: chat.RoleAssistant, Content: "noon", Thinking: think("t3")},
		{Role: chat.RoleUser, Content: "q3"},
	}
	cases := []struct {
		company string
		want    []string // thinking the fake reads back, per non-system message
	}{
		// DeepSeek: only the turn that called a tool keeps its reasoning.
		{"deepseek", []string{"", "", "", think("t2"), "", think("t3"), ""}},
		{"openrouter", []string{"", think("t1"), "", think("t2"), "", think("t3"), ""}},
		{"openai", []string{"", "", "", "", "", "", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.company, func(t *testing.T) {
			fake := openaifake.New(openaifake.Options{})
			defer fake.Close()
			req := providers.Request{Model: "m", System: "sys", Messages: log}
			if r := run(t, newClient(t, tc.company, fake.URL()), context.Background(), req); r.err != nil {
				t.Fatal(r.err)
			}
			got := fake.Requests()[0]
			if got.System != "sys" || len(got.Messages) != len(log) {
				t.Fatalf("system %q, %d messages", got.System, len(got.Messages))
			}
			for i, m := range got.Messages {
				if m.Thinking != tc.want[i] {
					t.Errorf("message %d thinking %q, want %q", i, m.Thinking, tc.want[i])
				}
				if m.Role != log[i].Role || m.Content != log[i].Content || m.ToolCallID != log[i].ToolCallID {
					t.Errorf("message %d = %+v, sent %+v", i, m, log[i])
				}
			}
			if imgs := got.Messages[2].Images; len(imgs) != 1 || imgs[0].MediaType != "image/png" || !bytes.Equal(imgs[0].Data, log[2].Images[0].Data) {
				t.Errorf("image did not arrive as a data URL part: %+v", imgs)
			}
			if tcs := got.Messages[3].ToolCalls; len(tcs) != 1 || tcs[0] != log[3].ToolCalls[0] {
				t.Errorf("assistant tool calls %+v", tcs)
			}
		})
	}
}

func TestAzureRequestShape(t *testing.T) {
	type seen struct{ path, query, apiKey, auth string }
	cases := []struct {
		name, base string
		want       seen
	}{
		{"deployments API", "/?api-version=2024-06-01", seen{"/openai/deployments/my-gpt4o/chat/completions", "api-version=2024-06-01", "k", ""}},
		{"deployments API default version", "/openai", seen{"/openai/deployments/my-gpt4o/chat/completions", "api-version=" + azureDefaultAPIVersion, "k", ""}},
		{"v1 API", "/openai/v1", seen{"/openai/v1/chat/completions", "", "k", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got seen
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = seen{r.URL.Path, r.URL.RawQuery, r.Header.Get("api-key"), r.Header.Get("Authorization")}
				mu.Unlock()
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
			}))
			defer srv.Close()
			c, err := New(Config{Company: "azure", BaseURL: srv.URL + tc.base, APIKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			req := userReq("hi")
			req.Model = "my-gpt4o"
			r := run(t, c, context.Background(), req)
			if r.err != nil || r.text != "hi" {
				t.Fatalf("err %v text %q", r.err, r.text)
			}
			mu.Lock()
			defer mu.Unlock()
			if got != tc.want {
				t.Errorf("saw %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestModels(t *testing.T) {
	cases := []struct {
		name    string
		company string
		listed  []openaifake.ModelEntry
		cfg     Config
		want    []providers.ModelInfo
	}{
		{
			name: "OpenRouter context_length from the list", company: "openrouter",
			listed: []openaifake.ModelEntry{{ID: "qwen/qwen3-coder", Window: 262000}, {ID: "x/no-window"}},
			want: []providers.ModelInfo{
				{ID: "qwen/qwen3-coder", Window: 262000, WindowSource: providers.SourceList, Loaded: true},
				{ID: "x/no-window", Window: providers.DefaultRemoteWindow, WindowSource: providers.SourceDefault, Loaded: true},
			},
		},
		{
			name: "vLLM max_model_len, local", company: "vllm",
			listed: []openaifake.ModelEntry{{ID: "meta-llama/Meta-Llama-3-8B-Instruct", Window: 8192, WindowField: "max_model_len"}},
			want:   []providers.ModelInfo{{ID: "meta-llama/Meta-Llama-3-8B-Instruct", Window: 8192, WindowSource: providers.SourceList, Local: true, Loaded: true}},
		},
		{
			name: "config window, then default, for the configured models", company: "groq",
			listed: []openaifake.ModelEntry{{ID: "llama-3.1-8b-instant", Window: 131072, WindowField: "context_window"}},
			cfg:    Config{Models: []string{"llama-3.1-8b-instant", "in-config", "unknown"}, Windows: map[string]int{"in-config": 32000}},
			want: []providers.ModelInfo{
				{ID: "llama-3.1-8b-instant", Window: 131072, WindowSource: providers.SourceList, Loaded: true},
				{ID: "in-config", Window: 32000, WindowSource: providers.SourceConfig, Loaded: true},
				{ID: "unknown", Window: providers.DefaultRemoteWindow, WindowSource: providers.SourceDefault, Loaded: true},
			},
		},
		{
			name: "a local server of one's own without windows", company: "",
			listed: []openaifake.ModelEntry{{ID: "mine"}},
			want:   []providers.ModelInfo{{ID: "mine", Window: providers.DefaultLocalWindow, WindowSource: providers.SourceDefault, Local: true, Loaded: true}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := openaifake.New(openaifake.Options{Models: tc.listed})
			defer fake.Close()
			cfg := tc.cfg
			cfg.Name, cfg.Company, cfg.BaseURL = "p", tc.company, fake.URL()
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Models(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				tc.want[i].Provider = "p"
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestModelsListDown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`, http.StatusUnauthorized)
	}))
	defer srv.Close()
	c, err := New(Config{Name: "p", Company: "openai", BaseURL: srv.URL + "/v1", Models: []string{"gpt-x"}, Windows: map[string]int{"gpt-x": 1000}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Models(context.Background())
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusUnauthorized {
		t.Errorf("err %v, want the 401 as *providers.Error", err)
	}
	if len(got) != 1 || got[0].Window != 1000 || got[0].WindowSource != providers.SourceConfig {
		t.Errorf("still want the configured model with its config window, got %+v", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	cases := []struct{ name, company, base string }{
		{"azure without a URL", "azure", ""},
		{"own server without a URL", "my-server", ""},
		{"relative URL", "openai", "api.example.com/v1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(Config{Company: tc.company, BaseURL: tc.base}); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}

// TestConcurrentStreams shares one client among many chats, as the daemon
// does (run with -race).
func TestConcurrentStreams(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "echo: " + r.Messages[len(r.Messages)-1].Content, ChunkRunes: 3}
	}})
	defer fake.Close()
	c := newClient(t, "openai", fake.URL())
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := fmt.Sprintf("question %d", i)
			r := run(t, c, context.Background(), userReq(q))
			if r.err != nil || r.resp.Message.Content != "echo: "+q {
				errs <- fmt.Errorf("chat %d: err %v content %q", i, r.err, r.resp.Message.Content)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestRoundTripProperty: whatever the fake streams, split however, the
// adapter reassembles exactly.
func TestRoundTripProperty(t *testing.T) {
	var mu sync.Mutex
	var reply testkit.Reply
	fake2 := openaifake.New(openaifake.Options{Script: func(testkit.Received) testkit.Reply {
		mu.Lock()
		defer mu.Unlock()
		return reply
	}})
	defer fake2.Close()
	c := newClient(t, "deepseek", fake2.URL())
	rapid.Check(t, func(rt *rapid.T) {
		text := rapid.String().Draw(rt, "text")
		thinking := rapid.String().Draw(rt, "thinking")
		n := rapid.IntRange(0, 3).Draw(rt, "calls")
		var calls []chat.ToolCall
		for i := range n {
			calls = append(calls, chat.ToolCall{
				ID:        fmt.Sprintf("call_%d", i),
				Name:      rapid.StringMatching(`[a-z_]{1,12}`).Draw(rt, "name"),
				Arguments: rapid.String().Draw(rt, "args"),
			})
		}
		chunk := rapid.IntRange(1, 9).Draw(rt, "chunk")
		mu.Lock()
		reply = testkit.Reply{Text: text, Thinking: thinking, ToolCalls: calls, ChunkRunes: chunk}
		mu.Unlock()
		r := run(rt, c, context.Background(), userReq("go"))
		if r.err != nil {
			rt.Fatalf("Stream: %v", r.err)
		}
		m := r.resp.Message
		if m.Content != text || r.text != text || m.Thinking != thinking || r.think != thinking {
			rt.Fatalf("content %q thinking %q; want %q %q", m.Content, m.Thinking, text, thinking)
		}
		if fmt.Sprint(m.ToolCalls) != fmt.Sprint(calls) || fmt.Sprint(r.calls) != fmt.Sprint(calls) {
			rt.Fatalf("tool calls %+v events %+v; want %+v", m.ToolCalls, r.calls, calls)
		}
	})
}

func BenchmarkStream(b *testing.B) {
	fake := openaifake.New(openaifake.Options{Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Text: strings.Repeat("token ", 200), ChunkRunes: 6}
	}})
	defer fake.Close()
	c := newClient(b, "openai", fake.URL())
	req := userReq("hello")
	b.ReportAllocs()
	for b.Loop() {
		if r := run(b, c, context.Background(), req); r.err != nil {
			b.Fatal(r.err)
		}
	}
}

// TestCacheHints: OpenAI gets the chat's prompt_cache_key, a generic server
// only when configured; llama.cpp gets cache_prompt, and once its /props
// says it runs several slots, the same slot for every request of a chat.
func TestCacheHints(t *testing.T) {
	on := true
	props := `{"default_generation_settings":{"n_ctx":4096},"total_slots":4}`
	cases := []struct {
		name  string
		cfg   Config
		key   bool // prompt_cache_key sent
		llama bool // cache_prompt and id_slot sent
	}{
		{"openai", Config{Company: "openai"}, true, false},
		{"generic server", Config{Company: "vllm"}, false, false},
		{"generic server, configured", Config{Company: "vllm", PromptCacheKey: &on}, true, false},
		{"llama.cpp", Config{Company: "llamacpp"}, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := openaifake.New(openaifake.Options{Props: props, Models: []openaifake.ModelEntry{{ID: "gpt-test"}}})
			defer fake.Close()
			cfg := tc.cfg
			cfg.Name, cfg.BaseURL = "p", fake.URL()
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Models(context.Background()); err != nil {
				t.Fatal(err)
			}
			slots := map[any]bool{}
			for _, chatID := range []string{"chat-a", "chat-a", "chat-b"} {
				req := userReq("hi")
				req.CacheKey = chatID
				if r := run(t, c, context.Background(), req); r.err != nil {
					t.Fatal(r.err)
				}
				var body map[string]any
				reqs := fake.Requests()
				_ = json.Unmarshal(reqs[len(reqs)-1].Raw, &body)
				if got, want := body["prompt_cache_key"], any(chatID); tc.key != (got == want) {
					t.Fatalf("prompt_cache_key %v (want sent: %v)", got, tc.key)
				}
				if tc.llama != (body["cache_prompt"] == true) {
					t.Fatalf("cache_prompt %v (want sent: %v)", body["cache_prompt"], tc.llama)
				}
				slot, hasSlot := body["id_slot"]
				if tc.llama != hasSlot {
					t.Fatalf("id_slot %v (want sent: %v)", slot, tc.llama)
				}
				if chatID == "chat-a" {
					slots[slot] = true
				}
			}
			if len(slots) != 1 {
				t.Fatalf("one chat went to slots %v", slots)
			}
		})
	}
}

// A base_url without /v1 for a server that serves OpenAI's routes only
// there (Ollama's bare 404, recorded) says which key to change and how; a
// 404 for a model, or from a base_url that has its version, does not.
func TestRoute404WithoutVersionNamesBaseURL(t *testing.T) {
	route404, err := os.ReadFile("testdata/ollama_route_404.txt")
	if err != nil {
		t.Fatal(err)
	}
	model404, err := os.ReadFile("testdata/ollama_model_404.json")
	if err != nil {
		t.Fatal(err)
	}
	// As Ollama routes: the OpenAI-style API lives under /v1 alone.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusNotFound)
			w.Write(route404)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write(model404)
	}))
	defer srv.Close()
	cases := map[string]struct {
		base string
		hint bool
	}{
		"no version":         {srv.URL, true},
		"no version, slash":  {srv.URL + "/", true},
		"v1, model unknown":  {srv.URL + "/v1", false},
		"v1/, model unknown": {srv.URL + "/v1/", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, "", tc.base)
			_, listErr := c.Models(context.Background())
			r := run(t, c, context.Background(), userReq("hi"))
			for what, err := range map[string]error{"list": listErr, "chat": r.err} {
				var pe *providers.Error
				if !errors.As(err, &pe) || pe.Status != http.StatusNotFound || pe.Retryable {
					t.Fatalf("%s: err %v, want a 404 *providers.Error, not retryable", what, err)
				}
				hinted := strings.Contains(err.Error(), "base_url") && strings.Contains(err.Error(), srv.URL+"/v1")
				if hinted != tc.hint {
					t.Errorf("%s: %q: hint %v, want %v", what, err, hinted, tc.hint)
				}
			}
		})
	}
}

// A 200 event stream that ends before its first event (a server that closed
// it, or sent only keep-alive comments) is a passing fault to retry, not an
// answer in another format.
func TestStreamEndedBeforeAnyEventIsRetryable(t *testing.T) {
	for name, body := range map[string]string{"empty": "", "keep-alive only": ": keep-alive\n\n: keep-alive\n\n"} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				io.WriteString(w, body)
			}))
			defer srv.Close()
			r := run(t, newClient(t, "", srv.URL+"/v1"), context.Background(), userReq("hi"))
			var pe *providers.Error
			if !errors.As(r.err, &pe) || !pe.Retryable || strings.Contains(r.err.Error(), "not an SSE stream") {
				t.Fatalf("err %v, want a retryable *providers.Error saying the stream ended", r.err)
			}
		})
	}
}

// An OpenAI-style provider's error names it as configured, as the Ollama
// and Anthropic adapters' do, not by its company: two servers of one
// company (two llama.cpp, LM Studio and vLLM) are then told apart.
func TestErrorNamesTheConfiguredProvider(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
	}))
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for name, base := range map[string]string{"stream ended": srv.URL + "/v1", "unreachable": down.URL + "/v1"} {
		t.Run(name, func(t *testing.T) {
			c, err := New(Config{Name: "lab", BaseURL: base})
			if err != nil {
				t.Fatal(err)
			}
			r := run(t, c, context.Background(), userReq("hi"))
			var pe *providers.Error
			if !errors.As(r.err, &pe) || pe.Provider != "lab" || !strings.HasPrefix(r.err.Error(), "lab: ") {
				t.Fatalf("err %v, want a *providers.Error of provider lab", r.err)
			}
		})
	}
	srv.Close()
}
