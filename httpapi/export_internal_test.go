package httpapi

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The fence of a code block is longer than any run of backticks in its
// text, and at least three long.
func TestFenceOutrunsTheBackticksInside(t *testing.T) {
	for text, want := range map[string]string{
		"plain":                    "```",
		"a `tick`":                 "```",
		"``` three":                "````",
		"`` ````` ``":              "``````",
		strings.Repeat("`", 1<<20): strings.Repeat("`", 1<<20+1), // a million steps, not a million scans
	} {
		if got := fence(text, true); !strings.HasPrefix(got, want+"\n") || !strings.HasSuffix(got, "\n"+want+"\n\n") {
			t.Errorf("fence of %.20q opens %.20q, want %d backticks", text, got, len(want))
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		text := rapid.StringMatching("[a`\n]{0,40}").Draw(rt, "text")
		got := fence(text, true)
		ticks := got[:strings.IndexByte(got, '\n')]
		if len(ticks) < 3 || strings.Trim(ticks, "`") != "" || strings.Contains(text, ticks) {
			rt.Fatalf("fence %q for %q", ticks, text)
		}
		if len(ticks) > 3 && !strings.Contains(text, ticks[1:]) {
			rt.Fatalf("fence %q is longer than %q needs", ticks, text)
		}
	})
}
