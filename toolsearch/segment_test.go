package toolsearch

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// sentencePattern is what sentences writes out by hand.
var sentencePattern = regexp.MustCompile(`[.?!;]+["')\]]*\s+|\n+|\\n`)

// text draws strings made of the pieces the patterns look for, in any case,
// with a few non-ASCII letters that (?i) folds into ASCII ones.
func text(t *rapid.T) string {
	pieces := []string{".", "?", "!", ";", "\"", "'", ")", "]", " ", "\t", "\n", "\f", "\r", "\v", `\`, "n", ",",
		"a", "3.5", "é", "ſ", "K", "then", "ALSO", "And", "after that", "as well as", "in addition to that",
		"authentic", "Thence", "nextcloud", "lastly_", "Finally", "moreover9", "www.", "WwW", "://", "http", "example.com", ".org", ".COM9", ".infos", ".De", ".Uk", ".ly", ".x", ".1", "-", "_"}
	var b strings.Builder
	for range rapid.IntRange(0, 30).Draw(t, "n") {
		b.WriteString(rapid.SampledFrom(pieces).Draw(t, "piece"))
	}
	return b.String()
}

func TestSentencesAsPattern(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := text(t)
		if got, want := sentences(s), sentencePattern.Split(s, -1); !slices.Equal(got, want) {
			t.Fatalf("sentences(%q) = %q, the pattern splits it %q", s, got, want)
		}
	})
}

func TestClausesAsPattern(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := text(t)
		if got, want := clauses(s), clauseJoint.Split(s, -1); !slices.Equal(got, want) {
			t.Fatalf("clauses(%q) = %q, the pattern splits it %q", s, got, want)
		}
	})
}

func TestHasAddressAsPattern(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := text(t)
		if got, want := hasAddress(s), addressPattern.MatchString(s); got != want {
			t.Fatalf("hasAddress(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}

// identifierPattern is what identifiers writes out by hand.
var identifierPattern = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_.\-]*[A-Za-z0-9_]`)

func TestIdentifiersAsPattern(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := text(t)
		if got, want := slices.Collect(identifiers(s)), identifierPattern.FindAllString(s, -1); !slices.Equal(got, want) {
			t.Fatalf("identifiers(%q) = %q, the pattern finds %q", s, got, want)
		}
	})
}
