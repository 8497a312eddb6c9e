package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/anthropicfake"
)

var _ providers.Client = (*Client)(nil)

const model = anthropicfake.DefaultModel

func newClient(t *testing.T, url string, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{BaseURL: url, APIKey: "test-key"}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func fake(t *testing.T, opts anthropicfake.Options) *anthropicfake.Server {
	t.Helper()
	s := anthropicfake.New(opts)
	t.Cleanup(s.Close)
	return s
}

func TestStreamText(t *testing.T) {
	answer := "Paris is the capital of France. Its river is the Seine."
	srv := fake(t, anthropicfake.Options{Script: testkit.Always(testkit.Reply{Text: answer, ChunkRunes: 3})})
	c := newClient(t, srv.URL(), nil)
	var rec testkit.Events
	res, err := c.Stream(context.Background(), providers.Request{Model: model, System: "Be brief.", Messages: testkit.Ask("Capital of France?")}, rec.Emit)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	streamed, pieces := rec.Joined(providers.EventText)
	if streamed != answer || res.Message.Content != answer {
		t.Fatalf("streamed %q, content %q, want %q", streamed, res.Message.Content, answer)
	}
	// 3-rune chunks of a 55-rune answer must arrive as many deltas, not one.
	if pieces < 10 {
		t.Errorf("text arrived in %d pieces, want it streamed in many", pieces)
	}
	if res.FinishReason != providers.FinishStop || res.Message.Role != chat.RoleAssistant {
		t.Errorf("finish %q role %q", res.FinishReason, res.Message.Role)
	}
	got := srv.Requests()
	if len(got) != 1 || got[0].System != "Be brief." || got[0].MaxTokens != DefaultMaxTokens {
		t.Fatalf("fake received %+v", got)
	}
	want := chat.Usage{InputTokens: got[0].InputTokens, OutputTokens: testkit.CountTokens(answer)}
	if res.Usage != want {
		t.Errorf("usage %+v, want %+v (input counted by the fake, output over the answer)", res.Usage, want)
	}
	var usageEvents []chat.Usage
	for _, e := range rec.List {
		if e.Kind == providers.EventUsage {
			usageEvents = append(usageEvents, *e.Usage)
		}
	}
	if len(usageEvents) != 1 || usageEvents[0] != want {
		t.Errorf("usage events %+v, want one %+v", usageEvents, want)
	}
	if res.Message.Model != "anthropic/"+model {
		t.Errorf("message model %q", res.Message.Model)
	}
}

func TestUsageOverrideAndCache(t *testing.T) {
	u := chat.Usage{InputTokens: 7, OutputTokens: 11, CachedTokens: 4096}
	srv := fake(t, anthropicfake.Options{Script: testkit.Always(testkit.Reply{Text: "ok", Usage: &u})})
	res, err := newClient(t, srv.URL(), nil).Stream(context.Background(), providers.Request{Model: model, Messages: testkit.Ask("hi")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Anthropic's input_tokens leaves out the cache read: the whole prompt
	// is both.
	if want := (chat.Usage{InputTokens: 7 + 4096, OutputTokens: 11, CachedTokens: 4096}); res.Usage != want {
		t.Fatalf("usage %+v, want %+v", res.Usage, want)
	}
}

func TestToolCallRoundTrip(t *testing.T) {
	calls := []chat.ToolCall{
		{ID: "toolu_01A", Name: "get_weather", Arguments: `{"city":"Paris","units":"metric"}`},
		{ID: "toolu_01B", Name: "get_time", Arguments: `{"zone":"Europe/Paris"}`},
	}
	srv := fake(t, anthropicfake.Options{Script: func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleTool {
			return testkit.Reply{Text: "It is sunny."}
		}
		return testkit.Reply{Text: "Let me check.", ToolCalls: calls, ChunkRunes: 5}
	}})
	c := newClient(t, srv.URL(), nil)
	tools := []chat.ToolSpec{
		{Name: "get_weather", Description: "Weather now", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)},
		{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{"zone":{"type":"string"}}}`)},
	}
	var rec testkit.Events
	log := testkit.Ask("Weather and time in Paris?")
	res, err := c.Stream(context.Background(), providers.Request{Model: model, Messages: log, Tools: tools}, rec.Emit)
	if err != nil {
		t.Fatalf("first turn: %v", err)
	}
	if res.FinishReason != providers.FinishToolCalls {
		t.Errorf("finish %q, want tool_calls", res.FinishReason)
	}
	var emitted []chat.ToolCall
	for _, e := range rec.List {
		if e.Kind == providers.EventToolCall {
			emitted = append(emitted, *e.ToolCall)
		}
	}
	for name, got := range map[string][]chat.ToolCall{"emitted": emitted, "response": res.Message.ToolCalls} {
		if len(got) != len(calls) {
			t.Fatalf("%s: %d calls, want %d", name, len(got), len(calls))
		}
		for i := range calls {
			if got[i] != calls[i] {
				t.Errorf("%s call %d = %+v, want %+v (arguments reassembled from input_json_delta pieces)", name, i, got[i], calls[i])
			}
		}
	}
	first := srv.Requests()[0]
	if strings.Join(first.Tools, ",") != "get_weather,get_time" || !strings.Contains(string(first.Raw), `"additionalProperties":false`) {
		t.Errorf("tools sent: %v / %s", first.Tools, first.Raw)
	}

	// Two consecutive tool results must reach the API in ONE user message;
	// the fake refuses them split, with the real API's wording.
	log = append(log, res.Message,
		chat.Message{Role: chat.RoleTool, ToolCallID: "toolu_01A", ToolName: "get_weather", Content: "sunny, 21C"},
		chat.Message{Role: chat.RoleTool, ToolCallID: "toolu_01B", ToolName: "get_time", Content: "zone unknown", IsError: true})
	res, err = c.Stream(context.Background(), providers.Request{Model: model, Messages: log, Tools: tools}, nil)
	if err != nil {
		t.Fatalf("second turn: %v", err)
	}
	if res.Message.Content != "It is sunny." {
		t.Errorf("second answer %q", res.Message.Content)
	}
	second := srv.Requests()[1]
	var wire struct {
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(second.Raw, &wire); err != nil {
		t.Fatal(err)
	}
	if len(wire.Messages) != 3 || wire.Messages[2].Role != "user" || len(wire.Messages[2].Content) != 2 {
		t.Fatalf("wire messages: %s", second.Raw)
	}
	tool := second.Messages[len(second.Messages)-1]
	if tool.Role != chat.RoleTool || tool.ToolCallID != "toolu_01B" || !tool.IsError || tool.Content != "zone unknown" {
		t.Errorf("last tool result as received: %+v", tool)
	}
}

func TestThinkingReplayedByteIdentical(t *testing.T) {
	// Quotes, escapes, HTML characters, non-ASCII and blank lines: anything
	// a careless re-encoding would change.
	thought := "The user asks \"2+2\".\n\n<step> 2 & 2 → 4 </step>\tcheck: ✓ \\n literal, émoji 🧮"
	srv := fake(t, anthropicfake.Options{Script: testkit.Always(testkit.Reply{Thinking: thought, Text: "4", ChunkRunes: 2})})
	c := newClient(t, srv.URL(), func(cfg *Config) { cfg.Thinking = ThinkingEnabled })
	var rec testkit.Events
	log := testkit.Ask("What is 2+2?")
	res, err := c.Stream(context.Background(), providers.Request{Model: model, Messages: log}, rec.Emit)
	if err != nil {
		t.Fatalf("first turn: %v", err)
	}
	if streamed, _ := rec.Joined(providers.EventThinking); streamed != thought {
		t.Errorf("streamed thinking %q", streamed)
	}
	if res.Message.Thinking != thought || res.Message.ThinkingSignature != anthropicfake.Sign(thought) {
		t.Fatalf("kept thinking %q sig %q", res.Message.Thinking, res.Message.ThinkingSignature)
	}
	if !strings.Contains(string(srv.Requests()[0].Raw), `"thinking":{"budget_tokens":4096,"type":"enabled"}`) {
		t.Errorf("thinking not asked for: %s", srv.Requests()[0].Raw)
	}

	log = append(log, res.Message, chat.Message{Role: chat.RoleUser, Content: "And 3+3?"})
	if _, err := c.Stream(context.Background(), providers.Request{Model: model, Messages: log}, nil); err != nil {
		t.Fatalf("replay refused: %v", err)
	}
	replayed := srv.Requests()[1].Messages[1]
	if replayed.Thinking != thought || replayed.ThinkingSignature != res.Message.ThinkingSignature {
		t.Fatalf("replayed thinking %q sig %q", replayed.Thinking, replayed.ThinkingSignature)
	}
	var wire struct {
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(srv.Requests()[1].Raw, &wire); err != nil {
		t.Fatal(err)
	}
	if first := wire.Messages[1].Content[0]; first["type"] != "thinking" {
		t.Errorf("assistant content starts with %v, want the thinking block first", first["type"])
	}

	// The fake, like the API, refuses thinking that was edited.
	edited := res.Message
	edited.Thinking += " "
	log[1] = edited
	_, err = c.Stream(context.Background(), providers.Request{Model: model, Messages: log}, nil)
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || pe.TooLong || pe.Retryable || !strings.Contains(pe.Body, "Invalid `signature`") {
		t.Fatalf("edited thinking: err %v", err)
	}

	// Thinking another model wrote is not sent to this one.
	other := res.Message
	other.Model = "anthropic/claude-other"
	log[1] = other
	if _, err := c.Stream(context.Background(), providers.Request{Model: model, Messages: log}, nil); err != nil {
		t.Fatal(err)
	}
	if raw := string(srv.Requests()[3].Raw); strings.Contains(raw, `"type":"thinking"`) {
		t.Errorf("thinking of another model replayed: %s", raw)
	}
}

func TestErrors(t *testing.T) {
	overloaded := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	// About 1,250 tokens by the fake's count; windows below 256 are not
	// believed by the detector, so the test windows are realistic.
	long := strings.Repeat("a long question about everything ", 150)
	tests := map[string]struct {
		opts      anthropicfake.Options
		maxTokens int
		check     func(t *testing.T, e *providers.Error, sent testkit.Received)
	}{
		"prompt too long names window and size": {
			opts: anthropicfake.Options{Window: 1000},
			check: func(t *testing.T, e *providers.Error, sent testkit.Received) {
				if !e.TooLong || e.Window != 1000 || e.Status != 400 || e.Retryable || e.Requested != sent.InputTokens {
					t.Errorf("%+v", e)
				}
			},
		},
		"input plus max_tokens over the window counts output": {
			opts:      anthropicfake.Options{Window: 2000, CountOutput: true},
			maxTokens: 1990,
			check: func(t *testing.T, e *providers.Error, sent testkit.Received) {
				if !e.TooLong || e.Window != 2000 || !e.CountsOutput {
					t.Errorf("%+v", e)
				}
			},
		},
		"overloaded 529 is retryable, not too long": {
			opts: anthropicfake.Options{Script: testkit.Always(testkit.Reply{Status: 529, Body: overloaded})},
			check: func(t *testing.T, e *providers.Error, sent testkit.Received) {
				if !e.Retryable || e.TooLong || e.Status != 529 || e.Body != overloaded {
					t.Errorf("%+v", e)
				}
			},
		},
		"error event after HTTP 200 is classified with status 200": {
			opts: anthropicfake.Options{Script: testkit.Always(testkit.Reply{StreamError: overloaded})},
			check: func(t *testing.T, e *providers.Error, sent testkit.Received) {
				if !e.Retryable || e.TooLong || e.Status != http.StatusOK || !strings.Contains(e.Body, "overloaded_error") {
					t.Errorf("%+v", e)
				}
			},
		},
		"rate limit 429 is retryable, not too long": {
			opts: anthropicfake.Options{Script: testkit.Always(testkit.Reply{Status: 429,
				Body: `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 30,000 input tokens per minute. Please reduce the prompt length or the maximum tokens requested, or try again later."}}`})},
			check: func(t *testing.T, e *providers.Error, sent testkit.Received) {
				// The wait the API asks for is passed on, for the retry to honour.
				if !e.Retryable || e.TooLong || e.RetryAfter != anthropicfake.RateLimitWaitSeconds*time.Second {
					t.Errorf("%+v", e)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := fake(t, tc.opts)
			c := newClient(t, srv.URL(), func(cfg *Config) { cfg.Name = "claude-work" })
			_, err := c.Stream(context.Background(), providers.Request{Model: model, Messages: testkit.Ask(long), MaxTokens: tc.maxTokens}, nil)
			var e *providers.Error
			if !errors.As(err, &e) {
				t.Fatalf("err %T %v, want *providers.Error", err, err)
			}
			if e.Provider != "claude-work" {
				t.Errorf("provider %q, want the configured name", e.Provider)
			}
			tc.check(t, e, srv.Requests()[0])
		})
	}
}

func TestHangEndsWithContext(t *testing.T) {
	srv := fake(t, anthropicfake.Options{Script: testkit.Always(testkit.Reply{Hang: true})})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := newClient(t, srv.URL(), nil).Stream(ctx, providers.Request{Model: model, Messages: testkit.Ask("hi")}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want context.DeadlineExceeded", err)
	}
}

func TestBrokenStreams(t *testing.T) {
	answer := "one two three four five six seven eight nine ten"
	tests := map[string]struct {
		reply     testkit.Reply
		want      error
		retryable bool
	}{
		"cut mid-stream":       {testkit.Reply{Text: answer, ChunkRunes: 4, CutAfterChunks: 6}, ErrStreamCut, true},
		"cut before any event": {testkit.Reply{Text: answer, CutAfterChunks: 1}, ErrStreamCut, true},
		"garbage":              {testkit.Reply{Garbage: true}, ErrBadStream, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := fake(t, anthropicfake.Options{Script: testkit.Always(tc.reply)})
			var rec testkit.Events
			res, err := newClient(t, srv.URL(), nil).Stream(context.Background(), providers.Request{Model: model, Messages: testkit.Ask("count")}, rec.Emit)
			var e *providers.Error
			if !errors.Is(err, tc.want) || !errors.As(err, &e) || e.Retryable != tc.retryable {
				t.Fatalf("err %v, want %v (retryable %v)", err, tc.want, tc.retryable)
			}
			streamed, _ := rec.Joined(providers.EventText)
			if !strings.HasPrefix(answer, res.Message.Content) || res.Message.Content != streamed || !res.Message.Partial {
				t.Errorf("partial %q (streamed %q, partial=%v), want a prefix of the answer", res.Message.Content, streamed, res.Message.Partial)
			}
		})
	}
}

