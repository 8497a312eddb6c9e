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

// placeholderRe finds placeholders Mask wrote, which masking leaves alone:
// Mask(Mask(s)) == Mask(s).
var placeholderRe = regexp.MustCompile(`\[secret:[a-z-]+:[0-9a-f]{6}\]`)

// Mask replaces secrets in s with placeholders like [secret:api-key:1a2b3c].
// The same secret always masks the same way, and placeholders stay as they
// are.
func Mask(s string) string {
	for _, p := range secretPatterns {
		s = outsidePlaceholders(s, func(seg string) string { return maskWith(p.re, p.kind, p.keep, seg) })
	}
	return s
}

// outsidePlaceholders applies fn to the parts of s between placeholders.
func outsidePlaceholders(s string, fn func(string) string) string {
	var b strings.Builder
	last := 0
	for _, loc := range placeholderRe.FindAllStringIndex(s, -1) {
		b.WriteString(fn(s[last:loc[0]]))
		b.WriteString(s[loc[0]:loc[1]])
		last = loc[1]
	}
	b.WriteString(fn(s[last:]))
	return b.String()
}

// maskWith replaces what re matches in s (its submatch keep, or the whole
// match when keep is 0) with a placeholder of kind.
func maskWith(re *regexp.Regexp, kind string, keep int, s string) string {
	return re.ReplaceAllStringFunc(s, func(m string) string {
		if keep == 0 {
			return placeholder(kind, m)
		}
		sub := re.FindStringSubmatch(m)
		if len(sub) <= keep || sub[keep] == "" {
			return m
		}
		return strings.Replace(m, sub[keep], placeholder(kind, sub[keep]), 1)
	})
}

func placeholder(kind, secret string) string {
	h := sha256.Sum256([]byte(secret))
	return "[secret:" + kind + ":" + hex.EncodeToString(h[:3]) + "]"
}
