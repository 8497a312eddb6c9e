package attachments

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// pdfMaxObjects bounds the object numbers a PDF's cross-reference sections
// may name. The library sizes its table by the largest it reads (32 bytes
// each) and follows /Prev links with no check for a cycle, all before it
// answers anything: a 264-byte upload naming object 10,000,000 took 305 MB
// and 1.5 s to open, one naming a billion took the daemon's memory, and a
// /Prev pointing at its own section never returned. checkXrefs walks the
// same sections the library will, first, with none of that.
const (
	pdfMaxObjects = 1 << 22
	pdfMaxXrefs   = 1024 // sections in one /Prev chain
)

var errPDFXref = errors.New("cross-reference sections out of bounds")

// checkXrefs follows the sections the library reads (from the startxref in
// the last 100 bytes, then each /Prev) and refuses a file whose sections
// name an object past pdfMaxObjects, link in a cycle or chain past
// pdfMaxXrefs. What it cannot make sense of it leaves to the library, which
// refuses it.
func checkXrefs(f io.ReaderAt, size int64) error {
	tail := make([]byte, 100)
	n, _ := f.ReadAt(tail, max(size-100, 0))
	i := bytes.LastIndex(tail[:n], []byte("startxref"))
	if i < 0 {
		return nil
	}
	lx := newPDFLexer(f, max(size-100, 0)+int64(i), size)
	lx.token() // startxref
	off, ok := lx.int()
	seen := map[int64]bool{}
	for ok {
		if seen[off] || len(seen) >= pdfMaxXrefs {
			return fmt.Errorf("%w: /Prev links in a cycle or past %d sections", errPDFXref, pdfMaxXrefs)
		}
		seen[off] = true
		var err error
		if off, ok, err = checkXrefSection(newPDFLexer(f, off, size)); err != nil {
			return err
		}
	}
	return nil
}

// checkXrefSection checks one section, a table or a stream, and returns
// its /Prev.
func checkXrefSection(lx *pdfLexer) (prev int64, ok bool, err error) {
	if tok := lx.token(); tok == "xref" {
		for {
			tok := lx.token()
			if tok == "trailer" || tok == "" {
				break
			}
			start, ok1 := pdfInt(tok)
			n, ok2 := lx.int()
			if !ok1 || !ok2 {
				return 0, false, nil // the library refuses it
			}
			if err := objectsFit(start, n); err != nil {
				return 0, false, err
			}
			for i := int64(0); i < 3*n; i++ { // the entries
				if lx.token() == "" {
					break
				}
			}
		}
	} else if _, isInt := pdfInt(tok); !isInt {
		return 0, false, nil
	} else if _, isInt := lx.int(); !isInt || lx.token() != "obj" { // a stream's "N G obj"
		return 0, false, nil
	}
	return checkXrefDict(lx)
}

// checkXrefDict reads a trailer or xref stream dictionary for /Size,
// /Index and /Prev, checking the first two.
func checkXrefDict(lx *pdfLexer) (prev int64, ok bool, err error) {
	if lx.token() != "<<" {
		return 0, false, nil
	}
	for {
		key := lx.token()
		switch key {
		case ">>", "":
			return prev, ok, nil
		case "/Size":
			size, _ := lx.int()
			if err := objectsFit(0, size); err != nil {
				return 0, false, err
			}
		case "/Prev":
			prev, ok = lx.int()
		case "/Index":
			if lx.token() != "[" {
				continue
			}
			for {
				start, ok1 := lx.int()
				n, ok2 := lx.int()
				if !ok1 || !ok2 {
					break
				}
				if err := objectsFit(start, n); err != nil {
					return 0, false, err
				}
			}
		default:
			lx.skipValue()
		}
	}
}

func objectsFit(start, n int64) error {
	if start < 0 || n < 0 || start > pdfMaxObjects || n > pdfMaxObjects-start {
		return fmt.Errorf("%w: names objects %d to %d, over %d", errPDFXref, start, start+n, pdfMaxObjects)
	}
	return nil
}

// pdfLexer reads PDF tokens as the library's lexer does: spaces and
// comments skipped, strings and hex strings whole (returned as "()" and
// "<>"), names with their #xx escapes decoded, everything else a run of
// regular characters.
type pdfLexer struct {
	r      *bufio.Reader
	peeked string
}

