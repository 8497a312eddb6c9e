package toolsearch

import (
	"regexp"
	"strings"
)

// sentenceEnd splits a request into sentences: a stop, question or
// exclamation mark or semicolon followed by space, or a line break. A stop
// inside "3.5" or "example.com" has no space after it and does not split.
var sentenceEnd = regexp.MustCompile(`[.?!;]+["')\]]*\s+|\n+|\\n`)

// clauseJoint splits a sentence where people chain separate asks: "…, and
// then …", "… Also …", ", and finally …". A bare "and" does not split: it
// joins the objects of one ask far more often ("the sum of 3 and 5").
var clauseJoint = regexp.MustCompile(`(?i),?\s+(?:and\s+)?(?:then|also|additionally|afterwards|after that|finally|lastly|next|furthermore|moreover|as well as|in addition(?: to that)?)\b,?\s*`)

// segments cuts a request into the separate asks it contains, so a message
// asking for three things gets tools for all three rather than three for the
// wordiest one. A request with one ask comes back as one segment.
func segments(query string) []string {
	var out []string
	for _, s := range sentenceEnd.Split(query, -1) {
		for _, c := range clauseJoint.Split(s, -1) {
			if c = strings.TrimSpace(c); c != "" {
				out = append(out, c)
			}
		}
	}
	return out
}
