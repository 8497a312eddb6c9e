package openai

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
)

// cannedTransport reads each request's body to its end, as a server does,
// and answers with the same stream.
type cannedTransport struct{ answer []byte }

func (ct cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, err := io.Copy(io.Discard, req.Body); err != nil {
		return nil, err
	}
	_ = req.Body.Close()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(ct.answer)), Request: req}, nil
}

// BenchmarkStreamLongChat is one model call of a chat whose request is
// about a 32K window's (300 kept messages, ≈100 KB), answered with 30 text
// deltas, the server's side costing nothing: the adapter's own work per
// plain turn.
func BenchmarkStreamLongChat(b *testing.B) {
	answer := append(textBody(30), "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":30000,\"completion_tokens\":30}}\n\n"...)
	answer = bytes.Replace(answer, []byte("data: [DONE]\n\n"), nil, 1)
	answer = append(answer, "data: [DONE]\n\n"...)
	c, err := New(Config{Name: "bench", Company: "openai", BaseURL: "http://127.0.0.1:1/v1", APIKey: "sk-test",
		HTTPClient: &http.Client{Transport: cannedTransport{answer: answer}}})
	if err != nil {
		b.Fatal(err)
	}
	req := userReq("")
	req.CacheKey = "chat-1"
	req.Messages = nil
	for i := range 300 {
		role := chat.RoleUser
		if i%2 == 1 {
			role = chat.RoleAssistant
		}
		req.Messages = append(req.Messages, chat.Message{Seq: int64(i + 1), Role: role,
			Content: fmt.Sprintf("message %d: %s", i, strings.Repeat("some words of the chat ", 14))})
	}
	b.ReportAllocs()
	for b.Loop() {
		if r := run(b, c, context.Background(), req); r.err != nil || !strings.HasPrefix(r.text, "tok0 ") {
			b.Fatalf("%v %q", r.err, r.text)
		}
	}
}

// BenchmarkBodyNextTurn is the request body of a 32K chat's next turn:
// the last request's 300 kept messages and two new ones, the log growing
// in one array as a session's does, folding back every 50 turns.
func BenchmarkBodyNextTurn(b *testing.B) {
	c, err := New(Config{Name: "bench", Company: "openai", BaseURL: "http://127.0.0.1:1/v1", APIKey: "sk-test"})
	if err != nil {
		b.Fatal(err)
	}
	all := longLog(400)
	req := userReq("")
	req.CacheKey = "chat-1"
	b.ReportAllocs()
	i := 0
	var dst []byte
	for b.Loop() {
		req.Messages = all[:300+2*(i%50)]
		i++
		if dst, err = c.body(dst[:0], req); err != nil {
			b.Fatal(err)
		}
	}
}

// longLog is n messages of a chat, a person's and the model's in turn,
// each about 350 bytes.
func longLog(n int) []chat.Message {
	var ms []chat.Message
	for i := range n {
		role := chat.RoleUser
		if i%2 == 1 {
			role = chat.RoleAssistant
		}
		ms = append(ms, chat.Message{Seq: int64(i + 1), Role: role,
			Content: fmt.Sprintf("message %d: %s", i, strings.Repeat("some words of the chat ", 14))})
	}
	return ms
}
