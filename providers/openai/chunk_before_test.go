package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
)

// The decoder this package used before decodeChunk and chunkStream, kept as
// the reference they are held to: the SDK's ssestream.Stream, whose Next
// checked each event with encoding/json and then called oldChunk's
// UnmarshalJSON, which decoded it again.
type oldChunk struct {
	Choices []oldChoice `json:"choices"`
	Usage   *oldUsage   `json:"usage"`
	raw     []byte
}

type oldChoice struct {
	Index        oldInt   `json:"index"`
	Delta        oldDelta `json:"delta"`
	FinishReason oldText  `json:"finish_reason"`
}

type oldDelta struct {
	Content          oldText        `json:"content"`
	ReasoningContent string         `json:"reasoning_content"`
	Reasoning        string         `json:"reasoning"`
	ToolCalls        []oldCallDelta `json:"tool_calls"`
}

type oldCallDelta struct {
	Index    *oldInt `json:"index"`
	ID       oldText `json:"id"`
	Function struct {
		Name      oldText `json:"name"`
		Arguments oldText `json:"arguments"`
	} `json:"function"`
}

type oldUsage struct {
	valid               bool
	PromptTokens        oldInt `json:"prompt_tokens"`
	CompletionTokens    oldInt `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens oldInt `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
}

func (c *oldChunk) UnmarshalJSON(b []byte) error {
	t := bytes.TrimLeft(b, " \t\r\n")
	if bytes.HasPrefix(t, []byte("null")) {
		return nil
	}
	type plain oldChunk
	err := json.Unmarshal(b, (*plain)(c))
	if err != nil && (len(t) == 0 || t[0] != '{' || !oldWrongType(err)) {
		return err
	}
	for _, ch := range c.Choices {
		if strings.EqualFold(string(ch.FinishReason), "error") {
			c.raw = bytes.Clone(b)
		}
	}
	return nil
}

func (u *oldUsage) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '{' {
		return nil
	}
	type plain oldUsage
	if err := json.Unmarshal(b, (*plain)(u)); err != nil && !oldWrongType(err) {
		return err
	}
	u.valid = true
	return nil
}

func oldWrongType(err error) bool {
	var typ *json.UnmarshalTypeError
	return errors.As(err, &typ)
}

type oldText string

func (s *oldText) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 1 && b[0] == '"' && bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b):
		*s = oldText(b[1 : len(b)-1])
	case len(b) > 0 && b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = oldText(v)
	case string(b) != "null":
		*s = oldText(b)
	}
	return nil
}

type oldInt int64

func (n *oldInt) UnmarshalJSON(b []byte) error {
	*n = oldInt(parseLenientInt(b, lenientInt(*n)))
	return nil
}

// current is an oldChunk as a chunk, for one view of both.
func (c oldChunk) current() chunk {
	out := chunk{raw: c.raw}
	if c.Usage != nil {
		u := c.Usage
		out.Usage = &chunkUsage{valid: u.valid, PromptTokens: lenientInt(u.PromptTokens), CompletionTokens: lenientInt(u.CompletionTokens),
			PromptCacheHitTokens: u.PromptCacheHitTokens}
		out.Usage.PromptTokensDetails.CachedTokens = lenientInt(u.PromptTokensDetails.CachedTokens)
	}
	for _, ch := range c.Choices {
		d := delta{Content: lenientText(ch.Delta.Content), ReasoningContent: ch.Delta.ReasoningContent, Reasoning: ch.Delta.Reasoning}
		for _, tc := range ch.Delta.ToolCalls {
			n := toolCallDelta{ID: lenientText(tc.ID)}
			if tc.Index != nil {
				i := lenientInt(*tc.Index)
				n.Index = &i
			}
			n.Function.Name, n.Function.Arguments = lenientText(tc.Function.Name), lenientText(tc.Function.Arguments)
			d.ToolCalls = append(d.ToolCalls, n)
		}
		out.Choices = append(out.Choices, choice{Index: lenientInt(ch.Index), Delta: d, FinishReason: lenientText(ch.FinishReason)})
	}
	return out
}

// oldDecode is how the SDK's stream decoded one event's data.
func oldDecode(b []byte) (chunk, error) {
	var c oldChunk
	err := json.Unmarshal(b, &c)
	return c.current(), err
}

// fullView is chunkView and the text an error finish keeps.
func fullView(ch chunk) string { return chunkView(ch) + fmt.Sprintf("raw %q", ch.raw) }

