package openaifake

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
)

func post(t *testing.T, s *Server, body string) *http.Response {
	t.Helper()
	res, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// events reads an SSE body into its data payloads.
func events(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not an SSE data line", line)
		}
		out = append(out, data)
	}
	return out
}

func TestStreamFraming(t *testing.T) {
	call := chat.ToolCall{ID: "call_9", Name: "get_weather", Arguments: `{"location":"Paris, France"}`}
	s := New(Options{Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "Looking.", ToolCalls: []chat.ToolCall{call}, ChunkRunes: 4}
	}})
	defer s.Close()
	for _, includeUsage := range []bool{true, false} {
		opts := ``
		if includeUsage {
			opts = `,"stream_options":{"include_usage":true}`
		}
		res := post(t, s, `{"model":"m","stream":true,"messages":[{"role":"user","content":"weather?"}]`+opts+`}`)
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("content type %q", ct)
		}
		ev := events(t, res.Body)
		if ev[len(ev)-1] != "[DONE]" {
			t.Fatalf("last event %q, want [DONE]", ev[len(ev)-1])
		}
		var args strings.Builder
		argChunks, usageChunks, finish := 0, 0, ""
		for _, e := range ev[:len(ev)-1] {
			var c struct {
				Object  string          `json:"object"`
				Usage   json.RawMessage `json:"usage"`
				Choices []struct {
					Delta struct {
						ToolCalls []struct {
							Index    int `json:"index"`
							Function struct {
								Arguments string `json:"arguments"`
							} `json:"function"`
						} `json:"tool_calls"`
					} `json:"delta"`
					FinishReason *string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(e), &c); err != nil {
				t.Fatalf("chunk %s: %v", e, err)
			}
			if c.Object != "chat.completion.chunk" {
				t.Errorf("object %q", c.Object)
			}
			if len(c.Usage) > 0 && string(c.Usage) != "null" {
				usageChunks++
				if len(c.Choices) != 0 {
					t.Errorf("usage chunk has choices: %s", e)
				}
			}
			for _, ch := range c.Choices {
				for _, tc := range ch.Delta.ToolCalls {
					if tc.Function.Arguments != "" {
						argChunks++
					}
					args.WriteString(tc.Function.Arguments)
				}
				if ch.FinishReason != nil {
					finish = *ch.FinishReason
				}
			}
		}
		if args.String() != call.Arguments || argChunks < 2 {
			t.Errorf("arguments %q in %d chunks; want %q split across several", args.String(), argChunks, call.Arguments)
		}
		if finish != "tool_calls" {
			t.Errorf("finish %q", finish)
		}
		if want := map[bool]int{true: 1, false: 0}[includeUsage]; usageChunks != want {
			t.Errorf("include_usage %v: %d usage chunks, want %d", includeUsage, usageChunks, want)
		}
	}
}

func TestTooLongBody(t *testing.T) {
	s := New(Options{Window: 10})
	defer s.Close()
	res := post(t, s, `{"model":"m","messages":[{"role":"user","content":"one two three four five six seven eight nine ten eleven twelve"}]}`)
	body, _ := io.ReadAll(res.Body)
	// 12 words, 62 bytes: CountTokens gives max(12, (62+3)/4) = 16.
	want := `{"error":{"code":"context_length_exceeded","message":"This model's maximum context length is 10 tokens. However, your messages resulted in 16 tokens. Please reduce the length of the messages.","param":null,"type":"invalid_request_error"}}`
	if res.StatusCode != 400 || strings.TrimSpace(string(body)) != want {
		t.Errorf("status %d body %s\nwant 400 %s", res.StatusCode, body, want)
	}
}

