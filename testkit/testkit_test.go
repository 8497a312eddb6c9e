package testkit

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// countTokensByRule is CountTokens's rule as written: a token per four
// bytes, at least one per word, a word being a run of bytes other than a
// space, tab, CR or LF.
func countTokensByRule(s string) int {
	words := len(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' || r == '\n' }))
	return max((len(s)+3)/4, words)
}

func TestCountTokensFollowsItsRule(t *testing.T) {
	for s, want := range map[string]int{"": 0, "a": 1, "a b c d e": 5, "  \t\n": 1, "word": 1, "abcdefgh": 2, "é è": 2} {
		if got := CountTokens(s); got != want {
			t.Errorf("CountTokens(%q) = %d, want %d", s, got, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		// Mostly spaces and letters, so words are short and many.
		s := rapid.StringOf(rapid.SampledFrom([]rune{' ', '\t', '\r', '\n', 'a', 'b', 'é', '\x00', '\xff', 'z'})).Draw(t, "s")
		if got, want := CountTokens(s), countTokensByRule(s); got != want {
			t.Fatalf("CountTokens(%q) = %d, want %d", s, got, want)
		}
	})
}

func BenchmarkCountTokens(b *testing.B) {
	text := strings.Repeat("how does this part of the system work, and why? ", 2000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		CountTokens(text)
	}
}
