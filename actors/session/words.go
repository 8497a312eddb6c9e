package session

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentd/agentd/chat"
)

// Models that call tools in words (seed 0086 §2, "every way of calling
// tools") get the loaded tools listed in their prompt, write calls as tagged
// JSON in their text, and read results back as plain messages. The plan is
// rebuilt for every request, so tools find_tools loads are listed from the
// next call on.
const (
	wordsOpen        = "<tool_call>"
	wordsClose       = "</tool_call>"
	wordsResultOpen  = "<tool_response>\n"
	wordsResultClose = "</tool_response>"
)

var wordsCall = regexp.MustCompile(`(?s)<tool_call>\s*(\{.*?\})\s*</tool_call>`)

// wordsToolPrompt lists tools and how to call them in words.
func wordsToolPrompt(specs []chat.ToolSpec) string {
	var b strings.Builder
	b.WriteString("## Calling tools\nTo call a tool, write on a line of its own:\n")
	b.WriteString(wordsOpen + `{"name": "TOOL", "arguments": {...}}` + wordsClose + "\n")
	b.WriteString("then stop and wait: the result comes back as the next message. Tools you can call now:\n")
	for _, sp := range specs {
		fmt.Fprintf(&b, "- %s: %s Arguments (JSON Schema): %s\n", sp.Name, oneLine(sp.Description), sp.Parameters)
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// parseWordsCalls takes the tool calls a words model wrote out of its text.
func parseWordsCalls(text string, turnID string, n int) (string, []chat.ToolCall) {
	var calls []chat.ToolCall
	rest := wordsCall.ReplaceAllStringFunc(text, func(block string) string {
		var c struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		body := wordsCall.FindStringSubmatch(block)[1]
		if json.Unmarshal([]byte(body), &c) != nil || c.Name == "" {
			return block // not a call we can read: leave the words as they are
		}
		args := string(c.Arguments)
		if args == "" || args == "null" {
			args = "{}"
		}
		calls = append(calls, chat.ToolCall{ID: fmt.Sprintf("w_%s_%d_%d", turnID, n, len(calls)), Name: c.Name, Arguments: args})
		return ""
	})
	return strings.TrimSpace(rest), calls
}

// inWords rewrites a request's messages for a words model: calls become the
// tagged text the model wrote, results become the person-side messages it
// reads them as.
func inWords(msgs []chat.Message) []chat.Message {
	out := make([]chat.Message, 0, len(msgs))
	for _, m := range msgs {
		switch {
		case m.Role == chat.RoleAssistant && len(m.ToolCalls) > 0:
			var b strings.Builder
			b.WriteString(m.Content)
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, "\n%s{\"name\": %q, \"arguments\": %s}%s", wordsOpen, c.Name, c.Arguments, wordsClose)
			}
			m.Content, m.ToolCalls = strings.TrimSpace(b.String()), nil
		case m.Role == chat.RoleTool:
			// Tagged as the models that write <tool_call> were taught to read
			// results (Qwen2.5's and Hermes' templates): a model that cannot
			// tell a result from the person asking again calls once more.
			m = chat.Message{Seq: m.Seq, Role: chat.RoleUser, Content: fmt.Sprintf("%sTool result (%s):\n%s\n%s", wordsResultOpen, m.ToolName, m.Content, wordsResultClose), Images: m.Images}
			if n := len(out); n > 0 && out[n-1].Role == chat.RoleUser {
				// Several results of one round read as one message.
				out[n-1].Content += "\n\n" + m.Content
				out[n-1].Images = append(out[n-1].Images, m.Images...)
				continue
			}
		}
		out = append(out, m)
	}
	return out
}