// errorClass is what Client.failure makes of a stream's error, old or new.
func errorClass(err error) string {
	var se *ssestream.StreamError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var bad *chunkError
	switch {
	case err == nil:
		return "none"
	case errors.As(err, &se):
		return "stream error " + string(se.Event.Data) + " " + se.Message
	case errors.As(err, &syn), errors.As(err, &typ), errors.As(err, &bad):
		return "not chunks"
	case providers.Unreachable(err):
		return "unreachable"
	}
	return "interrupted"
}

// readStreams reads one SSE body with the SDK's stream over oldChunk and
// with chunkStream: the chunks' views, one a line, then the error's class.
func readStreams(body []byte) (old, got string) {
	res := func() *http.Response {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(&pieceReader{r: bytes.NewReader(body), n: 7})}
	}
	var o, n strings.Builder
	st := ssestream.NewStream[oldChunk](ssestream.NewDecoder(res()), nil)
	for st.Next() {
		o.WriteString(fullView(st.Current().current()) + "\n")
	}
	o.WriteString(errorClass(st.Err()))
	cs := newChunkStream(ssestream.NewDecoder(res()), nil)
	for cs.next() {
		n.WriteString(fullView(cs.cur) + "\n")
	}
	n.WriteString(errorClass(cs.err))
	return o.String(), n.String()
}

// beforeBodies are the SSE bodies the decoders are held to each other on:
// the FuzzStreamParse seeds (shapes of real servers) and what the
// OpenAI-style fake streams.
func beforeBodies(t testing.TB) [][]byte {
	var out [][]byte
	dir := filepath.Join("testdata", "fuzz", "FuzzStreamParse")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		out = append(out, seed(t, e.Name()))
	}
	replies := []testkit.Reply{
		{Text: "Hello <b>&</b> \"quoted\"\nnew line, é, 日本語, \u2028 and a tab\t.", Thinking: "Let me think\\about it."},
		{ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"location":"Paris","units":["c"]}`}, {Name: "clock", Arguments: "{}"}}},
		{Text: "cut short", Finish: "length", Usage: &chat.Usage{InputTokens: 9, OutputTokens: 2, CachedTokens: 1}},
		{StreamError: "This model's maximum context length is 10 tokens."},
		{StreamError: `{"error":{"message":"overloaded","code":529}}`},
		{Garbage: true},
	}
	for _, field := range []string{"reasoning_content", "reasoning"} {
		i := 0
		fake := openaifake.New(openaifake.Options{ReasoningField: field, Script: func(testkit.Received) testkit.Reply {
			return replies[i%len(replies)]
		}})
		for i = range replies {
			req := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"q"}]}`
			res, err := http.Post(fake.URL()+"/chat/completions", "application/json", strings.NewReader(req))
			if err != nil {
				fake.Close()
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			out = append(out, b)
		}
		fake.Close()
	}
	return out
}

// TestChunkStreamsReadAsBefore: every seed body and every body the fake
// streams reads as the SDK's stream read it over the old decoder: the same
// chunks, and the same class of error where it failed.
func TestChunkStreamsReadAsBefore(t *testing.T) {
	bodies := beforeBodies(t)
	if len(bodies) < 20 {
		t.Fatalf("%d bodies", len(bodies))
	}
	chunks := 0
	for _, b := range bodies {
		old, got := readStreams(b)
		if got != old {
			t.Errorf("%q\n got %s\nwant %s", b, got, old)
		}
		chunks += strings.Count(old, "\n")
	}
	if chunks < 50 {
		t.Errorf("only %d chunks compared", chunks)
	}
}

func FuzzChunkStreamsReadAsBefore(f *testing.F) {
	for _, b := range beforeBodies(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if old, got := readStreams(body); got != old {
			t.Fatalf("%q\n got %s\nwant %s", body, got, old)
		}
	})
}

// FuzzChunkReadsAsBefore holds decodeChunk to the old decoder on one
// event's data: the same chunk, or both an error that is not a chunk.
func FuzzChunkReadsAsBefore(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	for _, b := range beforeBodies(f) {
		for _, line := range bytes.Split(b, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				f.Add(d)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, wantErr := oldDecode(b)
		got, err := decodeChunk(b)
		if errorClass(err) != errorClass(wantErr) || (err == nil && fullView(got) != fullView(want)) {
			t.Fatalf("%q\n got %s (%v)\nwant %s (%v)", b, fullView(got), err, fullView(want), wantErr)
		}
	})
}
