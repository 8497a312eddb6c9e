package ollama

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/ollamafake"
)

var _ providers.Client = (*Client)(nil)

// realModels serves the three recorded /api/show bodies (testdata/show).
func realModels(t *testing.T) []ollamafake.ModelEntry {
	t.Helper()
	var out []ollamafake.ModelEntry
	for _, m := range []struct {
		name, file string
		size       int64
	}{
		{"llama3:latest", "llama3_8b.json", weightsLlama3_8B},
		{"gemma3:4b", "gemma3_4b.json", weightsGemma3_4B},
		{"gemma3:1b", "gemma3_1b.json", weightsGemma3_1B},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "show", m.file))
		if err != nil {
			t.Fatal(err)
		}
		e, err := ollamafake.ModelFromShow(m.name, m.size, b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// setup starts a fake with the real models and a client planning with mem.
func setup(t *testing.T, mem uint64, script testkit.Script, tweak func(*Config)) (*Client, *ollamafake.Server) {
	t.Helper()
	fake := ollamafake.New(ollamafake.Options{Models: realModels(t), Script: script})
	t.Cleanup(fake.Close)
	cfg := Config{BaseURL: fake.URL(), MemoryBytes: mem}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, fake
}

func TestStreamText(t *testing.T) {
	const answer = "The sky is blue because of Rayleigh scattering."
	c, fake := setup(t, 32*gib, testkit.Always(testkit.Reply{Text: answer, ChunkRunes: 5}), nil)
	var got testkit.Events
	resp, err := c.Stream(context.Background(), providers.Request{
		Model: "gemma3:4b", System: "Be brief.", Messages: testkit.Ask("Why is the sky blue?"),
	}, got.Emit)
	if err != nil {
		t.Fatal(err)
	}
	text, pieces := got.Joined(providers.EventText)
	if text != answer || resp.Message.Content != answer {
		t.Errorf("streamed %q, response %q, want %q", text, resp.Message.Content, answer)
	}
	if pieces < 2 {
		t.Errorf("got %d text events, want the answer in several pieces", pieces)
	}
	if resp.FinishReason != providers.FinishStop || resp.Message.Role != chat.RoleAssistant {
		t.Errorf("finish %q role %q", resp.FinishReason, resp.Message.Role)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("fake saw %d requests", len(reqs))
	}
	// Usage is the fake's own count of what it received and what it said.
	want := chat.Usage{InputTokens: reqs[0].InputTokens, OutputTokens: testkit.CountTokens(answer)}
	if resp.Usage != want {
		t.Errorf("usage %+v, want %+v", resp.Usage, want)
	}
	last := got.List[len(got.List)-1]
	if last.Kind != providers.EventUsage || *last.Usage != want {
		t.Errorf("last event %+v, want the usage %+v", last, want)
	}
	// gemma3:4b at 32 GiB sizes to 65536 (see TestSizeWindowRealBodies).
	if reqs[0].NumCtx != 65536 {
		t.Errorf("num_ctx %d, want 65536", reqs[0].NumCtx)
	}
	if reqs[0].System != "Be brief." || len(reqs[0].Messages) != 1 || reqs[0].Messages[0].Content != "Why is the sky blue?" {
		t.Errorf("fake received %+v", reqs[0])
	}
}

func TestSameNumCtxEveryTimeNoReload(t *testing.T) {
	c, fake := setup(t, 24*gib, nil, nil)
	for i := range 3 {
		if _, err := c.Stream(context.Background(), providers.Request{Model: "gemma3:4b", Messages: testkit.Ask("hi")}, nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	for i, r := range fake.Requests() {
		if r.NumCtx != 49152 { // gemma3:4b at 24 GiB
			t.Errorf("request %d num_ctx %d, want 49152", i, r.NumCtx)
		}
	}
	if n := fake.Loads("gemma3:4b"); n != 1 {
		t.Errorf("model loaded %d times, want 1", n)
	}
}

func TestStreamToolCall(t *testing.T) {
	call := chat.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris","unit":"celsius"}`}
	c, fake := setup(t, 32*gib, testkit.Always(testkit.Reply{ToolCalls: []chat.ToolCall{call}, Finish: "tool_calls"}), nil)
	tools := []chat.ToolSpec{{Name: "get_weather", Description: "Weather for a city",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}`)}}
	req := providers.Request{Model: "llama3", Messages: testkit.Ask("Weather in Paris?"), Tools: tools}

	var got testkit.Events
	resp, err := c.Stream(context.Background(), req, got.Emit)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != providers.FinishToolCalls {
		t.Errorf("finish %q, want tool_calls", resp.FinishReason)
	}
	if len(resp.Message.ToolCalls) != 1 {
		t.Fatalf("tool calls %+v", resp.Message.ToolCalls)
	}
	tc := resp.Message.ToolCalls[0]
	if tc.Name != "get_weather" || tc.Arguments != call.Arguments || !strings.HasPrefix(tc.ID, "call_") {
		t.Errorf("tool call %+v", tc)
	}
	var evCall *chat.ToolCall
	for _, e := range got.List {
		if e.Kind == providers.EventToolCall {
			evCall = e.ToolCall
		}
	}
	if evCall == nil || *evCall != tc {
		t.Errorf("tool call event %+v, want %+v", evCall, tc)
	}
	if r := fake.Requests()[0]; !reflect.DeepEqual(r.Tools, []string{"get_weather"}) {
		t.Errorf("fake saw tools %v", r.Tools)
	}

	// The same answer to the same request gets the same id; a later turn
	// (more messages) a different one.
	again, err := c.Stream(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Message.ToolCalls[0].ID != tc.ID {
		t.Errorf("id not stable: %q then %q", tc.ID, again.Message.ToolCalls[0].ID)
	}
	next := req
	next.Messages = append(append([]chat.Message(nil), req.Messages...),
		chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{tc}},
		chat.Message{Role: chat.RoleTool, ToolCallID: tc.ID, ToolName: tc.Name, Content: "18°C, clear"},
		chat.Message{Role: chat.RoleUser, Content: "And tomorrow?"})
	later, err := c.Stream(context.Background(), next, nil)
	if err != nil {
		t.Fatal(err)
	}
	if later.Message.ToolCalls[0].ID == tc.ID {
		t.Errorf("a later turn reused id %q", tc.ID)
	}
	// The tool round trip reached the server intact.
	sent := fake.Requests()[2].Messages
	if len(sent) != 4 || sent[1].ToolCalls[0].Name != "get_weather" || sent[1].ToolCalls[0].Arguments != call.Arguments ||
		sent[2].ToolName != "get_weather" || sent[2].ToolCallID != tc.ID || sent[2].Content != "18°C, clear" {
		t.Errorf("fake received %+v", sent)
	}
}

func TestServerNamedToolCallKeepsItsID(t *testing.T) {
	call := chat.ToolCall{ID: "call_ab12cd34", Name: "remember", Arguments: `{"fact":"tea: oolong"}`}
	c, _ := setup(t, 32*gib, testkit.Always(testkit.Reply{ToolCalls: []chat.ToolCall{call}}), nil)
	resp, err := c.Stream(context.Background(), providers.Request{Model: "gemma3:1b", Messages: testkit.Ask("remember")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Message.ToolCalls; len(got) != 1 || got[0] != call {
		t.Errorf("tool calls %+v, want %+v", got, call)
	}
}

func TestThinkingKeptIntact(t *testing.T) {
	// Odd spacing, newlines and non-ASCII: nothing may be trimmed or joined.
	const thinking = "  Step 1: the user wants…\n\n  Step 2: answer «briefly» \t"
	c, fake := setup(t, 32*gib, testkit.Always(testkit.Reply{Thinking: thinking, Text: "Done.", ChunkRunes: 3}), nil)
	var got testkit.Events
	resp, err := c.Stream(context.Background(), providers.Request{Model: "gemma3:1b", Messages: testkit.Ask("go")}, got.Emit)
	if err != nil {
		t.Fatal(err)
	}
	streamed, pieces := got.Joined(providers.EventThinking)
	if resp.Message.Thinking != thinking || streamed != thinking || pieces < 2 {
		t.Errorf("thinking %q streamed %q in %d pieces, want %q", resp.Message.Thinking, streamed, pieces, thinking)
	}
	// Replayed unedited.
	replay := []chat.Message{{Role: chat.RoleUser, Content: "go"}, resp.Message, {Role: chat.RoleUser, Content: "more"}}
	if _, err := c.Stream(context.Background(), providers.Request{Model: "gemma3:1b", Messages: replay}, nil); err != nil {
		t.Fatal(err)
	}
	if sent := fake.Requests()[1].Messages[1]; sent.Thinking != thinking || sent.Content != "Done." {
		t.Errorf("replayed %+v", sent)
	}
}

func TestImagesSentBase64(t *testing.T) {
	img := []byte("\x89PNG\r\n\x1a\n fake pixels")
	c, fake := setup(t, 32*gib, nil, nil)
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "what is this?", Images: []chat.Image{{MediaType: "image/png", Data: img}}}}
	if _, err := c.Stream(context.Background(), providers.Request{Model: "gemma3:4b", Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	r := fake.Requests()[0]
	if !strings.Contains(string(r.Raw), `"images":["`+base64.StdEncoding.EncodeToString(img)+`"]`) {
		t.Errorf("raw request lacks the base64 image: %s", r.Raw)
	}
	if got := r.Messages[0].Images; len(got) != 1 || string(got[0].Data) != string(img) {
		t.Errorf("fake decoded images %+v", got)
	}
}

func TestLengthFinish(t *testing.T) {
	c, _ := setup(t, 32*gib, testkit.Always(testkit.Reply{Text: "cut sh", Finish: "length"}), nil)
	resp, err := c.Stream(context.Background(), providers.Request{Model: "gemma3:1b", Messages: testkit.Ask("long story"), MaxTokens: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != providers.FinishLength {
		t.Errorf("finish %q, want length", resp.FinishReason)
	}
}

// bigPrompt is about n tokens by the fakes' count (one per four bytes).
func bigPrompt(n int) string { return strings.Repeat("abcd", n) }

func TestSilentTruncationDetected(t *testing.T) {
	c, fake := setup(t, 32*gib, testkit.Always(testkit.Reply{Text: "I only saw the end."}), func(cfg *Config) {
		cfg.Windows = map[string]int{"gemma3:1b": 4096}
	})
	msgs := []chat.Message{
		{Role: chat.RoleUser, Content: bigPrompt(3000)},
		{Role: chat.RoleAssistant, Content: "ok"},
		{Role: chat.RoleUser, Content: bigPrompt(2500)},
	}
	est := testkit.CountTokens(msgs[0].Content) + testkit.CountTokens(msgs[1].Content) + testkit.CountTokens(msgs[2].Content)
	var got testkit.Events
	resp, err := c.Stream(context.Background(), providers.Request{Model: "gemma3:1b", Messages: msgs, EstimatedInput: est}, got.Emit)
	var pe *providers.Error
	if !errors.As(err, &pe) || !pe.TooLong || pe.Window != 4096 || pe.Status != 200 || pe.Requested != est {
		t.Fatalf("err = %#v, want TooLong with window 4096, status 200, requested %d", err, est)
	}
	// The fake cut silently: it read at most num_ctx and said so.
	if fake.Requests()[0].NumCtx != 4096 || resp.Usage.InputTokens > 4096 {
		t.Errorf("num_ctx %d, reported input %d", fake.Requests()[0].NumCtx, resp.Usage.InputTokens)
	}
	if resp.Message.Content != "I only saw the end." {
		t.Errorf("the answer should come back alongside the error, got %q", resp.Message.Content)
	}
}

func TestNoTruncationWhenItFits(t *testing.T) {
	tests := map[string]struct {
		window int
		usage  *chat.Usage // what the server reports; nil: the fake counts
		prompt int         // tokens of the one message
	}{
		// 5500 tokens in a 65536 window: read whole.
		"fits": {window: 65536, prompt: 5500},
		// A mostly cached prompt reports few evaluated tokens; it fits, so
		// a low count alone must not be called a cut.
		"cached prompt reports little": {window: 8192, usage: &chat.Usage{InputTokens: 12, OutputTokens: 3}, prompt: 6000},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, _ := setup(t, 32*gib, testkit.Always(testkit.Reply{Text: "fine", Usage: tc.usage}), func(cfg *Config) {
				cfg.Windows = map[string]int{"gemma3:1b": tc.window}
			})
			msgs := testkit.Ask(bigPrompt(tc.prompt))
			_, err := c.Stream(context.Background(), providers.Request{Model: "gemma3:1b", Messages: msgs,
				EstimatedInput: testkit.CountTokens(msgs[0].Content)}, nil)
			if err != nil {
				t.Errorf("err = %v, want none", err)
			}
		})
	}
}

func TestNoTruncateGetsRealRefusal(t *testing.T) {
	c, _ := setup(t, 32*gib, nil, func(cfg *Config) {
		cfg.Windows = map[string]int{"gemma3:1b": 4096}
		cfg.NoTruncate = true
	})
	_, err := c.Stream(context.Background(), providers.Request{Model: "gemma3:1b", Messages: testkit.Ask(bigPrompt(6000))}, nil)
	var pe *providers.Error
	if !errors.As(err, &pe) || !pe.TooLong || pe.Status != 400 {
		t.Fatalf("err = %#v, want TooLong status 400", err)
	}
	if !strings.Contains(pe.Body, "the input length exceeds the context length") {
		t.Errorf("body %q", pe.Body)
	}
}

func TestStreamFailures(t *testing.T) {
	tests := map[string]struct {
		reply     testkit.Reply
		timeout   time.Duration
		check     func(*testing.T, error)
		wantText  string // what streamed before the failure
		retryable bool
	}{
		"hang until the deadline": {
			reply:   testkit.Reply{Hang: true},
			timeout: 100 * time.Millisecond,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("err = %v, want the context deadline", err)
				}
			},
		},
		"cut mid-stream": {
			reply:    testkit.Reply{Text: "Once upon a time there was", ChunkRunes: 5, CutAfterChunks: 2},
			wantText: "Once upon ",
			check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrIncompleteStream) {
					t.Errorf("err = %v, want ErrIncompleteStream", err)
				}
			},
			retryable: true,
		},
		"garbage": {
			reply: testkit.Reply{Garbage: true},
			check: func(t *testing.T, err error) {
				var pe *providers.Error
				if !errors.As(err, &pe) || pe.TooLong {
					t.Errorf("err = %#v, want a non-length provider error", err)
				}
			},
		},
		"error line after 200": {
			reply:    testkit.Reply{Text: "partial", StreamError: "model runner has unexpectedly stopped, this may be due to resource limitations or an internal error, check ollama server logs for details"},
			wantText: "partial",
			check: func(t *testing.T, err error) {
				var pe *providers.Error
				if !errors.As(err, &pe) || pe.Status != 200 || !strings.Contains(pe.Body, "unexpectedly stopped") {
					t.Errorf("err = %#v", err)
				}
			},
		},
		"not found": {
			// server/routes.go handleScheduleError, github.com/ollama/ollama v0.17.4.
			reply: testkit.Reply{Status: 404, Body: `{"error":"model \"llama9\" not found, try pulling it first"}`},
			check: func(t *testing.T, err error) {
				var pe *providers.Error
				if !errors.As(err, &pe) || pe.Status != 404 || pe.TooLong || pe.Retryable {
					t.Errorf("err = %#v", err)
				}
			},
		},
		// A proxy in front of Ollama answers with a bare status: Caddy's
		// reverse_proxy says 502 with no body when Ollama is down, its
		// basic_auth 401. The status is the failure, not a cut stream.
		"proxy 502 with no body": {
			reply:     testkit.Reply{Status: 502},
			retryable: true,
			check: func(t *testing.T, err error) {
				var pe *providers.Error
				if !errors.As(err, &pe) || pe.Status != 502 || errors.Is(err, ErrIncompleteStream) || !strings.Contains(err.Error(), "502 Bad Gateway") {
					t.Errorf("err = %v, want status 502 named", err)
				}
			},
		},
		"proxy 401 with no body": {
			reply: testkit.Reply{Status: 401},
			check: func(t *testing.T, err error) {
				var pe *providers.Error
				if !errors.As(err, &pe) || pe.Status != 401 || errors.Is(err, ErrIncompleteStream) || !strings.Contains(err.Error(), "401 Unauthorized") {
					t.Errorf("err = %v, want status 401 named", err)
				}
			},
		},
		"server fault": {
			reply:     testkit.Reply{Status: 500, Body: `{"error":"llama runner process has terminated: exit status 2"}`},
			retryable: true,
			check: func(t *testing.T, err error) {
				var pe *providers.Error
				if !errors.As(err, &pe) || pe.Status != 500 {
					t.Errorf("err = %#v", err)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, _ := setup(t, 32*gib, testkit.Always(tc.reply), nil)
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			var got testkit.Events
			resp, err := c.Stream(ctx, providers.Request{Model: "gemma3:1b", Messages: testkit.Ask("hello")}, got.Emit)
			if err == nil {
				t.Fatalf("no error; response %+v", resp)
			}
			tc.check(t, err)
			if text, _ := got.Joined(providers.EventText); text != tc.wantText {
				t.Errorf("streamed %q before the failure, want %q", text, tc.wantText)
			}
			var pe *providers.Error
			if errors.As(err, &pe) && pe.Retryable != tc.retryable {
				t.Errorf("retryable = %v, want %v", pe.Retryable, tc.retryable)
			}
		})
	}
}

func TestModels(t *testing.T) {
	models := realModels(t)
	models[2].Loaded = true // gemma3:1b is in memory
	fake := ollamafake.New(ollamafake.Options{Models: models})
	t.Cleanup(fake.Close)
	c, err := New(Config{Name: "home", BaseURL: fake.URL(), MemoryBytes: 8 * gib,
		Windows: map[string]int{"llama3": 6144}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Windows at 8 GiB from TestSizeWindowRealBodies; llama3 from config.
	want := []providers.ModelInfo{
		{Provider: "home", ID: "llama3:latest", Window: 6144, WindowSource: providers.SourceConfig, Local: true},
		{Provider: "home", ID: "gemma3:4b", Window: 16384, WindowSource: providers.SourceList, Local: true, Vision: true},
		{Provider: "home", ID: "gemma3:1b", Window: 32768, WindowSource: providers.SourceList, Local: true, Loaded: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Models =\n%+v\nwant\n%+v", got, want)
	}

	// A configured model the server does not have: the local default.
	c2, err := New(Config{BaseURL: fake.URL(), MemoryBytes: 8 * gib, Models: []string{"gemma3:1b", "nope:7b"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err = c2.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].ID != "nope:7b" || got[1].Window != providers.DefaultLocalWindow || got[1].WindowSource != providers.SourceDefault {
		t.Errorf("Models = %+v", got)
	}
}

func TestModelsAndStreamAgreeOnWindow(t *testing.T) {
	c, fake := setup(t, 8*gib, nil, nil)
	infos, err := c.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if _, err := c.Stream(context.Background(), providers.Request{Model: info.ID, Messages: testkit.Ask("hi")}, nil); err != nil {
			t.Fatal(err)
		}
		reqs := fake.Requests()
		if n := reqs[len(reqs)-1].NumCtx; n != info.Window {
			t.Errorf("%s: Models says %d, Stream asked for %d", info.ID, info.Window, n)
		}
	}
}

func TestNewRejectsBadURL(t *testing.T) {
	for _, u := range []string{"localhost:11434", "://x", "/relative"} {
		if _, err := New(Config{BaseURL: u}); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}