func newPDFLexer(f io.ReaderAt, off, size int64) *pdfLexer {
	if off < 0 || off > size {
		off = size
	}
	return &pdfLexer{r: bufio.NewReader(io.NewSectionReader(f, off, size-off))}
}

// int reads an integer token; a number too big for int64 reads as the
// largest, which no bound lets pass.
func (lx *pdfLexer) int() (int64, bool) {
	tok := lx.token()
	if v, ok := pdfInt(tok); ok {
		return v, true
	}
	lx.peeked = tok
	return 0, false
}

// pdfInt reads tok as the library does an integer: an optional sign and
// digits; one out of int64's range reads as the largest.
func pdfInt(tok string) (int64, bool) {
	digits := strings.TrimLeft(tok, "+-")
	if digits == "" || len(tok)-len(digits) > 1 || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	v, err := strconv.ParseInt(tok, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return math.MaxInt64, true
	}
	return v, err == nil
}

// skipValue skips one value: a dictionary or array whole, else one token.
func (lx *pdfLexer) skipValue() {
	depth := 0
	for {
		switch lx.token() {
		case "<<", "[":
			depth++
		case ">>", "]":
			depth--
		case "":
			return
		}
		if depth <= 0 {
			return
		}
	}
}

func pdfSpace(c byte) bool { return bytes.IndexByte([]byte("\x00\t\n\f\r "), c) >= 0 }

func pdfDelim(c byte) bool { return bytes.IndexByte([]byte("<>()[]{}/%"), c) >= 0 }

// token returns the next token, or "" at the end.
func (lx *pdfLexer) token() string {
	if t := lx.peeked; t != "" {
		lx.peeked = ""
		return t
	}
	c, err := lx.r.ReadByte()
	for err == nil && (pdfSpace(c) || c == '%') {
		if c == '%' {
			for err == nil && c != '\r' && c != '\n' {
				c, err = lx.r.ReadByte()
			}
			continue
		}
		c, err = lx.r.ReadByte()
	}
	if err != nil {
		return ""
	}
	switch c {
	case '<', '>':
		if next, err := lx.r.ReadByte(); err == nil && next == c {
			return string([]byte{c, c})
		}
		_ = lx.r.UnreadByte()
		if c == '<' {
			_, _ = lx.r.ReadString('>')
			return "<>"
		}
		return ">"
	case '(':
		lx.skipString()
		return "()"
	case '[', ']', '{', '}', ')':
		return string(c)
	}
	return lx.run(c)
}

// run reads a name (c is '/') or a run of regular characters beginning
// with c: a name with its #xx escapes decoded, a number with its leading
// zeros dropped. It keeps 64 bytes, enough for every name or keyword that
// matters here and more digits than an int64 has.
func (lx *pdfLexer) run(c byte) string {
	name := c == '/'
	var b []byte
	lead, zero := !name, false // only a sign or zeros so far; a zero dropped
	for {
		switch {
		case lead && c == '0':
			zero = true
		case len(b) < 64:
			lead = lead && (c == '+' || c == '-')
			b = append(b, c)
		}
		next, err := lx.r.ReadByte()
		if err != nil {
			break
		}
		if pdfSpace(next) || pdfDelim(next) {
			_ = lx.r.UnreadByte()
			break
		}
		if next == '#' && name {
			if h, err := lx.r.Peek(2); err == nil {
				if v, err := strconv.ParseUint(string(h), 16, 8); err == nil {
					_, _ = lx.r.Discard(2)
					next = byte(v)
				}
			}
		}
		c = next
	}
	if lead && zero {
		b = append(b, '0')
	}
	return string(b)
}

// skipString skips a literal string after its "(": nested parentheses
// balance, a backslash escapes the next byte.
func (lx *pdfLexer) skipString() {
	for depth := 1; depth > 0; {
		c, err := lx.r.ReadByte()
		if err != nil {
			return
		}
		switch c {
		case '\\':
			_, _ = lx.r.ReadByte()
		case '(':
			depth++
		case ')':
			depth--
		}
	}
}
