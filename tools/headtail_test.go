package tools

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

func TestHeadTail(t *testing.T) {
	long := "BEGIN " + strings.Repeat("lorem ipsum ", 500) + " END"
	// Four-byte runes only, so any cut in the wrong place breaks UTF-8.
	emoji := strings.Repeat("😀", 1000)
	mixed := "начало " + strings.Repeat("日本語テキスト ", 300) + " конец"
	recovery := RecoveryPointer(12)
	tests := []struct {
		name     string
		text     string
		max      int
		recovery string
		want     []string // fragments that must survive
	}{
		{"short text untouched", "hello", 10, recovery, []string{"hello"}},
		{"exactly max untouched", "hello", 5, "", []string{"hello"}},
		{"keeps head and tail", long, 300, recovery, []string{"BEGIN", "END", `conversation_read {"from_seq":12,"to_seq":12}`}},
		{"no recovery pointer", long, 200, "", []string{"BEGIN", "END", "bytes cut"}},
		{"four-byte runes", emoji, 301, recovery, []string{"😀", "bytes cut"}},
		{"mixed scripts", mixed, 257, recovery, []string{"начало", "конец"}},
		{"max smaller than the marker", long, 10, recovery, []string{"BEGIN"}},
		{"zero max", long, 0, recovery, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := HeadTail(tc.text, tc.max, tc.recovery)
			if len(got) > tc.max {
				t.Errorf("len = %d, over max %d", len(got), tc.max)
			}
			if !utf8.ValidString(got) {
				t.Errorf("result is not valid UTF-8: %q", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("result lost %q: %q", w, got)
				}
			}
		})
	}
}

func TestHeadTailCountsWhatItCut(t *testing.T) {
	text := strings.Repeat("a", 1000) + strings.Repeat("z", 1000)
	got := HeadTail(text, 500, "")
	head := len(got) - len(strings.TrimLeft(got, "a"))
	tail := len(got) - len(strings.TrimRight(got, "z"))
	// The marker must report exactly the bytes that are gone.
	want := "[… " + strconv.Itoa(len(text)-head-tail) + " bytes cut …]"
	if !strings.Contains(got, want) {
		t.Errorf("result %q lacks marker %q", got, want)
	}
	if head <= tail {
		t.Errorf("head %d bytes, tail %d bytes: the head should get the larger share", head, tail)
	}
}

// The properties that hold for every input: never over max, valid UTF-8 in
// gives valid UTF-8 out, the result starts with a prefix of the text and
// ends with a suffix of it, and a text that fits is returned unchanged.
func TestHeadTailProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// One-, two-, three- and four-byte runes; none that the marker uses,
		// so the marker can be found again.
		text := rapid.StringOf(rapid.RuneFrom([]rune{'a', ' ', '\n', 'é', 'Ж', '日', '😀'})).Draw(t, "text")
		max := rapid.IntRange(0, len(text)+50).Draw(t, "max")
		recovery := rapid.SampledFrom([]string{"", RecoveryPointer(3), "x"}).Draw(t, "recovery")
		got := HeadTail(text, max, recovery)
		if len(got) > max {
			t.Fatalf("len %d > max %d", len(got), max)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8: %q", got)
		}
		if len(text) <= max {
			if got != text {
				t.Fatalf("text that fits was changed: %q -> %q", text, got)
			}
			return
		}
		if i := strings.Index(got, "\n[… "); i >= 0 {
			head := got[:i]
			end := strings.LastIndex(got, " …]\n")
			tail := got[end+len(" …]\n"):]
			if !strings.HasPrefix(text, head) || !strings.HasSuffix(text, tail) {
				t.Fatalf("head %q / tail %q are not the text's own ends", head, tail)
			}
		} else if !strings.HasPrefix(text, got) {
			t.Fatalf("marker-less result %q is not a prefix", got)
		}
	})
}
