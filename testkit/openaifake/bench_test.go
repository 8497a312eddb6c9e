package openaifake

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentd/agentd/testkit"
)

// overheadBody is a chat request like those the overhead bench sends on 32K:
// instructions, a tool, and about 100 KB of messages.
func overheadBody() string {
	msgs := []map[string]any{{"role": "system", "content": strings.Repeat("You are a helpful assistant. ", 40)}}
	for i := range 180 {
		role := []string{"user", "assistant"}[i%2]
		msgs = append(msgs, map[string]any{"role": role, "content": fmt.Sprintf("Message %d: %s", i, strings.Repeat("how does this part of the system work, and why? ", 11))})
	}
	b, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "stream_options": map[string]any{"include_usage": true}, "prompt_cache_key": "chat-1", "messages": msgs,
		"tools": []map[string]any{{"type": "function", "function": map[string]any{"name": "find_tools", "description": "Find tools.", "parameters": map[string]any{"type": "object"}}}}})
	return string(b)
}

func BenchmarkOverheadRequest(b *testing.B) {
	s := New(Options{Window: 32000, Forget: true, Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "Noted; here is a short answer to that.", ChunkRunes: 64}
	}})
	defer s.Close()
	body := overheadBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.chat(w, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body)))
		if w.Code != 200 {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}
