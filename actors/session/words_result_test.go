package session

import (
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
)

// A words model reads each result inside <tool_response> tags, the way the
// models that write <tool_call> were taught; without them a real Qwen2.5
// template model took the result for the person asking again and called the
// tool until the turn overflowed its window (issue 16, llama-server).
func TestInWordsTagsResults(t *testing.T) {
	msgs := []chat.Message{
		{Role: chat.RoleUser, Content: "weather?"},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "a", Name: "get_weather", Arguments: `{}`}, {ID: "b", Name: "current_time", Arguments: `{}`}}},
		{Role: chat.RoleTool, ToolCallID: "a", ToolName: "get_weather", Content: "18C"},
		{Role: chat.RoleTool, ToolCallID: "b", ToolName: "current_time", Content: "noon"},
	}
	out := inWords(msgs)
	if len(out) != 3 {
		t.Fatalf("%d messages, want the person, the calls in words, one message of results: %+v", len(out), out)
	}
	if c := out[1].Content; out[1].Role != chat.RoleAssistant || !strings.Contains(c, `<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>`) || len(out[1].ToolCalls) != 0 {
		t.Errorf("calls in words: %+v", out[1])
	}
	res := out[2]
	if res.Role != chat.RoleUser || strings.Count(res.Content, "<tool_response>\n") != 2 || strings.Count(res.Content, "</tool_response>") != 2 {
		t.Fatalf("results: %+v", res)
	}
	for _, want := range []string{"Tool result (get_weather):\n18C\n</tool_response>", "Tool result (current_time):\nnoon\n</tool_response>"} {
		if !strings.Contains(res.Content, want) {
			t.Errorf("results %q lack %q", res.Content, want)
		}
	}
}
