package openaifake

import (
	"bytes"
	"strings"
)

// blank finds the request's top-level "tools" member and, when its value
// is a list already decoded, overwrites that value in raw with null and
// spaces, and returns the list and where it starts: the decoder then never
// scans it (in the scale bench the list is four fifths of every body, and
// scanning it was an eighth of the fake's CPU), and the caller writes the
// list back after decoding (raw is also Received.Raw). Overwriting in
// place copies nothing of a body of 100 KB of messages. Anything blank
// does not follow exactly (another spelling of the name, an escape in a
// name, a body that is not an object, a list not known) leaves raw as it
// is, for the decoder to read or refuse as before. blank does not check
// the JSON: the decoder still reads all of the body but the list, whose
// bytes it checked when it first decoded them.
func (l *toolLists) blank(raw []byte) (*toolList, int) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, 0
	}
	start, end := -1, -1
	var tl *toolList
	for i = skipSpace(raw, i+1); i < len(raw) && raw[i] != '}'; {
		if raw[i] == ',' {
			i = skipSpace(raw, i+1)
			continue
		}
		if raw[i] != '"' {
			return nil, 0
		}
		nameEnd := skipString(raw, i)
		if nameEnd < 0 {
			return nil, 0
		}
		name := raw[i+1 : nameEnd-1]
		i = skipSpace(raw, nameEnd)
		if i >= len(raw) || raw[i] != ':' {
			return nil, 0
		}
		i = skipSpace(raw, i+1)
		switch {
		case bytes.IndexByte(name, '\\') >= 0:
			return nil, 0
		case string(name) == "tools":
			// Of names given twice, the last counts: it is the one blanked.
			if tl = l.known(raw[i:]); tl == nil {
				return nil, 0
			}
			start, end = i, i+len(tl.raw)
			i = end
		case strings.EqualFold(string(name), "tools"):
			// encoding/json's rules match names regardless of case.
			return nil, 0
		default:
			if i = skipValue(raw, i); i < 0 {
				return nil, 0
			}
		}
		i = skipSpace(raw, i)
	}
	if start < 0 {
		return nil, 0
	}
	spaces(raw[start+copy(raw[start:end], "null") : end])
	return tl, start
}

// spaces sets every byte of b to a space, by doubling copies (memmove).
func spaces(b []byte) {
	if len(b) == 0 {
		return
	}
	b[0] = ' '
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// known returns the decoded list whose bytes b starts with, or nil.
func (l *toolLists) known(b []byte) *toolList {
	if len(b) == 0 || b[0] != '[' {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, tl := range l.lists {
		if len(b) >= len(tl.raw) && string(b[:len(tl.raw)]) == tl.raw {
			return tl
		}
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the end of the string that starts at b[i] ('"'), or
// -1 if it does not end.
func skipString(b []byte, i int) int {
	for i++; ; {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return -1
		}
		i += q + 1
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		n := 0
		for j := i - 2; b[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return i
		}
	}
}

// skipValue returns the end of the value that starts at b[i], or -1; it
// follows strings and nesting, and checks nothing else.
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			if i = skipString(b, i); i < 0 {
				return -1
			}
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // a scalar's end: its container closes
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	if depth == 0 {
		return i
	}
	return -1
}
