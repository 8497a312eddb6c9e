package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/anthropicfake"
)

// consumeSSE runs consume over a raw event-stream body, through the SDK's
// own decoder, exactly as Stream does.
func consumeSSE(body []byte, emit func(providers.Event)) (providers.Response, error) {
	res := &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(body)),
		Request:    httptest.NewRequest(http.MethodPost, "http://fake/v1/messages", nil),
	}
	s := ssestream.NewStream[anthropic.MessageStreamEventUnion](ssestream.NewDecoder(res), nil)
	defer s.Close()
	return consume(s, providers.NewAnswerBudget(providers.Request{}), emit)
}

func sse(events ...string) []byte {
	var b strings.Builder
	for _, e := range events {
		var head struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal([]byte(e), &head)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", head.Type, e)
	}
	return []byte(b.String())
}

// A hand-written stream with what the fake never sends: a redacted block
// next to a thinking block, and message_delta carrying input and cache
// figures (cumulative, so they replace message_start's).
var redactedStream = sse(
	`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"usage":{"input_tokens":10,"cache_read_input_tokens":0,"output_tokens":1}}}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"First, "}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"the sum."}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBsig+/=="}}`,
	`{"type":"content_block_stop","index":0}`,
	`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"}}`,
	`{"type":"content_block_stop","index":1}`,
	`{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"It is 4."}}`,
	`{"type":"content_block_stop","index":2}`,
	`{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_9","name":"calc","input":{}}}`,
	`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":""}}`,
	`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"expr\": \"2"}}`,
	`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"+2\"}"}}`,
	`{"type":"content_block_stop","index":3}`,
	`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":12,"cache_read_input_tokens":3000,"output_tokens":42}}`,
	`{"type":"message_stop"}`,
)

