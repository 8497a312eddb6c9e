package toolsearch

import (
	"bytes"
	"sync"
	"sync/atomic"
)

// stem reduces an English word to a stem with the Porter (1980) algorithm,
// so "calculates", "calculating" and "calculation" meet at "calcul". Tool
// descriptions and people's messages inflect the same verbs differently, and
// without this the two sides rarely share a term. Words of three letters or
// fewer, and anything with a digit, are left alone.
func stem(w string) string {
	if len(w) <= 3 || !isLowerAlpha(w) {
		return w
	}
	if s, ok := stemCache.Load(w); ok {
		return s.(string)
	}
	s := porter(w)
	if stemCacheSize.Add(1) <= stemCacheMax {
		stemCache.Store(w, s)
	}
	return s
}

// stemCache memoizes stems: a registry's vocabulary is a few thousand words
// used over and over, and stemming was most of the cost of indexing. It is
// bounded so a stream of odd queries cannot grow it without end.
var (
	stemCache     sync.Map
	stemCacheSize atomic.Int64
)

const stemCacheMax = 200_000

func porter(w string) string {
	b := []byte(w)
	b = step1a(b)
	b = step1b(b)
	b = step1c(b)
	b = step2(b)
	b = step3(b)
	b = step4(b)
	b = step5(b)
	return string(b)
}

func isLowerAlpha(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

// isCons reports whether b[i] is a consonant in Porter's sense: y after a
// consonant is a vowel.
func isCons(b []byte, i int) bool {
	switch b[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !isCons(b, i-1)
	}
	return true
}

// measure counts the VC sequences in b: [C](VC)^m[V].
func measure(b []byte) int {
	m, i, n := 0, 0, len(b)
	for i < n && isCons(b, i) {
		i++
	}
	for i < n {
		for i < n && !isCons(b, i) {
			i++
		}
		if i >= n {
			break
		}
		for i < n && isCons(b, i) {
			i++
		}
		m++
	}
	return m
}

func hasVowel(b []byte) bool {
	for i := range b {
		if !isCons(b, i) {
			return true
		}
	}
	return false
}

func endsDoubleCons(b []byte) bool {
	n := len(b)
	return n >= 2 && b[n-1] == b[n-2] && isCons(b, n-1)
}

// endsCVC: consonant-vowel-consonant where the last is not w, x or y.
func endsCVC(b []byte) bool {
	n := len(b)
	if n < 3 || !isCons(b, n-3) || isCons(b, n-2) || !isCons(b, n-1) {
		return false
	}
	c := b[n-1]
	return c != 'w' && c != 'x' && c != 'y'
}

func hasSuffix(b []byte, s string) bool { return bytes.HasSuffix(b, []byte(s)) }

// replaceIf swaps suffix s for r when the remaining stem has measure > minM.
// It reports whether s matched at all, so rule lists stop at the first match.
func replaceIf(b []byte, s, r string, minM int) ([]byte, bool) {
	if !hasSuffix(b, s) {
		return b, false
	}
	base := b[:len(b)-len(s)]
	if measure(base) > minM {
		return append(base[:len(base):len(base)], r...), true
	}
	return b, true
}

func step1a(b []byte) []byte {
	switch {
	case hasSuffix(b, "sses"):
		return b[:len(b)-2]
	case hasSuffix(b, "ies"):
		return b[:len(b)-2]
	case hasSuffix(b, "ss"):
		return b
	case hasSuffix(b, "s"):
		return b[:len(b)-1]
	}
	return b
}

func step1b(b []byte) []byte {
	if hasSuffix(b, "eed") {
		if measure(b[:len(b)-3]) > 0 {
			return b[:len(b)-1]
		}
		return b
	}
	var base []byte
	switch {
	case hasSuffix(b, "ed") && hasVowel(b[:len(b)-2]):
		base = b[:len(b)-2]
	case hasSuffix(b, "ing") && hasVowel(b[:len(b)-3]):
		base = b[:len(b)-3]
	default:
		return b
	}
	base = base[:len(base):len(base)]
	switch {
	case hasSuffix(base, "at"), hasSuffix(base, "bl"), hasSuffix(base, "iz"):
		return append(base, 'e')
	case endsDoubleCons(base):
		c := base[len(base)-1]
		if c != 'l' && c != 's' && c != 'z' {
			return base[:len(base)-1]
		}
		return base
	case measure(base) == 1 && endsCVC(base):
		return append(base, 'e')
	}
	return base
}

func step1c(b []byte) []byte {
	if hasSuffix(b, "y") && hasVowel(b[:len(b)-1]) {
		c := append([]byte{}, b...)
		c[len(c)-1] = 'i'
		return c
	}
	return b
}

var step2Rules = [][2]string{
	{"ational", "ate"}, {"tional", "tion"}, {"enci", "ence"}, {"anci", "ance"},
	{"izer", "ize"}, {"abli", "able"}, {"alli", "al"}, {"entli", "ent"},
	{"eli", "e"}, {"ousli", "ous"}, {"ization", "ize"}, {"ation", "ate"},
	{"ator", "ate"}, {"alism", "al"}, {"iveness", "ive"}, {"fulness", "ful"},
	{"ousness", "ous"}, {"aliti", "al"}, {"iviti", "ive"}, {"biliti", "ble"},
}

func step2(b []byte) []byte {
	for _, r := range step2Rules {
		if nb, ok := replaceIf(b, r[0], r[1], 0); ok {
			return nb
		}
	}
	return b
}

var step3Rules = [][2]string{
	{"icate", "ic"}, {"ative", ""}, {"alize", "al"}, {"iciti", "ic"},
	{"ical", "ic"}, {"ful", ""}, {"ness", ""},
}

func step3(b []byte) []byte {
	for _, r := range step3Rules {
		if nb, ok := replaceIf(b, r[0], r[1], 0); ok {
			return nb
		}
	}
	return b
}

var step4Suffixes = []string{
	"al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment",
	"ent", "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize",
}

func step4(b []byte) []byte {
	// Longest suffix first among those that match, as Porter specifies.
	best := ""
	for _, s := range step4Suffixes {
		if hasSuffix(b, s) && len(s) > len(best) {
			best = s
		}
	}
	if best == "" {
		return b
	}
	base := b[:len(b)-len(best)]
	if measure(base) <= 1 {
		return b
	}
	if best == "ion" {
		if n := len(base); n == 0 || (base[n-1] != 's' && base[n-1] != 't') {
			return b
		}
	}
	return base
}

func step5(b []byte) []byte {
	if hasSuffix(b, "e") {
		base := b[:len(b)-1]
		m := measure(base)
		if m > 1 || (m == 1 && !endsCVC(base)) {
			b = base
		}
	}
	if measure(b) > 1 && endsDoubleCons(b) && b[len(b)-1] == 'l' {
		b = b[:len(b)-1]
	}
	return b
}
