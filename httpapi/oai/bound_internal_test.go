package oai

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkTinyMessagesHistory: what one Chat Completions body of 32 MiB
// of tiny messages costs to refuse, counted before it is decoded
// (boundLists, at the default limits.max_history_messages) and, for the
// comparison, decoded whole as it was before.
func BenchmarkTinyMessagesHistory(b *testing.B) {
	const msg = `{"role":"user","content":"x"},`
	body := `{"model":"m","messages":[` + strings.Repeat(msg, (32<<20)/len(msg)) + `{"role":"user","content":"x"}]}`
	for _, c := range []struct {
		name   string
		checks []func([]byte) error
	}{{"counted", []func([]byte) error{boundLists(20_000, "messages", "tool_calls", "content", "tools")}}, {"decoded-whole", nil}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var req chatRequest
				w := httptest.NewRecorder()
				ok := decode(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader([]byte(body))), &req, c.checks...)
				if ok == (c.checks != nil) {
					b.Fatalf("decode said %v: %s", ok, w.Body.String())
				}
			}
		})
	}
}

// BenchmarkLongHistoryCounted: what counting adds to a long history an
// honest client re-sends (4,000 messages of 400 bytes, 1.7 MB, more commas
// than the bound, so it is read twice): the count alone, and the decode.
func BenchmarkLongHistoryCounted(b *testing.B) {
	msg := `{"role":"user","content":"` + strings.Repeat("words, and more words ", 18) + `"},`
	body := []byte(`{"model":"m","messages":[` + strings.Repeat(msg, 4000) + `{"role":"user","content":"x"}]}`)
	check := boundLists(20_000, "messages", "tool_calls", "content", "tools")
	b.Run("count", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if err := check(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req chatRequest
			if !decode(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body)), &req) {
				b.Fatal("decode refused an honest history")
			}
		}
	})
}