func TestRedactedThinkingKeptAndReplayed(t *testing.T) {
	res, err := consumeSSE(redactedStream, func(providers.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage != (chat.Usage{InputTokens: 12 + 3000, OutputTokens: 42, CachedTokens: 3000}) {
		t.Errorf("usage %+v", res.Usage)
	}
	if res.FinishReason != providers.FinishToolCalls || res.Message.Content != "It is 4." {
		t.Errorf("finish %q content %q", res.FinishReason, res.Message.Content)
	}
	if want := (chat.ToolCall{ID: "toolu_9", Name: "calc", Arguments: `{"expr": "2+2"}`}); len(res.Message.ToolCalls) != 1 || res.Message.ToolCalls[0] != want {
		t.Errorf("calls %+v", res.Message.ToolCalls)
	}
	if res.Message.Thinking != "First, the sum." || !strings.HasPrefix(res.Message.ThinkingSignature, BlocksPrefix) {
		t.Fatalf("thinking %q sig %q", res.Message.Thinking, res.Message.ThinkingSignature)
	}
	msgs, err := messages("claude-x", []chat.Message{{Role: chat.RoleUser, Content: "2+2?"}, res.Message})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(msgs[1])
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"type": "thinking", "thinking": "First, the sum.", "signature": "EqQBsig+/=="},
		{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"},
	}
	for i, w := range want {
		for k, v := range w {
			if wire.Content[i][k] != v {
				t.Errorf("block %d %s = %v, want %v", i, k, wire.Content[i][k], v)
			}
		}
	}
}

func TestStreamProtocolFaults(t *testing.T) {
	start := `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"x","usage":{"input_tokens":1,"output_tokens":1}}}`
	tests := map[string]struct {
		body []byte
		want error
	}{
		"empty body":               {nil, ErrBadStream},
		"delta before its block":   {sse(start, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`), ErrBadStream},
		"block started twice":      {sse(start, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`), ErrBadStream},
		"data is not JSON":         {[]byte("event: message_start\ndata: {nope\n\n"), ErrBadStream},
		"no message_stop":          {sse(start), ErrStreamCut},
		"unknown event is ignored": {sse(start, `{"type":"future_event","x":1}`, `{"type":"message_stop"}`), nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := consumeSSE(tc.body, func(providers.Event) {})
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

// TestStreamKeepsToolInputCutByMaxTokens: a max_tokens stop inside a
// tool_use block leaves its input JSON unfinished
// (https://docs.anthropic.com/en/api/handling-stop-reasons). The answer is
// still an answer, stopped for length, with the call's input as it came: the
// turn tells a call cut by the answer room from a finished one by it.
func TestStreamKeepsToolInputCutByMaxTokens(t *testing.T) {
	body := sse(
		`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"x","usage":{"input_tokens":12,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Writing it."}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"write_file","input":{}}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"notes.md\", \"text\": \"Once upon"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":64}}`,
		`{"type":"message_stop"}`,
	)
	var emitted []chat.ToolCall
	res, err := consumeSSE(body, func(e providers.Event) {
		if e.Kind == providers.EventToolCall {
			emitted = append(emitted, *e.ToolCall)
		}
	})
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	want := chat.ToolCall{ID: "toolu_1", Name: "write_file", Arguments: `{"path": "notes.md", "text": "Once upon`}
	if len(res.Message.ToolCalls) != 1 || res.Message.ToolCalls[0] != want {
		t.Fatalf("calls %+v, want %+v", res.Message.ToolCalls, want)
	}
	if len(emitted) != 1 || emitted[0] != want {
		t.Errorf("emitted %+v, want %+v", emitted, want)
	}
	if res.FinishReason != providers.FinishLength || res.Message.Partial || res.Message.Content != "Writing it." {
		t.Errorf("finish %q partial %v content %q, want length, whole, the text", res.FinishReason, res.Message.Partial, res.Message.Content)
	}
}

func TestThinkingEncodingRoundTrip(t *testing.T) {
	tests := map[string][]thinkingBlock{
		"none":       nil,
		"one":        {{Type: "thinking", Thinking: "a \"quoted\"\nline <b>", Signature: "sig=="}},
		"two":        {{Type: "thinking", Thinking: "a", Signature: "s1"}, {Type: "thinking", Thinking: "b", Signature: "s2"}},
		"redacted":   {{Type: "redacted_thinking", Data: "opaque+/="}},
		"mixed":      {{Type: "thinking", Thinking: "ü", Signature: "s"}, {Type: "redacted_thinking", Data: "d"}},
		"empty text": {{Type: "thinking", Thinking: "", Signature: "only-sig"}},
	}
	for name, blocks := range tests {
		t.Run(name, func(t *testing.T) {
			th, sig, err := encodeThinking(blocks)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeThinking(th, sig)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(blocks) {
				t.Fatalf("%d blocks back, want %d", len(got), len(blocks))
			}
			for i := range blocks {
				if got[i] != blocks[i] {
					t.Errorf("block %d = %+v, want %+v", i, got[i], blocks[i])
				}
			}
		})
	}
}

// FuzzConsume feeds arbitrary bytes through the SDK's SSE decoder into
// consume. Whatever arrives, it must not panic, the final text must be
// exactly what was emitted, every tool call kept was emitted as kept, and
// an answer is either complete or marked partial with an error.
func FuzzConsume(f *testing.F) {
	f.Add(redactedStream)
	f.Fuzz(func(t *testing.T, body []byte) {
		var emitted strings.Builder
		var calls []chat.ToolCall
		res, err := consumeSSE(body, func(e providers.Event) {
			switch e.Kind {
			case providers.EventText:
				emitted.WriteString(e.Text)
			case providers.EventToolCall:
				calls = append(calls, *e.ToolCall)
			}
		})
		if res.Message.Content != emitted.String() {
			t.Fatalf("content %q, emitted %q", res.Message.Content, emitted.String())
		}
		if !slices.Equal(res.Message.ToolCalls, calls) {
			t.Fatalf("calls kept %+v, emitted %+v", res.Message.ToolCalls, calls)
		}
		if (err != nil) != res.Message.Partial {
			t.Fatalf("err %v but partial=%v", err, res.Message.Partial)
		}
		if _, derr := decodeThinking(res.Message.Thinking, res.Message.ThinkingSignature); derr != nil {
			t.Fatalf("kept thinking does not decode: %v", derr)
		}
	})
}

var writeSeeds = flag.Bool("write-seeds", false, "rewrite testdata/fuzz/FuzzConsume from the fake's streams")

// TestWriteFuzzSeeds records the fake's real event streams as the fuzz seed
// corpus. Run: go test ./providers/anthropic -run WriteFuzzSeeds -write-seeds
func TestWriteFuzzSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("pass -write-seeds to rewrite the corpus")
	}
	replies := map[string]testkit.Reply{
		"text":         {Text: "Hello there, how can I help?"},
		"tool_calls":   {Text: "Checking.", ToolCalls: []chat.ToolCall{{ID: "toolu_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}, {ID: "toolu_2", Name: "noop"}}, ChunkRunes: 3},
		"thinking":     {Thinking: "Two and two make four.", Text: "4"},
		"stream_error": {StreamError: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		"cut":          {Text: "one two three four five", CutAfterChunks: 5},
		"garbage":      {Garbage: true},
		"max_tokens":   {Text: "a long answer cut by the limit", Finish: "length"},
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzConsume")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, reply := range replies {
		srv := anthropicfake.New(anthropicfake.Options{Script: testkit.Always(reply)})
		body := `{"model":"claude-fake-1","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL()+"/v1/messages", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(res.Body) // a cut stream ends in an error: keep what came
		res.Body.Close()
		srv.Close()
		seed := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(seed), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestThinkingBlocksStreamAsTheyAreStored: an answer of two thinking
// blocks (a redacted one between them) streams its reasoning as the final
// Thinking holds it, the blocks a blank line apart; the stream ran them
// together, so what a watcher saw was not what was stored. Each block
// still replays its own text, which its signature covers.
func TestThinkingBlocksStreamAsTheyAreStored(t *testing.T) {
	body := sse(
		`{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"First step."}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sigA"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgB"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"Second "}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"step."}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"sigB"}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"content_block_start","index":3,"content_block":{"type":"text","text":"Done."}}`,
		`{"type":"content_block_stop","index":3}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":9}}`,
		`{"type":"message_stop"}`,
	)
	var streamed strings.Builder
	res, err := consumeSSE(body, func(ev providers.Event) {
		if ev.Kind == providers.EventThinking {
			streamed.WriteString(ev.Text)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if streamed.String() != res.Message.Thinking || res.Message.Thinking != "First step.\n\nSecond step." {
		t.Fatalf("streamed %q, stored %q; want both %q", streamed.String(), res.Message.Thinking, "First step.\n\nSecond step.")
	}
	blocks, err := decodeThinking(res.Message.Thinking, res.Message.ThinkingSignature)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 || blocks[0].Thinking != "First step." || blocks[2].Thinking != "Second step." {
		t.Fatalf("blocks to replay %+v; want each block's own text", blocks)
	}
}
