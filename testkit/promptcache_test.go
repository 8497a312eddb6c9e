package testkit

import (
	"strings"
	"testing"
)

func blocksOf(tokens ...int) []Block {
	out := make([]Block, len(tokens))
	for i, n := range tokens {
		out[i] = Block{Text: strings.Repeat(string(rune('a'+i%26)), i+1), Tokens: n}
	}
	return out
}

func TestOpenAIRule(t *testing.T) {
	cases := []struct {
		name       string
		earlier    []Block
		now        []Block
		wantCached int
	}{
		{"nothing before", nil, blocksOf(2000, 10), 0},
		{"shared prefix under the minimum", blocksOf(1000, 10), blocksOf(1000, 10, 500), 0},
		{"counted in 128-token steps", blocksOf(1000, 100), blocksOf(1000, 100, 500), 1024},
		{"whole earlier request", blocksOf(1500, 600), blocksOf(1500, 600, 5), 2048},
		{"a changed first block breaks all", blocksOf(1500, 600), append([]Block{{Text: "other", Tokens: 1500}}, blocksOf(1500, 600)[1:]...), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var pc PromptCache
			if c.earlier != nil {
				pc.OpenAI(c.earlier)
			}
			if got := pc.OpenAI(c.now); got != c.wantCached {
				t.Fatalf("cached %d, want %d", got, c.wantCached)
			}
		})
	}
}

func TestAnthropicRule(t *testing.T) {
	mark := func(bs []Block, at ...int) []Block {
		for _, i := range at {
			bs[i].Breakpoint = true
		}
		return bs
	}
	var pc PromptCache
	// No breakpoint: nothing read or written.
	if r, w := pc.Anthropic(blocksOf(3000, 10)); r != 0 || w != 0 {
		t.Fatalf("no breakpoint: read %d write %d", r, w)
	}
	// First request writes up to its last breakpoint.
	if r, w := pc.Anthropic(mark(blocksOf(1200, 300, 40), 0, 1)); r != 0 || w != 1500 {
		t.Fatalf("first: read %d write %d, want 0 1500", r, w)
	}
	// The next one, its breakpoint moved two blocks on, finds the earlier
	// write by looking back and writes only the rest.
	if r, w := pc.Anthropic(mark(blocksOf(1200, 300, 40, 60), 0, 3)); r != 1500 || w != 100 {
		t.Fatalf("second: read %d write %d, want 1500 100", r, w)
	}
	// A prefix under the minimum is neither read nor written.
	var small PromptCache
	small.Anthropic(mark(blocksOf(500, 10), 1))
	if r, w := small.Anthropic(mark(blocksOf(500, 10, 10), 2)); r != 0 || w != 0 {
		t.Fatalf("small: read %d write %d", r, w)
	}
	// Past the lookback the earlier write is not found.
	var far PromptCache
	long := blocksOf(make([]int, 30)...)
	long[0].Tokens = 2000
	far.Anthropic(mark(blocksOf(2000), 0))
	if r, _ := far.Anthropic(mark(long, 29)); r != 0 {
		t.Fatalf("past the lookback: read %d", r)
	}
}