func TestRequestShape(t *testing.T) {
	png := []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 3}
	srv := fake(t, anthropicfake.Options{})
	c := newClient(t, srv.URL(), nil)
	log := []chat.Message{
		{Role: chat.RoleUser, Content: "What is in this picture?", Images: []chat.Image{{MediaType: "image/png", Data: png}}},
		{Role: chat.RoleAssistant, Content: ""}, // nothing to send: left out
		{Role: chat.RoleUser, Content: "Be detailed."},
	}
	if _, err := c.Stream(context.Background(), providers.Request{Model: model, Messages: log, MaxTokens: 333}, nil); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	if got.MaxTokens != 333 || got.Model != model {
		t.Errorf("max_tokens %d model %q", got.MaxTokens, got.Model)
	}
	// The two user messages merge into one wire message; the fake reads
	// its text blocks back joined by a newline.
	if len(got.Messages) != 1 || got.Messages[0].Content != "What is in this picture?\nBe detailed." {
		t.Fatalf("messages %+v", got.Messages)
	}
	if imgs := got.Messages[0].Images; len(imgs) != 1 || string(imgs[0].Data) != string(png) || imgs[0].MediaType != "image/png" {
		t.Errorf("image %+v", imgs)
	}
}

func TestThinkingSetting(t *testing.T) {
	tests := map[string]struct {
		mode      string
		budget    int
		maxTokens int
		want      string // the "thinking" field as sent, "" for none
	}{
		"off":                                  {ThinkingOff, 0, 8192, ""},
		"adaptive":                             {ThinkingAdaptive, 0, 8192, `{"type":"adaptive"}`},
		"enabled with default budget":          {ThinkingEnabled, 0, 8192, `{"budget_tokens":4096,"type":"enabled"}`},
		"budget halved under small max_tokens": {ThinkingEnabled, 4096, 3000, `{"budget_tokens":1500,"type":"enabled"}`},
		"dropped below the 1024 minimum":       {ThinkingEnabled, 4096, 2000, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, "http://127.0.0.1:1", func(cfg *Config) { cfg.Thinking, cfg.ThinkingBudget = tc.mode, tc.budget })
			p, err := c.params(providers.Request{Model: model, Messages: testkit.Ask("x"), MaxTokens: tc.maxTokens})
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			if string(m["thinking"]) != tc.want {
				t.Errorf("thinking %s, want %s", m["thinking"], tc.want)
			}
		})
	}
}

