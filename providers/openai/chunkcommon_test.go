package openai

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/tidwall/gjson"
)

// commonSeeds are chunks as servers stream them, and near misses of the
// shape commonChunk takes.
var commonSeeds = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-4o","service_tier":"default","choices":[{"index":0,"delta":{"content":" word\n\"quoted\" \u00e9 日本"},"logprobs":null,"finish_reason":null}],"obfuscation":"a1"}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":"think \ud83d\ude00"}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":"hmm","reasoning_content":null}}]}`,
	`{"choices":[{"index":1,"delta":{"refusal":"no"}},{"index":0,"delta":{"content":"a"}}]}`,
	` {"choices":[ ] , "created" : -1.5e+3, "model":true, "id":false } `,
	`{}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"completion_tokens":22,"completion_tokens_details":{"accepted_prediction_tokens":0,"audio_tokens":0,"reasoning_tokens":7,"rejected_prediction_tokens":0},"prompt_tokens":100,"prompt_tokens_details":{"audio_tokens":0,"cached_tokens":64},"total_tokens":122}}`,
	`{"choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"prompt_cache_hit_tokens":6,"prompt_cache_miss_tokens":4}}`,
	`{"choices":[],"usage":{"prompt_tokens":1e3,"completion_tokens":2.7,"prompt_tokens_details":{}}}`,
	`{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"ERROR"}]}`,
	`{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"error"}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}`,
	`{"choices":[{"index":0,"delta":{"Content":"a"}}]}`,
	`{"choices":[{"index":0,"delta":{"cont\u0065nt":"a"}}]}`,
	`{"choices":[{"index":"0","delta":{"content":5}}]}`,
	`{"choices":[{"index":01,"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":1e0,"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":9223372036854775808,"delta":{"content":"a"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"bad \x"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"lone \ud800"}}]}`,
	"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"raw \xff\"}}]}",
	"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tab \t\"}}]}",
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]}}]}`,
	`{"choices":[],"usage":{"prompt_tokens":"9","completion_tokens":2}}`,
	`{"choices":[],"usage":{"prompt_tokens":9,"prompt_cache_hit_tokens":1.5}}`,
	`{"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":null}}`,
	`{"choices":[],"usage":{"prompt_tokens":9,"Prompt_tokens":8}}`,
	`{"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens":8}}`,
	`{"error":{"message":"overloaded"}}`,
	`{"choices":[{"index":0,"delta":{"content":"a"}}]} x`,
	`{"choices":[{"index":0,"delta":{"content":"a"}}],}`,
	`{"choices":[{"index":0,"delta":{"content":"a"}}]`,
	`{"id":"a\"b","model":nul}`,
	`[1]`, `null`, ``,
}

// FuzzCommonChunkReadsAsDecodeChunk: what commonChunk takes is a chunk
// decodeChunk reads alike, with no "error" field.
func FuzzCommonChunkReadsAsDecodeChunk(f *testing.F) {
	for _, s := range append(commonSeeds, chunkSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := commonChunk(b)
		if !ok {
			return
		}
		want, err := decodeChunk(b)
		gu, wu := got.usage(), want.usage()
		if err != nil || fullView(got) != fullView(want) || (gu == nil) != (wu == nil) || gu != nil && usageOf(gu) != usageOf(wu) {
			t.Fatalf("%q\n got %s\nwant %s (%v)", b, fullView(got), fullView(want), err)
		}
		if gjson.GetBytes(b, "error").Exists() {
			t.Fatalf("%q has an error field", b)
		}
	})
}

// TestCommonChunkTakesTheCommonShapes: the seeds that are text deltas as
// servers send them are decoded by commonChunk, and read as decodeChunk
// reads them; the others are left to decodeChunk.
func TestCommonChunkTakesTheCommonShapes(t *testing.T) {
	for i, s := range commonSeeds {
		_, ok := commonChunk([]byte(s))
		if want := i < 11; ok != want {
			t.Errorf("%s: taken %v, want %v", s, ok, want)
		}
	}
}

// textBody is an answer of n text deltas as OpenAI streams them.
func textBody(n int) []byte {
	var body bytes.Buffer
	for i := range n {
		fmt.Fprintf(&body, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1733000000,\"model\":\"m\",\"system_fingerprint\":\"fp\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok%d \"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n", i)
	}
	body.WriteString("data: [DONE]\n\n")
	return body.Bytes()
}

// readText reads body's chunks with chunkStream (or, decode false, only
// its events with the SSE decoder) and returns their text.
func readText(body []byte, decode bool) string {
	res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(body))}
	s := newChunkStream(ssestream.NewDecoder(res), nil)
	var text strings.Builder
	for decode && s.next() {
		text.WriteString(string(s.cur.Choices[0].Delta.Content))
	}
	for !decode && s.dec.Next() {
	}
	return text.String()
}

// TestTextChunksDecodeWithoutTheFullDecoder: reading a stream of text
// deltas allocates the choice and its text per chunk beyond what the SSE
// decoder does; the full decoder allocated one more (3.1 a chunk).
func TestTextChunksDecodeWithoutTheFullDecoder(t *testing.T) {
	const chunks = 100
	body := textBody(chunks)
	if got := readText(body, true); !strings.HasPrefix(got, "tok0 tok1 ") || !strings.HasSuffix(got, "tok99 ") {
		t.Fatalf("read %q", got)
	}
	sse := testing.AllocsPerRun(20, func() { readText(body, false) })
	all := testing.AllocsPerRun(20, func() { readText(body, true) })
	if per := (all - sse) / chunks; per > 2.5 {
		t.Errorf("%.2f allocations a chunk beyond the SSE decoder's; want at most 2.5", per)
	}
}

func BenchmarkChunkStream(b *testing.B) {
	body := textBody(100)
	b.ReportAllocs()
	for b.Loop() {
		readText(body, true)
	}
}

func BenchmarkDecodeTextChunk(b *testing.B) {
	data := []byte(commonSeeds[1])
	b.Run("common", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := commonChunk(data); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeChunk(data); err != nil || gjson.GetBytes(data, "error").Exists() {
				b.Fatal(err)
			}
		}
	})
}
