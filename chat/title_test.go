package chat

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTitleFrom(t *testing.T) {
	long := strings.Repeat("word ", 30)
	for _, tc := range []struct{ in, want string }{
		{"Plan my trip to Lisbon", "Plan my trip to Lisbon"},
		{"\n\n  first   line  \nsecond", "first line"},
		{"   \n\t", ""},
		{"", ""},
		{long, strings.TrimSpace(strings.Repeat("word ", 11)) + "…"},
		{strings.Repeat("x", 80), strings.Repeat("x", TitleRunes-1) + "…"},
	} {
		got := TitleFrom(tc.in)
		if got != tc.want {
			t.Errorf("TitleFrom(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if n := utf8.RuneCountInString(got); n > TitleRunes {
			t.Errorf("TitleFrom(%q) has %d runes, over %d", tc.in, n, TitleRunes)
		}
	}
}

func TestTitleFromKeepsRunesWhole(t *testing.T) {
	got := TitleFrom(strings.Repeat("日本語", 40))
	if !utf8.ValidString(got) || utf8.RuneCountInString(got) != TitleRunes {
		t.Fatalf("title %q: valid %v, %d runes", got, utf8.ValidString(got), utf8.RuneCountInString(got))
	}
}