func TestWholeAnswerAndReceived(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	res := post(t, s, `{"model":"m","max_completion_tokens":50,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAEC"}}]}],"tools":[{"type":"function","function":{"name":"clock","parameters":{"type":"object"}}}]}`)
	var c struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(res.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	if c.Object != "chat.completion" || c.Choices[0].Message.Content != DefaultAnswer || c.Choices[0].FinishReason != "stop" || c.Usage.CompletionTokens != testkit.CountTokens(DefaultAnswer) {
		t.Errorf("answer %+v", c)
	}
	r := s.Requests()[0]
	if r.System != "be brief" || r.MaxTokens != 50 || len(r.Tools) != 1 || r.Tools[0] != "clock" {
		t.Errorf("received %+v", r)
	}
	if imgs := r.Messages[0].Images; len(imgs) != 1 || !bytes.Equal(imgs[0].Data, []byte{0, 1, 2}) || imgs[0].MediaType != "image/png" {
		t.Errorf("image %+v", imgs)
	}
	// Every text counted: "be brief" 2, "see" 1, "clock" 2 (5 bytes), schema
	// `{"type":"object"}` 5 (17 bytes).
	if r.InputTokens != 2+1+2+5 {
		t.Errorf("input tokens %d, want 10", r.InputTokens)
	}
}

func TestModelList(t *testing.T) {
	s := New(Options{Models: []ModelEntry{{ID: "a", Window: 8192, WindowField: "max_model_len"}, {ID: "b", Window: 4096}, {ID: "c"}}})
	defer s.Close()
	res, err := http.Get(s.URL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var l struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	if l.Object != "list" || len(l.Data) != 3 || l.Data[0]["max_model_len"] != float64(8192) || l.Data[1]["context_length"] != float64(4096) {
		t.Errorf("list %+v", l)
	}
	if _, ok := l.Data[2]["context_length"]; ok {
		t.Errorf("a model without a window names one: %v", l.Data[2])
	}
}

// TestCachedTokensByOpenAIRule: a request that repeats an earlier one's
// prefix of 1,024 tokens or more reports it cached, in 128-token steps; a
// changed system prompt or tool list in front breaks it.
func TestCachedTokensByOpenAIRule(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	long := strings.Repeat("word ", 1300)
	tool := `"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}]`
	cached := func(system, tools, rest string) int {
		t.Helper()
		res := post(t, s, `{"model":"m","prompt_cache_key":"chat-1","messages":[{"role":"system","content":"`+system+`"},{"role":"user","content":"`+long+`"}`+rest+`]`+tools+`}`)
		var body struct {
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return body.Usage.PromptTokensDetails.CachedTokens
	}
	if n := cached("sys", ","+tool, ""); n != 0 {
		t.Fatalf("first request: %d cached", n)
	}
	// sys(1) + tool(1+1+5) + user(6,500 bytes: 1,625) = 1,633 shared: 1,536 counted.
	if n := cached("sys", ","+tool, `,{"role":"assistant","content":"ok"},{"role":"user","content":"more"}`); n != 1536 {
		t.Fatalf("repeated prefix: %d cached, want 1536", n)
	}
	if n := cached("sys", "", ""); n != 0 {
		t.Fatalf("tools changed: %d cached, want 0", n)
	}
	if n := cached("other", ","+tool, ""); n != 0 {
		t.Fatalf("system changed: %d cached, want 0", n)
	}
	if got := s.Requests()[0].CacheKey; got != "chat-1" {
		t.Fatalf("prompt_cache_key recorded as %q", got)
	}
}

func TestContentForms(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	res := post(t, s, `{"model":"m","messages":[{"role":"user","content":"say \"caf\u00e9\"\n"},`+
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"clock","arguments":"{}"}}]},`+
		`{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"noon"},{"type":"text","text":" sharp"}]}]}`)
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	got := s.Requests()[0].Messages
	if len(got) != 3 || got[0].Content != "say \"café\"\n" || got[1].Content != "" || len(got[1].ToolCalls) != 1 || got[2].Content != "noon sharp" {
		t.Errorf("messages %+v", got)
	}
	for _, bad := range []string{`42`, `{"text":"x"}`, `[{"type":"audio"}]`, `"unterminated`} {
		res := post(t, s, `{"model":"m","messages":[{"role":"user","content":`+bad+`}]}`)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 400 || !strings.Contains(string(body), `"type":"invalid_request_error"`) {
			t.Errorf("content %s: status %d body %s", bad, res.StatusCode, body)
		}
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("%d requests received, want only the good one", n)
	}
}

// TestAFakeThatForgetsCountsTheSameInput: Forget skips the cache's blocks,
// not the count a usage chunk reports.
func TestAFakeThatForgetsCountsTheSameInput(t *testing.T) {
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[` +
		`{"role":"system","content":"Be brief, and always answer in metric units."},` +
		`{"role":"user","content":[{"type":"text","text":"What is the weather in Paris?"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"18 degrees and clear"}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather in a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`
	promptTokens := func(forget bool) int {
		s := New(Options{Forget: forget})
		defer s.Close()
		ev := events(t, post(t, s, body).Body)
		var u struct {
			Usage *struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev[len(ev)-2]), &u); err != nil || u.Usage == nil {
			t.Fatalf("usage chunk %s: %v", ev[len(ev)-2], err)
		}
		return u.Usage.PromptTokens
	}
	kept, forgot := promptTokens(false), promptTokens(true)
	if kept == 0 || forgot != kept {
		t.Fatalf("prompt_tokens %d forgetting, %d keeping; want the same, above 0", forgot, kept)
	}
}

// TestToolListsAreReadByTheirBytes: the fake decodes each distinct tool
// list once; a request with another list, or with none, is counted by its
// own, and one list's decoding is not another's.
func TestToolListsAreReadByTheirBytes(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	type tool struct{ name, desc string }
	weather, mail := tool{"get_weather", "Weather for a place."}, tool{"send_mail", "Send a mail to someone you name."}
	type list struct {
		wire   string
		names  []string
		tokens int // of the list and of the message "hi"
	}
	listOf := func(tools ...tool) list {
		l := list{wire: "[", tokens: testkit.CountTokens("hi")}
		for i, tl := range tools {
			if i > 0 {
				l.wire += ","
			}
			l.wire += `{"type":"function","function":{"name":"` + tl.name + `","description":"` + tl.desc + `","parameters":{"type":"object"}}}`
			l.names = append(l.names, tl.name)
			l.tokens += testkit.CountTokens(tl.name) + testkit.CountTokens(tl.desc) + testkit.CountTokens(`{"type":"object"}`)
		}
		l.wire += "]"
		return l
	}
	one, two, none := listOf(weather), listOf(weather, mail), list{wire: "null", tokens: testkit.CountTokens("hi")}
	sent := []list{one, two, one, none, two}
	for _, l := range sent {
		res := post(t, s, `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":`+l.wire+`}`)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
	}
	got := s.Requests()
	if len(got) != len(sent) {
		t.Fatalf("%d requests logged, want %d", len(got), len(sent))
	}
	for i, r := range got {
		if !slices.Equal(r.Tools, sent[i].names) || r.InputTokens != sent[i].tokens {
			t.Errorf("request %d: tools %v, %d input tokens; want %v, %d", i, r.Tools, r.InputTokens, sent[i].names, sent[i].tokens)
		}
	}
}
