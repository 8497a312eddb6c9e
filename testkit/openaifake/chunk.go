package openaifake

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/agentd/agentd/chat"
)

// chunkLines encodes one stream's chat.completion.chunk lines ("data:
// {…}\n\n") into one reused buffer, without reflection: the benches run
// this fake on agentd's cores, and encoding/json took a tenth of its CPU
// there. The bytes are the ones encoding/json wrote from structs, fields in
// the order OpenAI sends them (testdata/stream.golden.json holds them).
type chunkLines struct {
	// head is every chunk's line up to its choices, which are all that
	// differ from one chunk to the next.
	head []byte
	// nullUsage is set when the client asked for the usage chunk: every
	// other chunk then carries "usage":null, as OpenAI's do.
	nullUsage bool
	buf       []byte
}

func newChunkLines(id string, created int64, model string, includeUsage bool) *chunkLines {
	h := appendString(append([]byte(nil), `data: {"id":`...), id)
	h = strconv.AppendInt(append(h, `,"object":"chat.completion.chunk","created":`...), created, 10)
	h = appendString(append(h, `,"model":`...), model)
	h = append(h, `,"system_fingerprint":"fp_fake","choices":`...)
	return &chunkLines{head: h, nullUsage: includeUsage}
}

// wireDelta is a chunk's delta: only the fields set are sent, in this
// order.
type wireDelta struct {
	Role    string
	Content *string
	// Refusal is raw JSON: null, or the refusal's text quoted.
	Refusal          json.RawMessage
	ReasoningContent *string
	Reasoning        *string
	ToolCall         *deltaCall
}

// deltaCall is a delta's one tool call: its first chunk names it, the
// next ones carry its arguments.
type deltaCall struct {
	Index                     int
	ID, Type, Name, Arguments string
}

// delta returns the line of a chunk of one choice; finish "" is null. The
// line is valid until the next call.
func (c *chunkLines) delta(d wireDelta, finish string) []byte {
	b := append(append(c.buf[:0], c.head...), `[{"index":0,"delta":{`...)
	first := len(b)
	if d.Role != "" {
		b = appendString(key(b, first, "role"), d.Role)
	}
	if d.Content != nil {
		b = appendString(key(b, first, "content"), *d.Content)
	}
	if len(d.Refusal) > 0 {
		b = append(key(b, first, "refusal"), d.Refusal...)
	}
	if d.ReasoningContent != nil {
		b = appendString(key(b, first, "reasoning_content"), *d.ReasoningContent)
	}
	if d.Reasoning != nil {
		b = appendString(key(b, first, "reasoning"), *d.Reasoning)
	}
	if tc := d.ToolCall; tc != nil {
		b = strconv.AppendInt(append(key(b, first, "tool_calls"), `[{"index":`...), int64(tc.Index), 10)
		if tc.ID != "" {
			b = appendString(append(b, `,"id":`...), tc.ID)
		}
		if tc.Type != "" {
			b = appendString(append(b, `,"type":`...), tc.Type)
		}
		b = append(b, `,"function":{`...)
		if tc.Name != "" {
			b = append(appendString(append(b, `"name":`...), tc.Name), ',')
		}
		b = append(appendString(append(b, `"arguments":`...), tc.Arguments), "}}]"...)
	}
	b = append(b, `},"logprobs":null,"finish_reason":`...)
	if finish == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, finish)
	}
	b = append(b, "}]"...)
	if c.nullUsage {
		b = append(b, `,"usage":null`...)
	}
	c.buf = append(b, "}\n\n"...)
	return c.buf
}

// usage returns the line of the usage chunk, which has no choices. The
// line is valid until the next call.
func (c *chunkLines) usage(u chat.Usage) []byte {
	b := append(append(c.buf[:0], c.head...), `[],"usage":`...)
	c.buf = append(appendUsage(b, u), "}\n\n"...)
	return c.buf
}

// key appends an object member's name, after a comma unless it is the
// first member (the object's members start at first).
func key(b []byte, first int, name string) []byte {
	if len(b) > first {
		b = append(b, ',')
	}
	return append(append(append(b, '"'), name...), `":`...)
}

// appendUsage appends OpenAI's usage object, its members in the order
// encoding/json wrote them from a map (sorted).
func appendUsage(b []byte, u chat.Usage) []byte {
	b = strconv.AppendInt(append(b, `{"completion_tokens":`...), int64(u.OutputTokens), 10)
	b = strconv.AppendInt(append(b, `,"completion_tokens_details":{"accepted_prediction_tokens":0,"audio_tokens":0,"reasoning_tokens":`...), int64(u.ReasoningTokens), 10)
	b = strconv.AppendInt(append(b, `,"rejected_prediction_tokens":0},"prompt_tokens":`...), int64(u.InputTokens), 10)
	b = strconv.AppendInt(append(b, `,"prompt_tokens_details":{"audio_tokens":0,"cached_tokens":`...), int64(u.CachedTokens), 10)
	b = strconv.AppendInt(append(b, `},"total_tokens":`...), int64(u.InputTokens+u.OutputTokens), 10)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s quoted as encoding/json quotes a string: <, > and
// & escaped for HTML, U+2028 and U+2029 for JavaScript, each invalid UTF-8
// byte as \ufffd (TestAppendStringIsEncodingJSONs).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}
