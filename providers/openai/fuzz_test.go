package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// bodyTransport answers every request with one fixed SSE body, read back in
// pieces of a fixed size so that lines straddle reads.
type bodyTransport struct {
	body  []byte
	piece int
}

func (t bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(&pieceReader{r: bytes.NewReader(t.body), n: t.piece}),
		Request:    r,
	}, nil
}

type pieceReader struct {
	r *bytes.Reader
	n int
}

func (p *pieceReader) Read(b []byte) (int, error) {
	if len(b) > p.n {
		b = b[:p.n]
	}
	return p.r.Read(b)
}

// FuzzStreamParse feeds arbitrary bytes to the adapter as the SSE body of a
// 200 answer. Whatever arrives, Stream must not panic, must fail only with a
// *providers.Error, and when it succeeds its answer must be exactly what its
// events said, from a body that really ended ([DONE], or a finish and usage).
func FuzzStreamParse(f *testing.F) {
	f.Add([]byte("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"), uint8(7))
	f.Fuzz(func(t *testing.T, body []byte, piece uint8) {
		c, err := New(Config{Company: "deepseek", BaseURL: "http://fuzz.invalid/v1",
			HTTPClient: &http.Client{Transport: bodyTransport{body: body, piece: int(piece%64) + 1}}})
		if err != nil {
			t.Fatal(err)
		}
		var text, think strings.Builder
		var calls []string
		usages := 0
		resp, err := c.Stream(context.Background(), userReq("q"), func(e providers.Event) {
			switch e.Kind {
			case providers.EventText:
				text.WriteString(e.Text)
			case providers.EventThinking:
				think.WriteString(e.Text)
			case providers.EventToolCall:
				calls = append(calls, fmt.Sprint(*e.ToolCall))
			case providers.EventUsage:
				usages++
			}
		})
		if err != nil {
			var pe *providers.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *providers.Error", err, err)
			}
			return
		}
		if !bytes.Contains(body, []byte("[DONE]")) && !bytes.Contains(body, []byte("usage")) {
			t.Fatalf("success from a body with neither [DONE] nor usage: %q", body)
		}
		m := resp.Message
		if m.Content != text.String() || m.Thinking != think.String() {
			t.Fatalf("message %q/%q, events %q/%q", m.Content, m.Thinking, text.String(), think.String())
		}
		if len(m.ToolCalls) != len(calls) {
			t.Fatalf("message has %d tool calls, events %d", len(m.ToolCalls), len(calls))
		}
		for i, tc := range m.ToolCalls {
			if fmt.Sprint(tc) != calls[i] || tc.ID == "" {
				t.Fatalf("tool call %d: message %v, event %s", i, tc, calls[i])
			}
		}
		if usages > 1 {
			t.Fatalf("%d usage events", usages)
		}
		switch resp.FinishReason {
		case providers.FinishStop, providers.FinishLength, providers.FinishToolCalls, providers.FinishFilter:
		default:
			t.Fatalf("finish reason %q not normalised", resp.FinishReason)
		}
	})
}

// TestDoneWatcherSplitReads: [DONE] is seen however the body is cut into
// reads, and only as a whole data line.
func TestDoneWatcherSplitReads(t *testing.T) {
	cases := []struct {
		name string
		body string
		done bool
		data int
	}{
		{"plain", "data: {}\n\ndata: [DONE]\n\n", true, 2},
		{"no space, CRLF", "data:{}\r\n\r\ndata:[DONE]\r\n\r\n", true, 2},
		{"cut before DONE", "data: {}\n\ndata: [DO", false, 1},
		{"DONE inside a chunk", "data: {\"content\":\"[DONE]\"}\n\n", false, 1},
		{"comment only", ": keep-alive\n\n", false, 0},
	}
	for _, tc := range cases {
		for piece := 1; piece <= len(tc.body); piece++ {
			var w doneWatcher
			r := &pieceReader{r: bytes.NewReader([]byte(tc.body)), n: piece}
			b := &watchedBody{ReadCloser: io.NopCloser(r), w: &w}
			if _, err := io.ReadAll(b); err != nil {
				t.Fatal(err)
			}
			// A line cut by EOF never ended, so it is not counted.
			if w.done != tc.done || w.dataLines != tc.data {
				t.Errorf("%s, reads of %d: done %v data lines %d; want %v %d", tc.name, piece, w.done, w.dataLines, tc.done, tc.data)
			}
		}
	}
}

// seed reads one body of the fuzz seed corpus (go test fuzz v1 format).
func seed(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzStreamParse", name))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		t.Fatalf("seed %s: %v", name, err)
	}
	return []byte(s)
}

// TestSeedStreams pins what the adapter makes of each seed: the shapes
// different companies stream, and the broken ones.
func TestSeedStreams(t *testing.T) {
	cases := []struct {
		seed    string
		wantErr bool
		text    string
		think   string
		calls   string
		usage   chat.Usage
		finish  string
		tooLong bool
	}{
		{seed: "text", text: "Hello", usage: chat.Usage{InputTokens: 20, OutputTokens: 5, CachedTokens: 8}, finish: providers.FinishStop},
		{seed: "toolcalls", calls: `[{call_1 get_weather {"location":"Paris"}} {call_2 clock {}}]`, usage: chat.Usage{InputTokens: 20, OutputTokens: 5, CachedTokens: 8}, finish: providers.FinishToolCalls},
		// DeepSeek: usage on the finish chunk, cache as prompt_cache_hit_tokens.
		{seed: "reasoning_deepseek", text: "Answer", think: "Think more.", usage: chat.Usage{InputTokens: 10, OutputTokens: 3, CachedTokens: 6}, finish: providers.FinishStop},
		// OpenRouter: SSE comments, `reasoning`.
		{seed: "reasoning_openrouter", text: "ok", think: "Hmm", usage: chat.Usage{InputTokens: 20, OutputTokens: 5, CachedTokens: 8}, finish: providers.FinishStop},
		{seed: "crlf_nospace", text: "x", finish: providers.FinishStop},
		// Calls without an index, each whole in one delta; "stop" after calls.
		{seed: "no_index_tools", calls: `[{a f {}} {b g {}}]`, finish: providers.FinishToolCalls},
		{seed: "error_event", wantErr: true, tooLong: true},
		{seed: "finish_error_openrouter", wantErr: true},
		{seed: "cut", wantErr: true},
		{seed: "garbage", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.seed, func(t *testing.T) {
			c, err := New(Config{Company: "deepseek", BaseURL: "http://seed.invalid/v1",
				HTTPClient: &http.Client{Transport: bodyTransport{body: seed(t, tc.seed), piece: 5}}})
			if err != nil {
				t.Fatal(err)
			}
			r := run(t, c, context.Background(), userReq("q"))
			if tc.wantErr {
				var pe *providers.Error
				if !errors.As(r.err, &pe) || pe.TooLong != tc.tooLong {
					t.Fatalf("err %v (TooLong want %v)", r.err, tc.tooLong)
				}
				return
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			m := r.resp.Message
			calls := ""
			if len(m.ToolCalls) > 0 {
				calls = fmt.Sprint(m.ToolCalls)
			}
			if m.Content != tc.text || m.Thinking != tc.think || calls != tc.calls || r.resp.Usage != tc.usage || r.resp.FinishReason != tc.finish {
				t.Errorf("got text %q think %q calls %s usage %+v finish %q\nwant text %q think %q calls %s usage %+v finish %q",
					m.Content, m.Thinking, calls, r.resp.Usage, r.resp.FinishReason, tc.text, tc.think, tc.calls, tc.usage, tc.finish)
			}
		})
	}
}
