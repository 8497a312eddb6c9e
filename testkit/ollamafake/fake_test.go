package ollamafake

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
)

var tiny = ModelEntry{
	Name: "tiny:1b", Size: 1 << 30, Family: "llama",
	ModelInfo: map[string]any{"general.architecture": "llama", "llama.context_length": float64(2048)},
}

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// chunk is the part of an /api/chat line the tests read.
type chunk struct {
	Message struct {
		Content   string `json:"content"`
		Thinking  string `json:"thinking"`
		ToolCalls []struct {
			ID       string          `json:"id"`
			Function json.RawMessage `json:"function"`
		} `json:"tool_calls"`
	} `json:"message"`
	Done            bool   `json:"done"`
	DoneReason      string `json:"done_reason"`
	PromptEvalCount int    `json:"prompt_eval_count"`
	EvalCount       int    `json:"eval_count"`
	Error           string `json:"error"`
}

func lines(t *testing.T, body string) []chunk {
	t.Helper()
	var out []chunk
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var c chunk
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, c)
	}
	return out
}

func TestStreamFraming(t *testing.T) {
	s := New(Options{Models: []ModelEntry{tiny}, Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Thinking: "hmm", Text: "Hello world", ChunkRunes: 4,
			ToolCalls: []chat.ToolCall{{Name: "a", Arguments: `{"x":1}`}, {ID: "call_2", Name: "b", Arguments: `{}`}}}
	}})
	defer s.Close()
	const prompt = "why is the sky blue?"
	resp, body := post(t, s.URL()+"/api/chat", `{"model":"tiny:1b","messages":[{"role":"user","content":"`+prompt+`"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	cs := lines(t, body)
	var text, thinking strings.Builder
	var ids []string
	for i, c := range cs {
		if c.Done != (i == len(cs)-1) {
			t.Errorf("line %d done=%v", i, c.Done)
		}
		text.WriteString(c.Message.Content)
		thinking.WriteString(c.Message.Thinking)
		for _, tc := range c.Message.ToolCalls {
			if len(c.Message.ToolCalls) != 1 || c.Message.Content != "" {
				t.Errorf("line %d: a tool call rides alone in its chunk: %+v", i, c)
			}
			ids = append(ids, tc.ID)
		}
	}
	if text.String() != "Hello world" || thinking.String() != "hmm" {
		t.Errorf("text %q thinking %q", text.String(), thinking.String())
	}
	// "Hello world" in 4-rune pieces is 3 chunks, "hmm" 1, plus 2 calls and the final.
	if len(cs) != 3+1+2+1 {
		t.Errorf("%d lines, want 7", len(cs))
	}
	if len(ids) != 2 || ids[0] != "" || ids[1] != "call_2" {
		t.Errorf("tool call ids %q: only the scripted one is sent", ids)
	}
	last := cs[len(cs)-1]
	wantOut := testkit.CountTokens("Hello world") + testkit.CountTokens("hmm") +
		testkit.CountTokens("a") + testkit.CountTokens(`{"x":1}`) + testkit.CountTokens("b") + testkit.CountTokens(`{}`)
	if last.DoneReason != "stop" || last.PromptEvalCount != testkit.CountTokens(prompt) || last.EvalCount != wantOut {
		t.Errorf("final %+v, want stop, prompt %d, eval %d", last, testkit.CountTokens(prompt), wantOut)
	}
}

func TestWholeAnswer(t *testing.T) {
	s := New(Options{Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "Hello! How are you today?", ToolCalls: []chat.ToolCall{{Name: "f", Arguments: `{"a":"b"}`}}}
	}})
	defer s.Close()
	resp, body := post(t, s.URL()+"/api/chat", `{"model":"any","stream":false,"messages":[{"role":"user","content":"hi"}]}`)
	cs := lines(t, body)
	if resp.StatusCode != 200 || len(cs) != 1 {
		t.Fatalf("status %d, %d objects", resp.StatusCode, len(cs))
	}
	if c := cs[0]; !c.Done || c.Message.Content != "Hello! How are you today?" || len(c.Message.ToolCalls) != 1 {
		t.Errorf("answer %+v", c)
	}
}

func TestOverWindow(t *testing.T) {
	long := strings.Repeat("abcd", 300) // 300 tokens
	tests := map[string]struct {
		body       string
		wantStatus int
		wantEval   int // prompt_eval_count when 200
	}{
		// One message of 300 tokens in a 100 window: the runner cuts it to 100.
		"one long message cut to the window": {
			body:       `{"model":"tiny:1b","options":{"num_ctx":100},"messages":[{"role":"user","content":"` + long + `"}]}`,
			wantStatus: 200, wantEval: 100,
		},
		// The old message is dropped whole, the system prompt and the last
		// message kept: 2 ("be kind") + 2 ("last one") tokens.
		"old messages dropped": {
			body: `{"model":"tiny:1b","options":{"num_ctx":100},"messages":[{"role":"system","content":"be kind"},` +
				`{"role":"user","content":"` + long + `"},{"role":"user","content":"last one"}]}`,
			wantStatus: 200, wantEval: 4,
		},
		// num_ctx above the model's own 2048 is lowered to it; 300 fits.
		"num_ctx capped by the model": {
			body:       `{"model":"tiny:1b","options":{"num_ctx":100000},"messages":[{"role":"user","content":"` + long + `"}]}`,
			wantStatus: 200, wantEval: 300,
		},
		"truncate false refuses": {
			body:       `{"model":"tiny:1b","truncate":false,"options":{"num_ctx":100},"messages":[{"role":"user","content":"` + long + `"}]}`,
			wantStatus: 400,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := New(Options{Models: []ModelEntry{tiny}})
			defer s.Close()
			resp, body := post(t, s.URL()+"/api/chat", tc.body)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.wantStatus, body)
			}
			if tc.wantStatus != 200 {
				if body != bodyTooLong {
					t.Errorf("body %s", body)
				}
				return
			}
			cs := lines(t, body)
			if got := cs[len(cs)-1].PromptEvalCount; got != tc.wantEval {
				t.Errorf("prompt_eval_count %d, want %d", got, tc.wantEval)
			}
		})
	}
}

func TestListsAndLoads(t *testing.T) {
	s := New(Options{Models: []ModelEntry{tiny}})
	defer s.Close()
	get := func(path string) string {
		resp, err := http.Get(s.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if ps := get("/api/ps"); ps != `{"models":[]}` {
		t.Errorf("ps before any chat: %s", ps)
	}
	if tags := get("/api/tags"); !strings.Contains(tags, `"name":"tiny:1b"`) || !strings.Contains(tags, `"size":1073741824`) {
		t.Errorf("tags %s", tags)
	}
	resp, body := post(t, s.URL()+"/api/show", `{"model":"nope"}`)
	if resp.StatusCode != 404 || body != `{"error":"model 'nope' not found"}` {
		t.Errorf("show unknown: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, s.URL()+"/api/show", `{"model":"tiny:1b"}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"llama.context_length":2048`) {
		t.Errorf("show: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, s.URL()+"/api/chat", `{"model":"other","messages":[]}`)
	if resp.StatusCode != 404 || body != `{"error":"model \"other\" not found, try pulling it first"}` {
		t.Errorf("chat unknown: %d %s", resp.StatusCode, body)
	}

	chatWith := func(numCtx string) {
		post(t, s.URL()+"/api/chat", `{"model":"tiny:1b","options":{"num_ctx":`+numCtx+`},"messages":[{"role":"user","content":"hi"}]}`)
	}
	chatWith("1024")
	chatWith("1024")
	if n := s.Loads("tiny:1b"); n != 1 {
		t.Errorf("same num_ctx: %d loads, want 1", n)
	}
	if ps := get("/api/ps"); !strings.Contains(ps, `"context_length":1024`) {
		t.Errorf("ps after chat: %s", ps)
	}
	chatWith("2048")
	if n := s.Loads("tiny:1b"); n != 2 {
		t.Errorf("new num_ctx: %d loads, want 2 (a reload)", n)
	}
}
