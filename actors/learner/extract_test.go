package learner

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentd/agentd/window"
)

// TestCutToKeepsAPrefixThatFitsAndItsEstimate: what cutTo keeps is a
// prefix of the line on a rune boundary, within the bytes and tokens
// allowed, and the estimate it returns is that prefix's.
func TestCutToKeepsAPrefixThatFitsAndItsEstimate(t *testing.T) {
	long := strings.Repeat("Person: the quarterly numbers 48213 look fine ", 400)
	cases := []struct {
		name        string
		line        string
		limit, room int
	}{
		{"short, untouched", "Person: I am vegetarian.", 24000, 20000},
		{"over the bytes", long, 2000, 20000},
		{"over the tokens", long, 24000, 300},
		{"multi-byte runes at the cut", strings.Repeat("Person: Größe über ÄÖÜ — ", 300), 1001, 20000},
		{"dense digits over the tokens", strings.Repeat("9", 5000), 24000, 100},
		{"room for nothing", long, 24000, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, n := cutTo(tc.line, tc.limit, tc.room)
			if !strings.HasPrefix(tc.line, got) || !utf8.ValidString(got) {
				t.Fatalf("kept %.40q…, not a prefix on a rune boundary", got)
			}
			if len(got) > tc.limit {
				t.Errorf("kept %d bytes, limit %d", len(got), tc.limit)
			}
			if got != "" && n > tc.room {
				t.Errorf("kept %d tokens, room %d", n, tc.room)
			}
			if want := window.EstimateText(got); n != want {
				t.Errorf("returned estimate %d, the kept text's is %d", n, want)
			}
			if len(tc.line) <= tc.limit && window.EstimateText(tc.line) <= tc.room && got != tc.line {
				t.Errorf("a line that fits was cut to %d of %d bytes", len(got), len(tc.line))
			}
		})
	}
}
