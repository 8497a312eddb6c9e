package openai

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// chunk is one streamed chat.completion.chunk, as far as agentd reads it.
// It is decoded in one pass by decodeChunk with encoding/json's rules, not
// into the SDK's ChatCompletionChunk: the SDK's reflective decoder (apijson)
// keeps every field's raw text and validity and was a fifth of the
// adapter's CPU per answer. The SDK's leniency is kept
// (TestChunkReadsAsTheSDKs): a value of the wrong type leaves its field
// empty instead of failing the chunk, a text field takes a number or an
// object as its JSON text, and a count takes a quoted number.
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
	// Refusal is the model's refusal text (OpenAI's structured outputs
	// send it in place of content, and finish with "stop").
	Refusal lenientText `json:"refusal"`
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
	// CompletionTokensDetails.ReasoningTokens is the part of the
	// completion spent reasoning (OpenAI's reasoning models).
	CompletionTokensDetails struct {
		ReasoningTokens lenientInt `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
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

// v1 is encoding/json's rules for its successor's engine (the one
// encoding/json itself runs on under GOEXPERIMENT=jsonv2), which decodes a
// chunk in one pass where encoding/json scanned it twice (its validity
// check, then the decoding) and every escaped text once more.
var v1 = jsonv1.DefaultOptionsV1()

// decodeChunk decodes one event's data as a chunk, skipping values of the
// wrong type as the SDK does; data that is not a JSON object (nor null) is
// a *chunkError. It reads as the decoder this package used before, the
// SDK's stream with encoding/json (TestChunkStreamsReadAsBefore).
func decodeChunk(data []byte) (chunk, error) {
	var c chunk
	if err := jsonv2.Unmarshal(data, &c, v1); err != nil {
		if t := bytes.TrimLeft(data, jsonSpace); len(t) == 0 || t[0] != '{' || !wrongType(err) {
			return chunk{}, &chunkError{err: err}
		}
	}
	for _, ch := range c.Choices {
		if strings.EqualFold(string(ch.FinishReason), "error") {
			c.raw = bytes.Clone(bytes.Trim(data, jsonSpace))
		}
	}
	return c, nil
}

const jsonSpace = " \t\r\n"

// chunkError is an event whose data is not a chunk.
type chunkError struct{ err error }

func (e *chunkError) Error() string { return e.err.Error() }
func (e *chunkError) Unwrap() error { return e.err }

func (u *chunkUsage) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() != '{' {
		return dec.SkipValue()
	}
	type plain chunkUsage
	if err := jsonv2.UnmarshalDecode(dec, (*plain)(u)); err != nil && !wrongType(err) {
		return err
	}
	u.valid = true
	return nil
}

// wrongType tells a value of the wrong type, which encoding/json's rules
// skip (decoding the rest), from a chunk that is not JSON.
func wrongType(err error) bool {
	var typ *jsonv1.UnmarshalTypeError
	return errors.As(err, &typ)
}

// lenientText is a string that also takes a number, a boolean, an object
// or an array as its JSON text (some servers send tool arguments as an
// object), and null as empty.
type lenientText string

func (s *lenientText) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case '"':
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		*s = lenientText(tok.String())
	case 'n':
		_, err := dec.ReadToken()
		return err
	default:
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		*s = lenientText(v)
	}
	return nil
}

// lenientInt is a count that also takes a quoted number; anything else
// leaves it 0.
type lenientInt int64

func (n *lenientInt) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	*n = parseLenientInt(v, *n)
	return nil
}

// parseLenientInt reads a count from its JSON text, quoted or not; any
// other text leaves it as it was.
func parseLenientInt(b []byte, was lenientInt) lenientInt {
	b = bytes.Trim(b, `"`)
	if v, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		return lenientInt(v)
	} else if f, err := strconv.ParseFloat(string(b), 64); err == nil {
		return lenientInt(f)
	}
	return was
}
