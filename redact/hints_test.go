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

// asciiLower is the lowered copy of a whole text the index once searched:
// the reference for its lowering byte by byte.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// TestHintIndexFindsWhatTheSearchHintByHintFound holds the one-pass index
// to the hint-by-hint search over the lowered text, on texts built from the
// rules' own hints (overlapping, repeated, touching, in other scripts, some
// letters upper-cased) and noise; a text with no hit gives nil.
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
		text := []byte(b.String())
		for i, c := range text {
			if 'a' <= c && c <= 'z' && rng.IntN(4) == 0 {
				text[i] = c - 'a' + 'A'
			}
		}
		lower := asciiLower(string(text))
		got := x.find(string(text))
		if got != nil && len(got) != len(rs) {
			t.Fatalf("find gave %d rules' hits, want %d", len(got), len(rs))
		}
		for i, r := range rs {
			want := hintsOneByOne(lower, r.hints)
			if got == nil && len(want) > 0 {
				t.Fatalf("text %q: find found no hint, rule %d (hints %q) has %v", text, i, r.hints, want)
			}
			if got != nil && !slices.Equal(got[i], want) {
				t.Fatalf("text %q, rule %d (hints %q):\n got %v\nwant %v", text, i, r.hints, got[i], want)
			}
		}
	}
}

// BenchmarkHints finds the rules' hints in 1 MB of prose with none.
func BenchmarkHints(b *testing.B) {
	text := strings.Repeat("Question 12: how does this part of the build work, and what should we change next? ", (1<<20)/84)
	b.SetBytes(int64(len(text)))
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			_ = ruleHints.find(text)
		}
	})
	b.Run("one-by-one", func(b *testing.B) {
		lower := asciiLower(text)
		for b.Loop() {
			for _, r := range rules {
				_ = hintsOneByOne(lower, r.hints)
			}
		}
	})
}
