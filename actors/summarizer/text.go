package summarizer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/redact"
	"github.com/agentd/agentd/window"
)

// Lines renders folded messages as the plain lines a summariser (or the
// learner) reads: "Person:", "Assistant:", "Tool result:", pictures named,
// thinking left out. Secrets are masked by mk, so the lines share one
// numbering of placeholders with what the model reads beside them.
func Lines(msgs []chat.Message, mk *redact.Masker) []string {
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		var b strings.Builder
		switch m.Role {
		case chat.RoleUser:
			b.WriteString("Person: ")
		case chat.RoleAssistant:
			b.WriteString("Assistant: ")
		case chat.RoleTool:
			fmt.Fprintf(&b, "Tool result (%s): ", m.ToolName)
		}
		b.WriteString(strings.TrimSpace(m.Content))
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, " [called %s %s]", c.Name, c.Arguments)
		}
		for range m.Images {
			b.WriteString(" [a picture]")
		}
		for _, a := range m.Attachments {
			fmt.Fprintf(&b, " [attached %s]", a.Name)
		}
		out = append(out, mk.Mask(b.String()))
	}
	return out
}

// WithoutRefused is msgs without the exchanges the provider refused, by the
// rule the chat's own requests follow (window.RefusedExchanges): a summary,
// a digest or a memory made of one would hand the model the refused
// question again. It returns msgs itself when nothing was refused.
func WithoutRefused(msgs []chat.Message) []chat.Message {
	if !slices.ContainsFunc(msgs, func(m chat.Message) bool { return m.Refused }) {
		return msgs
	}
	skip := make([]bool, len(msgs))
	window.RefusedExchanges(len(msgs), func(i int) (window.Role, bool) { return window.Role(msgs[i].Role), msgs[i].Refused }, skip)
	out := make([]chat.Message, 0, len(msgs))
	for i, m := range msgs {
		if !skip[i] {
			out = append(out, m)
		}
	}
	return out
}
