package attachments

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"
)

// searchLineKeep is how much of one line file_search looks at: a line
// longer than this (a minified file) is matched on its first MiB only, so a
// search never holds more than that in memory.
const searchLineKeep = 1 << 20

// readLine reads one line from br into dst[:0], keeping at most keep bytes
// of it, and returns the kept bytes and the line's full length without its
// end of line. It returns io.EOF only when no line was left.
func readLine(br *bufio.Reader, dst []byte, keep int) ([]byte, int64, error) {
	dst = dst[:0]
	var n int64
	var prev, last byte // the last two bytes read, to strip "\n" or "\r\n"
	for {
		chunk, err := br.ReadSlice('\n')
		n += int64(len(chunk))
		for _, c := range chunk[max(0, len(chunk)-2):] {
			prev, last = last, c
		}
		if room := keep - len(dst); room > 0 {
			dst = append(dst, chunk[:min(room, len(chunk))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && n == 0 {
			return dst, 0, io.EOF
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return dst, n, err
		}
		break
	}
	if last == '\n' {
		n--
		if n > 0 && prev == '\r' {
			n--
		}
	}
	if int64(len(dst)) > n {
		dst = dst[:n]
	}
	return dst, n, nil
}

// lineReader positions a buffered reader at the nearest indexed line start
// at or before line and returns the line number it is at.
func lineReader(f *os.File, facts Facts, line int64) (*bufio.Reader, int64, error) {
	m := seekPoint(facts.marks, line)
	if _, err := f.Seek(m.Off, io.SeekStart); err != nil {
		return nil, 0, err
	}
	return bufio.NewReaderSize(f, 64<<10), m.Line, nil
}

// fileReadText returns lines from..to (1-based, inclusive), each prefixed
// with its number, stopping before the text passes maxBytes and saying how
// to get the rest.
func fileReadText(ctx context.Context, f *os.File, facts Facts, from, to int64, maxBytes int) (string, error) {
	if facts.Lines == 0 {
		return "The file is empty.", nil
	}
	if from > facts.Lines {
		return fmt.Sprintf("The file has %d lines; from_line %d is past the end.", facts.Lines, from), nil
	}
	to = min(to, facts.Lines)
	br, at, err := lineReader(f, facts, from)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	var buf []byte
	last := from - 1
	for ; at <= to; at++ {
		if at%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		keep := 0
		if at >= from {
			keep = max(0, maxBytes-b.Len())
		}
		line, full, err := readLine(br, buf, keep)
		buf = line[:0]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		if at < from {
			continue
		}
		entry := fmt.Sprintf("%d\t%s\n", at, strings.ToValidUTF8(string(line), "\uFFFD"))
		if b.Len() > 0 && b.Len()+len(entry) > maxBytes {
			break
		}
		if int64(len(line)) < full {
			entry = strings.TrimSuffix(entry, "\n") + fmt.Sprintf(" [line cut: %d of %d bytes shown]\n", len(line), full)
		}
		b.WriteString(entry)
		last = at
	}
	if last < to {
		fmt.Fprintf(&b, "[lines %d-%d of %d shown; the rest did not fit in one call: call file_read with from_line=%d]", from, last, facts.Lines, last+1)
	} else {
		fmt.Fprintf(&b, "[lines %d-%d of %d]", from, last, facts.Lines)
	}
	return b.String(), nil
}

// fileSearchText lists the lines, from fromLine on, that hold every word
// (case-insensitive), with their numbers; it scans to the end to count all
// matches but shows at most maxHits.
func fileSearchText(ctx context.Context, f *os.File, facts Facts, words []string, fromLine int64, maxHits int) (string, error) {
	br, at, err := lineReader(f, facts, fromLine)
	if err != nil {
		return "", err
	}
	m := newMatcher(words)
	var b strings.Builder
	var buf []byte
	hits, more, lastShown := 0, 0, int64(0)
	for ; ; at++ {
		if at%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		line, _, err := readLine(br, buf, searchLineKeep)
		buf = line[:0]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		if at < fromLine || !m.match(line) {
			continue
		}
		if hits >= maxHits {
			more++
			continue
		}
		hits++
		lastShown = at
		fmt.Fprintf(&b, "%d: %s\n", at, m.snippet(strings.ToValidUTF8(string(line), "\uFFFD"), 240))
	}
	fmt.Fprintf(&b, "[%d lines matched from line %d to the end (%d lines)", hits+more, fromLine, facts.Lines)
	if more > 0 {
		fmt.Fprintf(&b, "; %d more after line %d: call file_search with from_line=%d", more, lastShown, lastShown+1)
	}
	b.WriteString("]")
	return b.String(), nil
}

// matcher finds lines or pages holding every one of some words, ignoring case.
type matcher struct {
	words [][]byte
	low   []byte
}

func newMatcher(words []string) *matcher {
	m := &matcher{}
	for _, w := range words {
		if w = strings.TrimSpace(w); w != "" {
			m.words = append(m.words, bytes.ToLower([]byte(w)))
		}
	}
	return m
}

// splitWords splits the model's query into words.
func splitWords(s string) []string { return strings.Fields(s) }

func (m *matcher) lower(s []byte) []byte {
	if cap(m.low) < len(s) {
		m.low = make([]byte, len(s), 2*len(s))
	}
	low := m.low[:len(s)]
	for i, c := range s {
		if c >= utf8.RuneSelf {
			return bytes.ToLower(s) // rare: non-ASCII text takes the full path
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		low[i] = c
	}
	return low
}

func (m *matcher) match(s []byte) bool {
	if len(m.words) == 0 {
		return false
	}
	low := m.lower(s)
	for _, w := range m.words {
		if !bytes.Contains(low, w) {
			return false
		}
	}
	return true
}

// any reports whether s holds at least one of the words.
func (m *matcher) any(s string) bool {
	low := m.lower([]byte(s))
	for _, w := range m.words {
		if bytes.Contains(low, w) {
			return true
		}
	}
	return false
}

// snippet returns about width bytes of text around the first word, with
// runs of white space collapsed.
func (m *matcher) snippet(text string, width int) string {
	low := strings.ToLower(text)
	if len(low) != len(text) {
		text = low // positions must agree; lower case is fine for a snippet
	}
	at := 0
	if len(m.words) > 0 {
		at = max(0, strings.Index(low, string(m.words[0])))
	}
	start := max(0, at-width/2)
	end := min(len(text), start+width)
	for start > 0 && !utf8.RuneStart(text[start]) {
		start--
	}
	for end < len(text) && !utf8.RuneStart(text[end]) {
		end++
	}
	s := strings.Join(strings.FieldsFunc(text[start:end], unicode.IsSpace), " ")
	if start > 0 {
		s = "…" + s
	}
	if end < len(text) {
		s += "…"
	}
	return s
}
