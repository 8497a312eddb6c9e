package httpapi

import (
	"net/http/httptest"
	"testing"
)

// A turn streams when Accept names text/event-stream, in any case, at
// least as wanted as JSON.
func TestWantsSSEWeighsAccept(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                    false,
		"*/*":                                 false,
		"application/json":                    false,
		"text/event-stream":                   true,
		"TEXT/EVENT-STREAM":                   true,
		"text/event-stream; charset=utf-8":    true,
		"application/json, text/event-stream": true,
		"*/*, text/event-stream":              true,
		"application/json;q=0.9, text/event-stream;q=0.1": false,
		"text/event-stream;q=0.5, application/json;q=0.4": true,
		"text/event-stream;q=0":                           false,
		"text/event-stream;q=bad":                         false,
		"text/plain, text/html":                           false,
		"text/event-streaming":                            false,
	} {
		r := httptest.NewRequest("POST", "/v1/chats/c/messages", nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		if got := wantsSSE(r); got != want {
			t.Errorf("Accept %q: SSE %v, want %v", accept, got, want)
		}
	}
}
