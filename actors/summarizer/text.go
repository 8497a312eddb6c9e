package summarizer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentd/agentd/chat"
)

// Lines renders folded messages as the plain lines a summariser reads:
// "Person:", "Assistant:", "Tool result:", pictures named, thinking left
// out. Secrets are masked first.
func Lines(msgs []chat.Message) []string {
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
		out = append(out, Mask(b.String()))
	}
	return out
}

// secretPatterns find API keys, tokens, passwords and private keys. Each
// match is replaced by a stable placeholder, so the same secret masks the
// same way every time and nothing of it reaches the summariser.
var secretPatterns = []struct {
	kind string
	re   *regexp.Regexp
	keep int // submatch to replace; 0 is the whole match
}{
	{"private-key", regexp.MustCompile(`(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)`), 0},
	{"api-key", regexp.MustCompile(`\b(sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,})`), 1},
	{"api-key", regexp.MustCompile(`\b(AKIA[0-9A-Z]{16})\b`), 1},
	{"api-key", regexp.MustCompile(`\b(AIza[0-9A-Za-z_\-]{30,})`), 1},
	{"token", regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`), 1},
	{"token", regexp.MustCompile(`\b(xox[abprs]-[A-Za-z0-9\-]{10,})`), 1},
	{"token", regexp.MustCompile(`\b(eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})`), 1},
	{"token", regexp.MustCompile(`(?i)\bbearer\s+([A-Za-z0-9_\-\.=]{16,})`), 1},
	{"password", regexp.MustCompile(`(?i)\b(?:password|passwd|pwd|passphrase|secret|api[_-]?key|token)\s*(?:is|=|:)\s*["']?([^\s"',;]{4,})`), 1},
	{"password", regexp.MustCompile(`://[^/\s:@]+:([^@\s/]{3,})@`), 1},
}

// Mask replaces secrets in s with placeholders like [secret:api-key:1a2b3c].
func Mask(s string) string {
	for _, p := range secretPatterns {
		s = p.re.ReplaceAllStringFunc(s, func(m string) string {
			if p.keep == 0 {
				return placeholder(p.kind, m)
			}
			sub := p.re.FindStringSubmatch(m)
			if len(sub) <= p.keep || sub[p.keep] == "" {
				return m
			}
			return strings.Replace(m, sub[p.keep], placeholder(p.kind, sub[p.keep]), 1)
		})
	}
	return s
}

func placeholder(kind, secret string) string {
	h := sha256.Sum256([]byte(secret))
	return "[secret:" + kind + ":" + hex.EncodeToString(h[:3]) + "]"
}
