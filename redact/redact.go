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

func (m *Masker) reserve(s string) {
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
	for _, r := range rules {
		found = append(found, r.find(s)...)
	}
	for _, loc := range legacyRe.FindAllStringIndex(s, -1) {
		found = append(found, span{loc[0], loc[1]})
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
