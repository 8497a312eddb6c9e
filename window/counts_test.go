package window

import (
	"strings"
	"testing"
)

// TestCountsAddAtLineBreaks: texts joined at a line break are estimated
// from their counts added exactly as from the joined text read whole,
// whatever runs end or start at the break (words, numbers, hashes,
// punctuation, indents, other scripts, a carriage return).
func TestCountsAddAtLineBreaks(t *testing.T) {
	texts := []string{
		"Person: the quarterly numbers 48213 look fine",
		"Assistant: done.", "  indented by two", "trailing spaces   ", "ends in punctuation?!",
		"\"quoted\", {\"json\": [1, 2]}", "sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"camelCaseIdentifier HTTPServer", "Größe über ÄÖÜ — «guillemets»", "Привет, мир", "你好，世界", "こんにちは",
		"emoji 🎉 here", "windows line\r", "\tTab", "x", " ", "",
	}
	nl := Count("\n")
	for _, a := range texts {
		for _, b := range texts {
			whole := a + "\n" + b
			if got, want := Count(a).Add(nl).Add(Count(b)).Tokens(), EstimateText(whole); got != want {
				t.Errorf("%q + %q: counts added give %d, the joined text %d", a, b, got, want)
			}
		}
	}
	// Many lines at once, as a summarising request joins a fold's.
	var sum Counts
	for i, l := range texts {
		if i > 0 {
			sum = sum.Add(nl)
		}
		sum = sum.Add(Count(l))
	}
	if got, want := sum.Tokens(), EstimateText(strings.Join(texts, "\n")); got != want {
		t.Errorf("all lines: counts added give %d, the joined text %d", got, want)
	}
	if n := (Counts{}).Tokens(); n != 0 {
		t.Errorf("nothing counted costs %d tokens, want 0", n)
	}
}
