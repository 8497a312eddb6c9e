package window

import (
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

func perChar(s string) float64 { return float64(EstimateText(s)) / float64(utf8.RuneCountInString(s)) }

func TestEstimateTextTiny(t *testing.T) {
	tests := map[string]struct {
		text   string
		lo, hi int
	}{
		// Nothing costs nothing; anything costs at least one token.
		"empty":      {"", 0, 0},
		"one-letter": {"a", 1, 1},
		// A common word is one token in every vocabulary.
		"word": {"hello", 1, 1},
		// Six short words, each a token with its leading space, plus a period.
		"sentence": {"The cat sat on the mat.", 5, 8},
		// A 40-character identifier splits at its camel humps and long pieces:
		// more than one token, fewer than one per four characters.
		"identifier": {"getHTTPResponseHeadersForConnectionPool", 5, 10},
		// 32 hex digits of a hash: no merges apply, about one token per 1.5–3 chars.
		"hash": {"9f86d081884c7d659a2feaa0c55ad015", 10, 22},
		// Seven Cyrillic letters: two or three tokens, not seven.
		"cyrillic-word": {"привет!", 2, 4},
		// Four Han characters: each is about half to one token.
		"han": {"你好世界", 2, 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := EstimateText(tc.text); got < tc.lo || got > tc.hi {
				t.Errorf("EstimateText(%q) = %d, want %d..%d", tc.text, got, tc.lo, tc.hi)
			}
		})
	}
}

func TestEstimateTextRelative(t *testing.T) {
	english := strings.Repeat("the quick brown fox jumps over the lazy dog and runs away ", 20)
	digits := strings.Repeat("3141592653 5897932384 6264338327 ", 20)
	russian := strings.Repeat("Съешь же ещё этих мягких французских булок, да выпей чаю. ", 20)
	base64 := strings.Repeat("MIICjTCCAhSgAwIBAgIIdebfy8FoW6gwCgYIKoZIzj0EAwIw", 20)
	chinese := strings.Repeat("敏捷的棕色狐狸跳过了那只懒狗，然后跑开了。", 20)
	tests := map[string]struct {
		more, less string
	}{
		// Tokenizers split numbers into 1–3 digit pieces; words of 4–5
		// letters are one token, so digits cost more per character.
		"digits>english": {digits, english},
		// Random text has no merges: more per character than words.
		"base64>english": {base64, english},
		// One Han character carries about as much as a short word.
		"chinese>russian": {chinese, russian},
		// Cyrillic words are fewer and longer tokens than Latin ones in most
		// vocabularies, but still more per character than English.
		"russian>english": {russian, english},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if a, b := perChar(tc.more), perChar(tc.less); a <= b {
				t.Errorf("per char %.3f <= %.3f", a, b)
			}
		})
	}
	if r := perChar(russian); r >= 1 {
		t.Errorf("Cyrillic %.2f tokens/char, want under 1", r)
	}
	if r := perChar(english); r < 1/6.0 || r > 1/3.5 {
		t.Errorf("English %.3f tokens/char, want about one per 4–5 chars", r)
	}
	if r := perChar(chinese); r < 0.4 || r > 1.1 {
		t.Errorf("Chinese %.3f tokens/char, want 0.4–1.1", r)
	}
}

func TestEstimateMsgPictures(t *testing.T) {
	m := Msg{Role: User, Text: "what is this?"}
	with := m
	with.Images = 2
	if d := EstimateMsg(with) - EstimateMsg(m); d != 2*PictureTokens {
		t.Errorf("two pictures add %d, want %d", d, 2*PictureTokens)
	}
}

// Plan counts the summary block and the message it rides on separately; the
// sum must never be under the estimate of the joined text.
func TestEstimateJoinAfterBlankLine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.String().Draw(t, "a")
		b := rapid.String().Draw(t, "b")
		joined := EstimateText(a + "\n\n" + b)
		if parts := EstimateText(a+"\n\n") + EstimateText(b) + 1; joined > parts {
			t.Fatalf("joined %d > parts %d", joined, parts)
		}
	})
}

func BenchmarkEstimateText(b *testing.B) {
	s := strings.Repeat("func (c *Client) Do(ctx context.Context) error { return nil } // Привет 你好 12345\n", 10000)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		EstimateText(s)
	}
}

func TestCharCount(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		if got, want := charCount(s), utf8.RuneCountInString(s); got != want {
			t.Fatalf("charCount(%q) = %d, want %d", s, got, want)
		}
	})
}
