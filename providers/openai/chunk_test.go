package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"unicode"

	"github.com/openai/openai-go/v3"
)

// sdkView is what the adapter read of a chunk when it decoded chunks with
// the SDK's own type: the reference chunk is held to.
func sdkView(b []byte) (string, error) {
	var ch openai.ChatCompletionChunk
	if err := json.Unmarshal(b, &ch); err != nil {
		return "", err
	}
	out := fmt.Sprintf("usage %v %d %d %d %v|", ch.JSON.Usage.Valid(), ch.Usage.PromptTokens, ch.Usage.CompletionTokens,
		ch.Usage.PromptTokensDetails.CachedTokens, extraInt(ch.Usage.JSON.ExtraFields["prompt_cache_hit_tokens"].Raw()))
	for _, c := range ch.Choices {
		d := c.Delta
		thinking := ""
		for _, key := range []string{"reasoning_content", "reasoning"} {
			var s string
			if f, ok := d.JSON.ExtraFields[key]; ok && json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
				thinking = s
				break
			}
		}
		out += fmt.Sprintf("choice %d %q %q %q|", c.Index, d.Content, thinking, c.FinishReason)
		for _, tc := range d.ToolCalls {
			out += fmt.Sprintf("call %v %d %q %q %q|", tc.JSON.Index.Valid(), tc.Index, tc.ID, tc.Function.Name, tc.Function.Arguments)
		}
	}
	return out, nil
}

func extraInt(raw string) int {
	var n int
	_ = json.Unmarshal([]byte(raw), &n)
	return n
}

// ourView is the same of a chunk as this package decodes it.
func ourView(b []byte) (string, error) {
	ch, err := decodeChunk(b)
	if err != nil {
		return "", err
	}
	return chunkView(ch), nil
}

// chunkView is what the assembler reads of a chunk.
func chunkView(ch chunk) string {
	var u chunkUsage
	if ch.usage() != nil {
		u = *ch.usage()
	}
	out := fmt.Sprintf("usage %v %d %d %d %v|", ch.usage() != nil, u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens, u.PromptCacheHitTokens)
	for _, c := range ch.Choices {
		out += fmt.Sprintf("choice %d %q %q %q|", c.Index, c.Delta.Content, c.Delta.thinking(), c.FinishReason)
		for _, tc := range c.Delta.ToolCalls {
			var idx lenientInt
			if tc.Index != nil {
				idx = *tc.Index
			}
			out += fmt.Sprintf("call %v %d %q %q %q|", tc.Index != nil, idx, tc.ID, tc.Function.Name, tc.Function.Arguments)
		}
	}
	return out
}

var chunkSeeds = []string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi \u00e9\n"},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"a\":"}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":{"x": [1, 2]}}}]},"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":"think","reasoning":"other"}}],"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_cache_hit_tokens":6}}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":"","reasoning":"Hmm"}}],"usage":null}`,
	`{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":8}}}`,
	`{"choices":5}`, `[1]`, `"x"`, `null`, `{"usage":{"prompt_tokens":"7"}}`, `{"usage":5}`,
	`{"choices":[{"index":"0","delta":{"content":5,"tool_calls":[{"index":null,"id":"x"}]},"finish_reason":3}]}`,
	`{"choices":[{"index":0,"delta":"x","finish_reason":"error"}]}`,
}

// TestChunkReadsAsTheSDKs: every seed, ordinary and odd, reads as the SDK's
// ChatCompletionChunk read it, and fails where that failed.
func TestChunkReadsAsTheSDKs(t *testing.T) {
	for _, s := range chunkSeeds {
		want, wantErr := sdkView([]byte(s))
		got, err := ourView([]byte(s))
		if (err == nil) != (wantErr == nil) || got != want {
			t.Errorf("%s\n got %s (%v)\nwant %s (%v)", s, got, err, want, wantErr)
		}
	}
}

func FuzzChunkReadsAsTheSDKs(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, wantErr := sdkView(b)
		got, err := ourView(b)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%q\n got %v\nwant %v", b, err, wantErr)
		}
		// Where no server goes, the two may read differently: encoding/json
		// matches keys whatever their case and takes a repeated key's last
		// value; the SDK matched exactly and took the first.
		if err == nil && !otherCase(b) && !repeatedKey(b) && got != want {
			t.Fatalf("%q\n got %s (%v)\nwant %s (%v)", b, got, err, want, wantErr)
		}
	})
}

// otherCase reports a byte that could spell a key in other letters' case
// (an upper-case letter, an escape).
func otherCase(b []byte) bool {
	return bytes.ContainsFunc(b, unicode.IsUpper) || bytes.Contains(b, []byte(`\u`))
}

// repeatedKey reports an object in b that has a key twice.
func repeatedKey(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type object struct {
		keys  map[string]bool
		isKey bool // the next string token is a key
	}
	var stack []*object
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *object
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				if top != nil {
					top.isKey = true
				}
				stack = append(stack, &object{keys: map[string]bool{}, isKey: true})
			case '[':
				stack = append(stack, nil)
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1] != nil {
					stack[len(stack)-1].isKey = true
				}
			}
			continue
		case string:
			if top != nil && top.isKey {
				if top.keys[v] {
					return true
				}
				top.keys[v] = true
				top.isKey = false
				continue
			}
		}
		if top != nil {
			top.isKey = true
		}
	}
}
