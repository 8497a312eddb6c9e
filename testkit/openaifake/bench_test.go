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

// scaleBody is a chat request like those the scale bench sends: the
// default instructions, agentd's 18 tools (about 12 KB) and a short chat.
func scaleBody() string {
	tools := make([]map[string]any, 18)
	for i := range tools {
		tools[i] = map[string]any{"type": "function", "function": map[string]any{"name": fmt.Sprintf("tool_%d", i),
			"description": strings.Repeat("Does one thing well; use it when the person asks for it.\n", 5),
			"parameters": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"text"},
				"properties": map[string]any{"text": map[string]any{"type": "string", "description": "what to work on"}}}}}
	}
	msgs := []map[string]any{{"role": "system", "content": strings.Repeat("You are a helpful assistant hosted by agentd.\n", 25)},
		{"role": "user", "content": "chat 1 turn 0: please note this down."},
		{"role": "assistant", "content": "Noted; here is a short answer to that."},
		{"role": "user", "content": "chat 1 turn 1: please note this down."}}
	b, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "stream_options": map[string]any{"include_usage": true}, "prompt_cache_key": "chat-1", "messages": msgs, "tools": tools})
	return string(b)
}

func BenchmarkOverheadRequest(b *testing.B) { benchmarkRequest(b, overheadBody()) }

// BenchmarkScaleRequest: every chat of the scale bench sends the same tool
// list, which the fake decodes once and then blanks out of the body before
// decoding it (toolLists).
func BenchmarkScaleRequest(b *testing.B) { benchmarkRequest(b, scaleBody()) }

func benchmarkRequest(b *testing.B, body string) {
	s := New(Options{Window: 32000, Forget: true, Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "Noted; here is a short answer to that.", ChunkRunes: 64}
	}})
	defer s.Close()
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
