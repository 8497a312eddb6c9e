package ollama

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
)

// bodyTransport answers every request with status 200 and the given body.
type bodyTransport []byte

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/x-ndjson"}},
		Body:    io.NopCloser(bytes.NewReader(b)),
		Request: r,
	}, nil
}

// FuzzStreamBody feeds arbitrary bytes to Stream as an /api/chat body.
// Whatever arrives, Stream must not panic; it succeeds only when the final
// done chunk arrived; and the streamed pieces add up to the response.
// Seeds: testdata/fuzz/FuzzStreamBody.
func FuzzStreamBody(f *testing.F) {
	f.Add([]byte(`{"model":"m","created_at":"2025-06-01T12:00:00Z","message":{"role":"assistant","content":"Hi"},"done":false}
{"model":"m","created_at":"2025-06-01T12:00:00Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":26,"eval_count":2}
`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := New(Config{BaseURL: "http://ollama.invalid", HTTPClient: &http.Client{Transport: bodyTransport(body)},
			Windows: map[string]int{"m": 8192}})
		if err != nil {
			t.Fatal(err)
		}
		var text, thinking strings.Builder
		calls := 0
		resp, err := c.Stream(context.Background(), providers.Request{Model: "m", Messages: testkit.Ask("hi")}, func(e providers.Event) {
			switch e.Kind {
			case providers.EventText:
				text.WriteString(e.Text)
			case providers.EventThinking:
				thinking.WriteString(e.Text)
			case providers.EventToolCall:
				calls++
			}
		})
		if err != nil {
			var pe *providers.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *providers.Error", err)
			}
			return
		}
		if resp.FinishReason == "" {
			t.Fatalf("success without a finish reason: %+v", resp)
		}
		if resp.Message.Content != text.String() || resp.Message.Thinking != thinking.String() || len(resp.Message.ToolCalls) != calls {
			t.Fatalf("response %+v does not match the streamed events", resp)
		}
	})
}
