package summarizer

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/redact"
)

// DigestMaxChars bounds a chat's digest, however many folds fed it.
const DigestMaxChars = 4000

var (
	reLink   = regexp.MustCompile(`\bhttps?://[^\s)\]>"']+`)
	rePath   = regexp.MustCompile(`(?:^|[\s(\["'])((?:~|\.{1,2})?/[\w.\-]+(?:/[\w.\-]+)+|[\w\-]+(?:/[\w.\-]+)+\.\w{1,8})`)
	reNumber = regexp.MustCompile(`\b\d[\d,._:/\-]*\d\b|\b\d\b`)
	reName   = regexp.MustCompile(`\b[A-Z][a-z]+(?:[ \-][A-Z][a-z]+)+\b|\b[A-Z]{2,}[A-Z0-9\-]*\b`)
)

// Digest returns the bounded, deterministic digest of folded messages merged
// into the digest so far: the person's requests, then numbers, names, paths
// and links, leaving out the exchanges the provider refused. It needs no
// model, so a fold that got no summary still leaves the facts behind. When
// over the bound, the oldest entries go first.
func Digest(prev string, msgs []chat.Message) string {
	var requests []string
	facts := map[string][]string{}
	seen := map[[2]string]bool{}
	add := func(kind, v string) {
		if k := [2]string{kind, v}; !seen[k] {
			seen[k] = true
			facts[kind] = append(facts[kind], v)
		}
	}
	mk := redact.NewMasker(prev)
	for _, m := range WithoutRefused(msgs) {
		text := mk.Mask(m.Content)
		if m.Role == chat.RoleUser {
			requests = append(requests, clipWords(oneLine(text), 160))
		}
		// Facts come from the words around the placeholders, never from a
		// placeholder's number.
		bare := redact.Drop(text)
		for _, l := range reLink.FindAllString(bare, -1) {
			add("links", l)
		}
		for _, p := range rePath.FindAllStringSubmatch(bare, -1) {
			if !strings.Contains(p[1], "://") && !strings.HasPrefix(p[1], "//") {
				add("paths", p[1])
			}
		}
		for _, n := range reNumber.FindAllString(reLink.ReplaceAllString(bare, ""), -1) {
			add("numbers", n)
		}
		for _, n := range reName.FindAllString(bare, -1) {
			add("names", n)
		}
	}
	var lines []string
	if prev != "" {
		lines = strings.Split(prev, "\n")
	}
	for _, r := range requests {
		lines = append(lines, "- asked: "+r)
	}
	for _, kind := range []string{"numbers", "names", "paths", "links"} {
		if len(facts[kind]) > 0 {
			lines = append(lines, "- "+kind+": "+strings.Join(facts[kind], ", "))
		}
	}
	// The joined length is counted once and the oldest lines dropped from
	// it: joining again after each drop made a fold of a long backlog
	// quadratic (2.1 GB allocated for a 10,000-message one).
	size := len(lines) - 1
	for _, l := range lines {
		size += len(l)
	}
	for len(lines) > 1 && size > DigestMaxChars {
		size -= len(lines[0]) + 1
		lines = lines[1:]
	}
	out := strings.Join(lines, "\n")
	if len(out) > DigestMaxChars {
		cut := len(out) - DigestMaxChars
		for cut < len(out) && !utf8.RuneStart(out[cut]) {
			cut++
		}
		out = out[cut:]
	}
	return out
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clipWords(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := strings.LastIndexByte(s[:n], ' ')
	if cut < n/2 {
		cut = n
	}
	return s[:cut] + "…"
}
