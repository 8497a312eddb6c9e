package anthropicfake

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
)

func post(t *testing.T, s *Server, body string) (int, string) {
	t.Helper()
	res, err := http.Post(s.URL()+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// The refusals the real API gives for a malformed conversation; the
// adapter tests rely on the fake giving them too.
func TestRefusals(t *testing.T) {
	toolUse := `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]}`
	tests := map[string]struct {
		opts Options
		body string
		want string // substring of the 400 body; "" means 200
	}{
		"tool result answers the call": {
			body: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"go"},` + toolUse + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"done"}]}]}`,
		},
		"call left unanswered": {
			body: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"go"},` + toolUse + `,{"role":"user","content":"next"}]}`,
			want: "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1.",
		},
		"result for no call": {
			body: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"x"}]}]}`,
			want: "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9.",
		},
		"max_tokens missing": {
			body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			want: "max_tokens: Field required",
		},
		"thinking with a forged signature": {
			body: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"forged"},{"type":"text","text":"a"}]},{"role":"user","content":"more"}]}`,
			want: "messages.1.content.0: Invalid `signature` in `thinking` block",
		},
		"over the window": {
			opts: Options{Window: 3},
			body: `{"model":"m","max_tokens":10,"system":"you are a careful assistant","messages":[{"role":"user","content":"hello"}]}`,
			// Counted input: the system prompt plus the user text, each by the
			// neutral rule, named with the window in the real wording.
			want: "prompt is too long: " + strconv.Itoa(testkit.CountTokens("you are a careful assistant")+testkit.CountTokens("hello")) + " tokens > 3 maximum",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := New(tc.opts)
			defer s.Close()
			status, body := post(t, s, tc.body)
			if tc.want == "" {
				if status != http.StatusOK {
					t.Fatalf("status %d: %s", status, body)
				}
				return
			}
			if status != http.StatusBadRequest || !strings.Contains(body, tc.want) || !strings.Contains(body, `"type":"invalid_request_error"`) {
				t.Fatalf("status %d body %s, want 400 with %q", status, body, tc.want)
			}
		})
	}
}

func TestNonStreaming(t *testing.T) {
	s := New(Options{Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Thinking: "hmm", Text: "hi", ToolCalls: []chat.ToolCall{{ID: "toolu_x", Name: "f", Arguments: `{"a":1}`}}}
	}})
	defer s.Close()
	status, body := post(t, s, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hello there"}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var msg struct {
		Type       string            `json:"type"`
		StopReason string            `json:"stop_reason"`
		Content    []json.RawMessage `json:"content"`
		Usage      struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil {
		t.Fatal(err)
	}
	wantOut := testkit.CountTokens("hmm") + testkit.CountTokens("hi") + testkit.CountTokens(`{"a":1}`)
	if msg.Type != "message" || msg.StopReason != "tool_use" || len(msg.Content) != 3 ||
		msg.Usage.InputTokens != testkit.CountTokens("hello there") || msg.Usage.OutputTokens != wantOut {
		t.Fatalf("message %s", body)
	}
	if !strings.Contains(string(msg.Content[0]), Sign("hmm")) {
		t.Errorf("thinking block without its signature: %s", msg.Content[0])
	}
}
