package openai

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// commonChunk decodes the chunk nearly every event of an answer is, by
// hand: choices whose delta carries text (content, refusal, thinking) and
// perhaps a finish reason, with a null usage or the usage's counts. The full decoder
// (decodeChunk) was a tenth of agentd's own CPU per plain turn, a chunk
// being a few tokens in some 200 bytes of envelope. ok is false for
// anything else, which the full decoder reads: tool calls, a count that is
// not a number, an "error" field or finish, a value of another type, a key it does not
// know or that is escaped, repeated or in other letters' case, and any
// JSON this scanner does not take. What it decodes reads as the full
// decoder does (FuzzCommonChunkReadsAsDecodeChunk), and ok tells that the
// data is a JSON object with no "error" field.
func commonChunk(data []byte) (c chunk, ok bool) {
	s := scanner{b: data}
	ok = s.object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			return s.choices(&c.Choices)
		case "usage":
			return s.literal("null") || s.usage(&c)
		case "id", "object", "created", "model", "system_fingerprint", "service_tier", "obfuscation":
			return s.scalar()
		}
		return false
	})
	s.space()
	return c, ok && s.i == len(s.b)
}

// scanner reads the JSON of commonChunk; every method reports whether what
// it read is the shape it takes, the scanner being of no further use once
// one did not.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n': // jsonSpace
			s.i++
		default:
			return
		}
	}
}

// next reads c after any space.
func (s *scanner) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object reads an object, handing each key to field, which reads its
// value. A key given twice is refused: encoding/json's rules take its last
// value.
func (s *scanner) object(field func(key []byte) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	var keys [8][]byte
	seen := keys[:0]
	for {
		s.space()
		key, escaped, ok := s.str()
		if !ok || escaped || !s.next(':') {
			return false
		}
		for _, k := range seen {
			if string(k) == string(key) {
				return false
			}
		}
		seen = append(seen, key)
		if !field(key) {
			return false
		}
		if !s.next(',') {
			return s.next('}')
		}
	}
}

func (s *scanner) choices(out *[]choice) bool {
	if !s.next('[') {
		return false
	}
	if s.next(']') {
		return true
	}
	for {
		var ch choice
		ok := s.object(func(key []byte) bool {
			switch string(key) {
			case "index":
				return s.index(&ch.Index)
			case "delta":
				return s.delta(&ch.Delta)
			case "finish_reason":
				var t string
				if !s.text(&t) || strings.EqualFold(t, "error") {
					return false // an error's finish keeps the chunk's text
				}
				ch.FinishReason = lenientText(t)
				return true
			case "logprobs":
				return s.literal("null")
			}
			return false
		})
		if !ok {
			return false
		}
		*out = append(*out, ch)
		if !s.next(',') {
			return s.next(']')
		}
	}
}

func (s *scanner) delta(d *delta) bool {
	return s.object(func(key []byte) bool {
		var t string
		if !s.text(&t) {
			return false
		}
		switch string(key) {
		case "content":
			d.Content = lenientText(t)
		case "refusal":
			d.Refusal = lenientText(t)
		case "reasoning_content":
			d.ReasoningContent = t
		case "reasoning":
			d.Reasoning = t
		case "role":
		default:
			return false
		}
		return true
	})
}

// usage reads the usage's counts, as numbers.
func (s *scanner) usage(c *chunk) bool {
	u := &chunkUsage{valid: true}
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return s.count(&u.PromptTokens)
		case "completion_tokens":
			return s.count(&u.CompletionTokens)
		case "prompt_tokens_details":
			return s.object(func(key []byte) bool {
				switch string(key) {
				case "cached_tokens":
					return s.count(&u.PromptTokensDetails.CachedTokens)
				case "audio_tokens":
					return s.scalar()
				}
				return false
			})
		case "completion_tokens_details":
			return s.object(func(key []byte) bool {
				switch string(key) {
				case "reasoning_tokens":
					return s.count(&u.CompletionTokensDetails.ReasoningTokens)
				case "accepted_prediction_tokens", "rejected_prediction_tokens", "audio_tokens":
					return s.scalar()
				}
				return false
			})
		case "prompt_cache_hit_tokens":
			var n lenientInt
			ok := s.index(&n)
			u.PromptCacheHitTokens = int(n)
			return ok
		case "total_tokens", "prompt_cache_miss_tokens":
			return s.scalar()
		}
		return false
	})
	c.Usage = u
	return ok
}

// count reads a number as lenientInt does.
func (s *scanner) count(n *lenientInt) bool {
	s.space()
	start := s.i
	if !s.number() {
		return false
	}
	*n = parseLenientInt(s.b[start:s.i], 0)
	return true
}

// index reads an integer.
func (s *scanner) index(n *lenientInt) bool {
	s.space()
	start := s.i
	if !s.number() {
		return false
	}
	v, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	*n = lenientInt(v)
	return err == nil
}

// text reads a string or null (which leaves t empty).
func (s *scanner) text(t *string) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == 'n' {
		return s.literal("null")
	}
	start := s.i
	raw, escaped, ok := s.str()
	switch {
	case !ok:
		return false
	case !escaped:
		*t = string(raw)
		return true
	}
	b, err := jsontext.AppendUnquote(nil, s.b[start:s.i])
	*t = string(b)
	return err == nil
}

// str reads a string whose bytes are valid UTF-8, returning its text
// between the quotes and whether that holds an escape (which it leaves
// unchecked).
func (s *scanner) str() (raw []byte, escaped, ok bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	start := s.i + 1
	ascii := true
	for i := start; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			s.i = i + 1
			raw = s.b[start:i]
			return raw, escaped, ascii || utf8.Valid(raw)
		case c == '\\':
			escaped = true
			i++
		case c < 0x20:
			return nil, false, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false, false
}

// scalar reads a string, a number, true, false or null.
func (s *scanner) scalar() bool {
	s.space()
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '"':
		start := s.i
		_, escaped, ok := s.str()
		if ok && escaped {
			_, err := jsontext.AppendUnquote(nil, s.b[start:s.i]) // only to check the escapes
			ok = err == nil
		}
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	return s.number()
}

func (s *scanner) literal(l string) bool {
	s.space()
	if len(s.b)-s.i < len(l) || string(s.b[s.i:s.i+len(l)]) != l {
		return false
	}
	s.i += len(l)
	return true
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	s.skip('-')
	if s.skip('0') {
		// no more integer digits after a leading zero
	} else if !s.digits() {
		return false
	}
	if s.skip('.') && !s.digits() {
		return false
	}
	if s.skip('e') || s.skip('E') {
		if !s.skip('+') {
			s.skip('-')
		}
		return s.digits()
	}
	return true
}

// skip reads c if it is next, without space before it.
func (s *scanner) skip(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// digits reads one or more digits.
func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}