func TestNewRejectsBadThinking(t *testing.T) {
	if _, err := New(Config{Thinking: "always"}); !errors.Is(err, ErrConfig) {
		t.Fatalf("err %v, want ErrConfig", err)
	}
}

func TestModels(t *testing.T) {
	entries := []anthropicfake.ModelEntry{
		{ID: "claude-opus-4-5-20251101", MaxInputTokens: 200_000, MaxTokens: 64_000, Vision: true},
		{ID: "claude-sonnet-4-6", MaxInputTokens: 1_000_000, MaxTokens: 128_000, Vision: true},
		{ID: "claude-text-only", MaxInputTokens: 100_000, MaxTokens: 4_096},
	}
	// A page size of 2 makes the adapter follow after_id to see all three.
	srv := fake(t, anthropicfake.Options{Models: entries, PageSize: 2})

	t.Run("everything listed", func(t *testing.T) {
		got, err := newClient(t, srv.URL(), nil).Models(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(entries) {
			t.Fatalf("%d models, want %d: %+v", len(got), len(entries), got)
		}
		for i, e := range entries {
			want := providers.ModelInfo{Provider: "anthropic", ID: e.ID, Window: e.MaxInputTokens, WindowSource: providers.SourceList,
				MaxOutput: e.MaxTokens, Vision: e.Vision, Loaded: true}
			if got[i] != want {
				t.Errorf("model %d = %+v, want %+v", i, got[i], want)
			}
		}
	})

	t.Run("configured models, with config and default windows", func(t *testing.T) {
		c := newClient(t, srv.URL(), func(cfg *Config) {
			cfg.Models = []string{"claude-sonnet-4-6", "claude-private", "claude-unknown"}
			cfg.Windows = map[string]int{"claude-private": 32_000, "claude-sonnet-4-6": 5}
		})
		got, err := c.Models(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			window int
			source string
		}{{1_000_000, providers.SourceList}, {32_000, providers.SourceConfig}, {providers.DefaultRemoteWindow, providers.SourceDefault}}
		for i, w := range want {
			if got[i].Window != w.window || got[i].WindowSource != w.source {
				t.Errorf("%s: window %d from %s, want %d from %s", got[i].ID, got[i].Window, got[i].WindowSource, w.window, w.source)
			}
		}
	})

	// The list shows dated ids; an alias, as the company table and most
	// configs name a model, is resolved by GET /v1/models/{model_id}
	// (https://docs.anthropic.com/en/api/models).
	t.Run("configured alias takes the figures of the model it names", func(t *testing.T) {
		haiku := anthropicfake.ModelEntry{ID: "claude-haiku-4-5-20251001", Aliases: []string{"claude-haiku-4-5"}, MaxInputTokens: 200_000, MaxTokens: 64_000, Vision: true}
		aliased := fake(t, anthropicfake.Options{Models: append(slices.Clone(entries), haiku)})
		c := newClient(t, aliased.URL(), func(cfg *Config) { cfg.Models = []string{"claude-haiku-4-5", "claude-unknown"} })
		got, err := c.Models(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := []providers.ModelInfo{
			{Provider: "anthropic", ID: "claude-haiku-4-5", Window: 200_000, WindowSource: providers.SourceList, MaxOutput: 64_000, Vision: true, Loaded: true},
			{Provider: "anthropic", ID: "claude-unknown", Window: providers.DefaultRemoteWindow, WindowSource: providers.SourceDefault, Loaded: true},
		}
		if !slices.Equal(got, want) {
			t.Errorf("got  %+v\nwant %+v", got, want)
		}
	})

	noList := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(noList.Close)
	t.Run("no list endpoint falls back to config", func(t *testing.T) {
		c := newClient(t, noList.URL, func(cfg *Config) { cfg.Models = []string{"claude-x"} })
		got, err := c.Models(context.Background())
		if err != nil || len(got) != 1 || got[0].WindowSource != providers.SourceDefault {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	t.Run("no list endpoint and no config is an error", func(t *testing.T) {
		_, err := newClient(t, noList.URL, nil).Models(context.Background())
		var e *providers.Error
		if !errors.As(err, &e) || e.Status != http.StatusNotFound {
			t.Fatalf("err %v", err)
		}
	})
}

// TestCacheBreakpointsAreReadBack: the request marks tools, system, the
// first and the newest message (four marks, the API's most), and the next
// request of the same chat, one exchange longer, is billed as a cache read
// of everything the first one held; the usage still counts the whole prompt.
func TestCacheBreakpointsAreReadBack(t *testing.T) {
	srv := fake(t, anthropicfake.Options{Script: testkit.Always(testkit.Reply{Text: "ok"})})
	c := newClient(t, srv.URL(), nil)
	tools := []chat.ToolSpec{{Name: "get_weather", Description: "Weather of a city.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}
	system := strings.Repeat("Answer briefly and cite the source. ", 200)
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "<earlier-in-this-chat>summary</earlier-in-this-chat> first question"},
		{Role: chat.RoleAssistant, Content: "first answer"}, {Role: chat.RoleUser, Content: "second question"}}
	first, err := c.Stream(context.Background(), providers.Request{Model: model, System: system, Tools: tools, Messages: msgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(srv.Requests()[0].Raw, []byte(`"cache_control"`)) != 4 {
		t.Fatalf("want 4 cache_control marks in %s", srv.Requests()[0].Raw)
	}
	msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: "second answer"}, chat.Message{Role: chat.RoleUser, Content: "third"})
	second, err := c.Stream(context.Background(), providers.Request{Model: model, System: system, Tools: tools, Messages: msgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Usage.CachedTokens != 0 || second.Usage.CachedTokens != first.Usage.InputTokens {
		t.Fatalf("cached %d then %d, want 0 then the first prompt's %d", first.Usage.CachedTokens, second.Usage.CachedTokens, first.Usage.InputTokens)
	}
	if got := srv.Requests()[1].InputTokens; second.Usage.InputTokens != got {
		t.Fatalf("usage input %d, want the whole prompt %d", second.Usage.InputTokens, got)
	}
}
