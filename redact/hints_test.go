package redact

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// hintsOneByOne is the search hintIndex replaced, kept as its reference:
// each hint searched for in turn over the whole text, the hits sorted.
func hintsOneByOne(lower string, hints []string) []hit {
	var at []hit
	for _, h := range hints {
		r, _ := utf8.DecodeRuneInString(h)
		spaceless := unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
		for i := 0; ; {
			j := strings.Index(lower[i:], h)
			if j < 0 {
				break
			}
			at = append(at, hit{i + j, spaceless})
			i += j + len(h)
		}
	}
	slices.SortStableFunc(at, func(a, b hit) int { return a.at - b.at })
	return at
}

// TestHintIndexFindsWhatTheSearchHintByHintFound holds the one-pass index
// to the hint-by-hint search on texts built from the rules' own hints
// (overlapping, repeated, touching, in other scripts) and noise.
func TestHintIndexFindsWhatTheSearchHintByHintFound(t *testing.T) {
	var pieces []string
	for _, r := range rules {
		pieces = append(pieces, r.hints...)
	}
	pieces = append(pieces, "xoxox", "passpassword", " ", "\n", "a", "é", "パス", "p", "s", "sk", "k_", "-", "_")
	extra := []rule{{hints: []string{"xox", "ox"}}, {hints: []string{"pass", "password", "a"}}, {}, {hints: []string{"パスワード", "密码"}}}
	rs := append(slices.Clone(rules), extra...)
	x := newHintIndex(rs)
	rng := rand.New(rand.NewPCG(20, 26))
	for n := range 3000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if n%7 == 0 {
			b.WriteString(strings.Repeat("x", rng.IntN(5)))
		}
		lower := asciiLower(b.String())
		got := x.find(lower)
		if len(got) != len(rs) {
			t.Fatalf("find gave %d rules' hits, want %d", len(got), len(rs))
		}
		for i, r := range rs {
			if want := hintsOneByOne(lower, r.hints); !slices.Equal(got[i], want) {
				t.Fatalf("text %q, rule %d (hints %q):\n got %v\nwant %v", lower, i, r.hints, got[i], want)
			}
		}
	}
}

// BenchmarkHints finds the rules' hints in 1 MB of prose with none.
func BenchmarkHints(b *testing.B) {
	text := asciiLower(strings.Repeat("Question 12: how does this part of the build work, and what should we change next? ", (1<<20)/84))
	b.SetBytes(int64(len(text)))
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			_ = ruleHints.find(text)
		}
	})
	b.Run("one-by-one", func(b *testing.B) {
		for b.Loop() {
			for _, r := range rules {
				_ = hintsOneByOne(text, r.hints)
			}
		}
	})
}
