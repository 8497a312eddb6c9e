package openaifake

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden.json from the fake's current output")

// flushRecorder keeps what a handler writes, cut at each Flush: the SSE
// protocol is one flush per chunk, so the cuts are part of the output.
type flushRecorder struct {
	header  http.Header
	status  int
	pending bytes.Buffer
	flushes []string
}

func (r *flushRecorder) Header() http.Header { return r.header }

func (r *flushRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *flushRecorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.pending.Write(b)
}

func (r *flushRecorder) Flush() {
	r.flushes = append(r.flushes, r.pending.String())
	r.pending.Reset()
}

// served is one request's answer as the golden files keep it.
type served struct {
	Status  int         `json:"status"`
	Header  http.Header `json:"header"`
	Flushes []string    `json:"flushes"`
	// Unflushed is what was written after the last flush.
	Unflushed string `json:"unflushed"`
}

// created is the one field of the output that is the clock's.
var created = regexp.MustCompile(`"created":\d+`)

func serve(s *Server, body string) served {
	w := &flushRecorder{header: http.Header{}}
	s.chat(w, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body)))
	out := served{Status: w.status, Header: w.header, Unflushed: created.ReplaceAllString(w.pending.String(), `"created":0`)}
	for _, f := range w.flushes {
		out.Flushes = append(out.Flushes, created.ReplaceAllString(f, `"created":0`))
	}
	return out
}

// golden compares got with testdata/name.golden.json, or writes it with
// -update.
func golden(t *testing.T, name string, got any) {
	t.Helper()
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	path := filepath.Join("testdata", name+".golden.json")
	if *updateGolden {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("%s differs from the fake's recorded output:\n%s", path, b)
	}
}

// awkward is text that tests the encoder's escaping: quotes, backslashes,
// control bytes, HTML characters, the JavaScript line separators,
// multi-byte runes and an invalid byte.
const awkward = "He said \"hi\\there\"\n\ttab\r\x01\x1f <b>&amp;</b> \u2028\u2029 café 日本語 🙂 \xff end"

