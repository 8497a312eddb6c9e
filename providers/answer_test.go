package providers

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAnswerBudgetTakesUpToTheCapAtARuneBoundary(t *testing.T) {
	cases := map[string]struct {
		max    int
		pieces []string
		kept   string
		over   bool
	}{
		"all fits":              {10, []string{"abc", "defg"}, "abcdefg", false},
		"exactly the cap":       {7, []string{"abc", "defg"}, "abcdefg", false},
		"cut inside a piece":    {5, []string{"abc", "defg"}, "abcde", true},
		"nothing after the cut": {5, []string{"abc", "defg", "h", ""}, "abcde", true},
		"cut before a rune":     {4, []string{"ab", "éé"}, "abé", true}, // é is 2 bytes: 2+2 fits, the next does not
		"cut inside a rune":     {3, []string{"ab", "éé"}, "ab", true},
		"no cap given":          {0, []string{strings.Repeat("x", 1000)}, strings.Repeat("x", 1000), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := NewAnswerBudget(Request{MaxAnswerBytes: tc.max})
			var kept strings.Builder
			for _, p := range tc.pieces {
				got, _ := b.Take(p)
				kept.WriteString(got)
			}
			if kept.String() != tc.kept || b.Over() != tc.over || !utf8.ValidString(kept.String()) {
				t.Fatalf("kept %q over %v; want %q over %v", kept.String(), b.Over(), tc.kept, tc.over)
			}
			if err := b.Err("p"); !errors.Is(err, ErrAnswerTooLarge) {
				t.Fatalf("Err() = %v; want ErrAnswerTooLarge", err)
			}
		})
	}
}
