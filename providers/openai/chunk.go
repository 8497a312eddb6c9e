package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// chunk is one streamed chat.completion.chunk, as far as agentd reads it.
// It is decoded with encoding/json, not into the SDK's ChatCompletionChunk:
// the SDK's reflective decoder (apijson) keeps every field's raw text and
// validity and was a fifth of the adapter's CPU per answer. The SDK's
// leniency is kept (TestChunkReadsAsTheSDKs): a value of the wrong type
// leaves its field empty instead of failing the chunk, a text field takes a
// number or an object as its JSON text, and a count takes a quoted number.
type chunk struct {
	Choices []choice    `json:"choices"`
	Usage   *chunkUsage `json:"usage"`
	// raw is the chunk's text, kept only when a choice finished with
	// "error": it is the error's body.
	raw []byte
}

type choice struct {
	Index        lenientInt  `json:"index"`
	Delta        delta       `json:"delta"`
	FinishReason lenientText `json:"finish_reason"`
}

type delta struct {
	Content lenientText `json:"content"`
	// Thinking: DeepSeek, vLLM (older), llama.cpp, Zhipu and Moonshot say
	// reasoning_content; OpenRouter, Groq and newer vLLM say reasoning.
	// A value that is not a string is no thinking.
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        string          `json:"reasoning"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	// Index is nil when the server sent none (or null).
	Index    *lenientInt `json:"index"`
	ID       lenientText `json:"id"`
	Function struct {
		Name      lenientText `json:"name"`
		Arguments lenientText `json:"arguments"`
	} `json:"function"`
}

type chunkUsage struct {
	// valid: the usage was an object (a chunk's "usage" is often null).
	valid               bool
	PromptTokens        lenientInt `json:"prompt_tokens"`
	CompletionTokens    lenientInt `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens lenientInt `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	// PromptCacheHitTokens is DeepSeek's name for the cached part.
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
}

// usage is the chunk's usage, nil when it carries none.
func (c *chunk) usage() *chunkUsage {
	if c.Usage == nil || !c.Usage.valid {
		return nil
	}
	return c.Usage
}

// UnmarshalJSON decodes a chunk, skipping values of the wrong type as the
// SDK does; a chunk that is not a JSON object (nor null) is an error.
func (c *chunk) UnmarshalJSON(b []byte) error {
	t := bytes.TrimLeft(b, " \t\r\n")
	if bytes.HasPrefix(t, []byte("null")) {
		return nil
	}
	type plain chunk
	err := json.Unmarshal(b, (*plain)(c))
	if err != nil && (len(t) == 0 || t[0] != '{' || !wrongType(err)) {
		return err
	}
	for _, ch := range c.Choices {
		if strings.EqualFold(string(ch.FinishReason), "error") {
			c.raw = bytes.Clone(b)
		}
	}
	return nil
}

func (u *chunkUsage) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '{' {
		return nil
	}
	type plain chunkUsage
	if err := json.Unmarshal(b, (*plain)(u)); err != nil && !wrongType(err) {
		return err
	}
	u.valid = true
	return nil
}

// wrongType tells a value of the wrong type, which encoding/json skips
// (decoding the rest), from a chunk that is not JSON.
func wrongType(err error) bool {
	var typ *json.UnmarshalTypeError
	return errors.As(err, &typ)
}

// lenientText is a string that also takes a number, a boolean, an object
// or an array as its JSON text (some servers send tool arguments as an
// object), and null as empty.
type lenientText string

func (s *lenientText) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 1 && b[0] == '"' && bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b):
		*s = lenientText(b[1 : len(b)-1]) // nothing to unescape
	case len(b) > 0 && b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = lenientText(v)
	case string(b) != "null":
		*s = lenientText(b)
	}
	return nil
}

// lenientInt is a count that also takes a quoted number; anything else
// leaves it 0.
type lenientInt int64

func (n *lenientInt) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(b, `"`)
	if v, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*n = lenientInt(v)
	} else if f, err := strconv.ParseFloat(string(b), 64); err == nil {
		*n = lenientInt(f)
	}
	return nil
}