// TestStreamedBytesAreTheRecordedOnes: the fake streams, byte for byte and
// flush for flush, what testdata/stream.golden.json recorded of it.
func TestStreamedBytesAreTheRecordedOnes(t *testing.T) {
	streamed := `{"model":"gpt-golden","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	noUsage := `{"model":"gpt-golden","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	whole := `{"model":"gpt-golden","messages":[{"role":"user","content":"hi"}]}`
	calls := []chat.ToolCall{
		{ID: "call_a", Name: "get_weather", Arguments: `{"location":"Paris, France","unit":"c"}`},
		{Name: "send_mail", Arguments: `{"to":"a@b.c","body":"<hi> & \"bye\"\n"}`},
	}
	cases := []struct {
		name  string
		opts  Options
		reply testkit.Reply
		body  string
	}{
		{"text", Options{}, testkit.Reply{Text: "Noted; here is a short answer to that.", ChunkRunes: 8}, streamed},
		{"text awkward", Options{}, testkit.Reply{Text: awkward, ChunkRunes: 5}, streamed},
		{"text without usage", Options{}, testkit.Reply{Text: "Short.", ChunkRunes: 3}, noUsage},
		{"empty", Options{}, testkit.Reply{}, streamed},
		{"reasoning_content", Options{}, testkit.Reply{Thinking: "Let me think: " + awkward, Text: "Done.", ChunkRunes: 6}, streamed},
		{"reasoning", Options{ReasoningField: "reasoning"}, testkit.Reply{Thinking: "Thinking it over.", Text: "Done.", ChunkRunes: 6}, streamed},
		{"refusal", Options{}, testkit.Reply{Refusal: "I can't <help> with \"that\".", ChunkRunes: 7}, streamed},
		{"tool calls", Options{}, testkit.Reply{Text: "Looking.", ToolCalls: calls, ChunkRunes: 9}, streamed},
		{"tool calls without usage", Options{}, testkit.Reply{ToolCalls: calls[1:], ChunkRunes: 100}, noUsage},
		{"finish length", Options{}, testkit.Reply{Text: "Cut", Finish: "length"}, streamed},
		{"usage given", Options{}, testkit.Reply{Text: "ok", Usage: &chat.Usage{InputTokens: 1234, OutputTokens: 56, CachedTokens: 1024, ReasoningTokens: 7}}, streamed},
		{"stream error", Options{}, testkit.Reply{StreamError: "overloaded <now>"}, streamed},
		{"stream error json", Options{}, testkit.Reply{StreamError: `{"error":{"message":"boom"}}`}, streamed},
		{"garbage", Options{}, testkit.Reply{Garbage: true}, streamed},
		{"status", Options{}, testkit.Reply{Status: 429, Body: `{"error":{"message":"slow down"}}`}, streamed},
		{"whole", Options{}, testkit.Reply{Thinking: "hm", Text: awkward, ToolCalls: calls}, whole},
		{"too long", Options{Window: 3}, testkit.Reply{Text: "never"}, streamed},
	}
	got := map[string]served{}
	for _, c := range cases {
		c.opts.Script = func(testkit.Received) testkit.Reply { return c.reply }
		s := New(c.opts)
		got[c.name] = serve(s, c.body)
		s.Close()
	}
	golden(t, "stream", got)
}

// TestReceivedIsTheRecordedOne: what the fake reads of a run of requests
// (the record a script gets, its counted input and cached tokens) is what
// testdata/received.golden.json recorded of it.
func TestReceivedIsTheRecordedOne(t *testing.T) {
	long := strings.Repeat("a long instruction, repeated so the prefix is cached. ", 120)
	tools := `[{"type":"function","function":{"name":"get_weather","description":"The weather \"now\" in a city.\n","parameters":{"type":"object","properties":{"city":{"type":"string","description":"caf\u00e9 <b>"}}}}},` +
		`{"type":"function","function":{"name":"clock","parameters":{"type":"object"}}}]`
	bodies := []string{
		`{"model":"m","max_tokens":10,"prompt_cache_key":"k1","messages":[{"role":"system","content":"` + long + `"},{"role":"user","content":"first \"question\"\n"}],"tools":` + tools + `}`,
		`{"model":"m","max_completion_tokens":20,"max_tokens":10,"prompt_cache_key":"k1","messages":[{"role":"system","content":"` + long + `"},{"role":"user","content":"first \"question\"\n"},` +
			`{"role":"assistant","content":null,"reasoning_content":"thinking \u00e9","tool_calls":[{"id":"c1","type":"function","function":{"name":"clock","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","name":"clock","content":[{"type":"text","text":"noon"},{"type":"text","text":" sharp"}]},` +
			`{"role":"tool","tool_call_id":"c2","content":"18 degrees"},` +
			`{"role":"developer","content":"a late instruction"},` +
			`{"role":"assistant","content":"ok","reasoning":"openrouter's field"},` +
			`{"role":"user","content":[{"type":"text","text":"see this"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAEC"}}]}],"tools":` + tools + `,"unknown_field":{"nested":[1,2,{"x":null}]}}`,
		`{"model":"m","messages":[{"role":"system","content":"` + long + `"},{"role":"system","content":"second system"},{"role":"user","content":"no tools"}],"tools":null}`,
		`{"model":"m","messages":[{"role":"user","content":"` + long + `"}],"tools":[]}`,
		`{"model":"m","messages":[{"role":"user","content":"` + long + `"},{"role":"assistant","content":""}]}`,
	}
	s := New(Options{})
	defer s.Close()
	for _, b := range bodies {
		if res := serve(s, b); res.Status != http.StatusOK {
			t.Fatalf("status %d: %s", res.Status, res.Unflushed)
		}
	}
	got := s.Requests()
	for i := range got {
		got[i].Raw = nil
	}
	golden(t, "received", got)

	// Refused requests: none logged, each answered with its own error.
	refused := map[string]served{}
	for _, bad := range []string{
		`not json`,
		`{"model":"m","messages":[{"role":"user","content":42}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"audio"}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x/y.png"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":{"not":"a list"}}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"x"}}]`,
	} {
		refused[bad] = serve(s, bad)
	}
	if n := len(s.Requests()); n != len(bodies) {
		t.Errorf("%d requests logged, want %d", n, len(bodies))
	}
	golden(t, "refused", refused)
}
