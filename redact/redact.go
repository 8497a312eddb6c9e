// Package redact hides secrets in text before a model that must not see them
// reads it: the summariser's and the learner's inputs, the /compact focus,
// stored memories. It is pure: no I/O, no state beyond one Masker's run.
//
// A secret becomes [secret-N], numbered in order of appearance within one
// run of texts read together (a Masker); the same value gets the same number
// within that run. The placeholder says nothing about the secret itself (no
// hash, no length, no kind), so it cannot confirm a guess. Masking is
// idempotent: placeholders are left alone and masked text masks to itself.
//
// The rules are hand-written, not a library's: the secret scanners in Go
// (gitleaks, trufflehog) are whole programs with their own config formats and
// detectors that call out to verify keys, and none of them knows the prose
// forms people type into a chat ("das Passwort lautet …", "my pin is 1234").
package redact

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Masker masks a run of texts that a model reads together (a prompt's
// summary, lines and focus), so their placeholders share one numbering. The
// zero value is ready; a Masker is not safe for concurrent use.
type Masker struct {
	ids  map[string]int
	last int
}

// NewMasker returns a Masker whose numbers start after every placeholder
// already in beside (texts masked earlier that the masked ones will be read
// with), so a new secret never takes an old secret's number.
func NewMasker(beside ...string) *Masker {
	m := &Masker{}
	for _, s := range beside {
		m.reserve(s)
	}
	return m
}

// Mask masks one text with a fresh Masker.
func Mask(s string) string { return NewMasker().Mask(s) }

// Mask replaces every secret in s with its placeholder. Placeholders already
// in s stay as they are, and their numbers are not given out again; the old
// hashed form ([secret:kind:1a2b3c]) is replaced, since it confirms a guess.
func (m *Masker) Mask(s string) string {
	m.reserve(s)
	spans := secretSpans(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.start])
		b.WriteString(m.placeholder(s[sp.start:sp.end]))
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// placeholderRe finds the placeholders Mask writes.
var placeholderRe = regexp.MustCompile(`\[secret-([0-9]{1,9})\]`)

// legacyRe finds the placeholders of the earlier masker: three bytes of the
// secret's sha256, which confirms a guess.
var legacyRe = regexp.MustCompile(`\[secret:[a-z-]+:[0-9a-f]{6}\]`)

// The literal starts of placeholderRe and legacyRe: most texts hold
// neither, and a Contains is cheaper than setting up a regexp's search
// (a fold masks hundreds of short lines, each on its own).
const (
	placeholderMark = "[secret-"
	legacyMark      = "[secret:"
)

func (m *Masker) reserve(s string) {
	if !strings.Contains(s, placeholderMark) {
		return
	}
	for _, sub := range placeholderRe.FindAllStringSubmatch(s, -1) {
		if n, err := strconv.Atoi(sub[1]); err == nil && n > m.last {
			m.last = n
		}
	}
}

func (m *Masker) placeholder(secret string) string {
	if m.ids == nil {
		m.ids = map[string]int{}
	}
	n, ok := m.ids[secret]
	if !ok {
		m.last++
		n = m.last
		m.ids[secret] = n
	}
	return "[secret-" + strconv.Itoa(n) + "]"
}

type span struct{ start, end int }

// secretSpans finds every secret in s, merged where rules overlap, in order,
// leaving out anything that touches a placeholder.
func secretSpans(s string) []span {
	var found []span
	hits := ruleHints.find(s)
	for i, r := range rules {
		if r.hints == nil {
			found = append(found, r.find(s)...)
			continue
		}
		if hits != nil {
			found = append(found, nearHints(s, r, hits[i])...)
		}
	}
	if strings.Contains(s, legacyMark) {
		for _, loc := range legacyRe.FindAllStringIndex(s, -1) {
			found = append(found, span{loc[0], loc[1]})
		}
	}
	if len(found) == 0 {
		return nil
	}
	kept := placeholderRe.FindAllStringIndex(s, -1)
	found = slices.DeleteFunc(found, func(sp span) bool {
		for _, k := range kept {
			if sp.start < k[1] && k[0] < sp.end {
				return true
			}
		}
		return sp.start >= sp.end
	})
	slices.SortFunc(found, func(a, b span) int { return a.start - b.start })
	var out []span
	for _, sp := range found {
		if n := len(out); n > 0 && sp.start < out[n-1].end {
			out[n-1].end = max(out[n-1].end, sp.end)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// Drop returns s without its placeholders, for code that reads facts out
// of masked text and must not take a placeholder's number for one.
func Drop(s string) string { return placeholderRe.ReplaceAllString(s, "") }

// How far a match may reach past a hint: a name, a few words of what it is
// for, and a value.
const (
	windowBack  = 256
	windowAhead = 600
)

// nearHints runs r where its hints are. A named rule is tried anchored at
// the start of the word holding the hint, right before the hint, and at it
// in scripts without spaces; any
// other rule searches the stretch from that word's start.
func nearHints(s string, r rule, hits []hit) []span {
	var out []span
	add := func(from int, sps ...span) {
		for _, sp := range sps {
			out = append(out, span{from + sp.start, from + sp.end})
		}
	}
	lastWord := -1
	for _, h := range hits {
		p := h.at
		end := runeAt(s, min(len(s), p+windowAhead))
		word := wordStart(s, p)
		if r.prefix == nil {
			if word != lastWord {
				add(word, r.find(s[word:end])...)
			}
			lastWord = word
			continue
		}
		froms := []int{word, runeAt(s, max(0, p-1))}
		if h.spaceless {
			froms = append(froms, p)
		}
		for _, from := range froms {
			if sp, ok := r.prefix(s[from:end]); ok {
				add(from, sp)
			}
		}
	}
	return out
}

// hit is where a hint occurs; spaceless hints are of scripts written
// without spaces, so a name may start right at them.
type hit struct {
	at        int
	spaceless bool
}

// hintIndex finds every rule's hints in one pass over a text. Searching
// for each of the 127 hints in turn over the whole text (strings.Index
// stops at every occurrence of a hint's first byte, and most hints start
// with a common letter) was most of a fold's masking.
type hintIndex struct {
	byFirst [256][]hintEntry
	// pairs has a bit for every two bytes a hint may start with: most
	// places in a text start none, and a bit test rules them out.
	pairs [1 << 16 / 64]uint64
	hints int // entries in all, one per rule and hint
	rules int
}

type hintEntry struct {
	rule, id  int
	hint      string
	spaceless bool
}

func newHintIndex(rs []rule) *hintIndex {
	x := &hintIndex{rules: len(rs)}
	for i, r := range rs {
		for _, h := range r.hints {
			if h == "" {
				continue
			}
			first, _ := utf8.DecodeRuneInString(h)
			spaceless := unicode.In(first, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
			x.byFirst[h[0]] = append(x.byFirst[h[0]], hintEntry{rule: i, id: x.hints, hint: h, spaceless: spaceless})
			x.hints++
			if len(h) > 1 {
				x.markPair(h[0], h[1])
				continue
			}
			for c := range 256 { // a one-byte hint starts whatever follows it
				x.markPair(h[0], byte(c))
			}
		}
	}
	return x
}

func (x *hintIndex) markPair(a, b byte) {
	k := int(a)<<8 | int(b)
	x.pairs[k/64] |= 1 << (k % 64)
}

// ruleHints indexes the hints of rules.
var ruleHints = newHintIndex(rules)

// find returns, for each rule, where its hints occur in s with its ASCII
// letters lowered (lowerByte), in order; nil when none occurs. Occurrences
// of one hint do not overlap (the search for it goes on after each), as a
// search hint by hint would find them. It lowers byte by byte as it reads
// and allocates only at the first hit: most texts a fold masks are short
// lines with no hint, and a lowered copy and the two tables were most of
// what masking one cost.
func (x *hintIndex) find(s string) [][]hit {
	var out [][]hit
	var next []int // where each hint may next be found
	for i := 0; i < len(s); i++ {
		c, c2 := lowerByte(s[i]), byte(0)
		if i+1 < len(s) {
			c2 = lowerByte(s[i+1])
			if k := int(c)<<8 | int(c2); x.pairs[k/64]&(1<<(k%64)) == 0 {
				continue
			}
		}
		for _, e := range x.byFirst[c] {
			if len(e.hint) > 1 && (i+1 == len(s) || e.hint[1] != c2) {
				continue // its second byte rules it out here
			}
			if (next == nil || i >= next[e.id]) && hasLowerPrefix(s[i:], e.hint) {
				if out == nil {
					out, next = make([][]hit, x.rules), make([]int, x.hints)
				}
				out[e.rule] = append(out[e.rule], hit{i, e.spaceless})
				next[e.id] = i + len(e.hint)
			}
		}
	}
	return out
}

// hasLowerPrefix reports whether s, its ASCII letters lowered, starts with
// prefix.
func hasLowerPrefix(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for j := range len(prefix) {
		if lowerByte(s[j]) != prefix[j] {
			return false
		}
	}
	return true
}

// wordStart is where the word holding s[p] starts (letters, digits, '_',
// '.', '-' count as word), less one rune, at most windowBack bytes back.
func wordStart(s string, p int) int {
	floor := max(0, p-windowBack)
	for p > floor {
		r, n := utf8.DecodeLastRuneInString(s[:p])
		p -= n
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '.' || r == '-') {
			break
		}
	}
	return runeAt(s, p)
}

// runeAt moves i back to the start of the rune it falls in.
func runeAt(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// lowerByte lowers an ASCII letter and leaves every other byte, so offsets
// in a lowered text are offsets into the text.
func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
