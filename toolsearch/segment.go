package toolsearch

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// clauseJoint splits a sentence where people chain separate asks: "…, and
// then …", "… Also …", ", and finally …". A bare "and" does not split: it
// joins the objects of one ask far more often ("the sum of 3 and 5").
var clauseJoint = regexp.MustCompile(`(?i),?\s+(?:and\s+)?(?:then|also|additionally|afterwards|after that|finally|lastly|next|furthermore|moreover|as well as|in addition(?: to that)?)\b,?\s*`)

// jointWords are the words every match of clauseJoint contains.
var jointWords = []string{"then", "also", "additionally", "afterwards", "after that", "finally", "lastly",
	"next", "furthermore", "moreover", "as well as", "in addition"}

// segments cuts a request into the separate asks it contains, so a message
// asking for three things gets tools for all three rather than three for the
// wordiest one. A request with one ask comes back as one segment.
func segments(query string) []string {
	var out []string
	for _, s := range sentences(query) {
		for _, c := range clauses(s) {
			if c = strings.TrimSpace(c); c != "" {
				out = append(out, c)
			}
		}
	}
	return out
}

// clauses splits a sentence at clauseJoint. The pattern is the slowest part
// of a search, so a sentence where it cannot match skips it; only an ASCII
// one can tell, since (?i) folds a few other letters into ASCII ones ("ſ").
func clauses(s string) []string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return clauseJoint.Split(s, -1)
		}
	}
	if mayJoin(s) {
		return clauseJoint.Split(s, -1)
	}
	return []string{s}
}

// mayJoin reports whether clauseJoint can match in ASCII s: every match has
// a joint word, in any case, right after a space and before a word boundary
// ("authenticate" and "nextcloud" hold none).
func mayJoin(s string) bool {
	for i := 1; i < len(s); i++ {
		if !isSpace(s[i-1]) {
			continue
		}
		for _, w := range jointsBy[s[i]|0x20] {
			if end := i + len(w); end <= len(s) && strings.EqualFold(s[i:end], w) && (end == len(s) || !isWordByte(s[end])) {
				return true
			}
		}
	}
	return false
}

// jointsBy lists jointWords by their first letter.
var jointsBy = func() (by [256][]string) {
	for _, w := range jointWords {
		by[w[0]] = append(by[w[0]], w)
	}
	return by
}()

// isSpace is the pattern's \s; isWordByte is a byte of its \w.
func isSpace(c byte) bool    { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }
func isWordByte(c byte) bool { return isASCIIAlnum(c) || c == '_' }

// sentences splits a request into sentences: at a stop, question or
// exclamation mark or semicolon (and any closing quotes or brackets)
// followed by space, at line breaks, and at a written "\n". A stop inside
// "3.5" or "example.com" has no space after it and does not split. It is the
// regexp `[.?!;]+["')\]]*\s+|\n+|\\n` written out, as Split would cut
// (TestSentencesAsPattern): the pattern was a quarter of a search's time.
func sentences(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		if end := sentenceEnd(text, i); end > 0 {
			out = append(out, text[start:i])
			start, i = end, end-1
		}
	}
	return append(out, text[start:])
}

// sentenceEnd returns where the sentence break starting at text[i] ends, or
// 0 if none starts there.
func sentenceEnd(text string, i int) int {
	switch c := text[i]; {
	case c == '.' || c == '?' || c == '!' || c == ';': // per byte: no call
		j := skip(text, i, ".?!;")
		j = skip(text, j, "\"')]")
		if k := skip(text, j, " \t\n\f\r"); k > j {
			return k
		}
	case c == '\n':
		return skip(text, i, "\n")
	case c == '\\' && i+1 < len(text) && text[i+1] == 'n':
		return i + 2
	}
	return 0
}

// skip returns the end of the run of bytes of set that starts at text[i].
func skip(text string, i int, set string) int {
	for i < len(text) && strings.IndexByte(set, text[i]) >= 0 {
		i++
	}
	return i
}
