package testkit

import (
	"hash/fnv"
	"sync"
)

// Block is one piece of a prompt in the order a provider reads it, with the
// neutral token count of its text. Breakpoint marks an Anthropic
// cache_control on it.
type Block struct {
	Text       string
	Tokens     int
	Breakpoint bool
}

// The providers' published rules the fakes follow.
const (
	// OpenAICacheMin is the shortest prefix OpenAI caches, and
	// OpenAICacheStep the step it counts cached tokens in
	// (https://platform.openai.com/docs/guides/prompt-caching).
	OpenAICacheMin  = 1024
	OpenAICacheStep = 128
	// AnthropicCacheMin is the shortest prefix Claude Sonnet and Opus
	// cache; AnthropicLookback is how many blocks before a breakpoint the
	// API looks for an earlier write; AnthropicMaxBreakpoints is the most
	// cache_control blocks a request may carry
	// (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching).
	AnthropicCacheMin       = 1024
	AnthropicLookback       = 20
	AnthropicMaxBreakpoints = 4
)

// PromptCache imitates a provider's prompt cache over every request one
// fake saw: a prefix is known by the chained hash of its blocks. It is
// block-grained (a provider is token-grained), so it never counts more
// than the real rule would on the same requests. Nothing expires.
type PromptCache struct {
	mu   sync.Mutex
	seen map[uint64]struct{}
}

// prefixes returns the chained hash and the running token count after
// each block.
func prefixes(blocks []Block) ([]uint64, []int) {
	hs := make([]uint64, len(blocks))
	cum := make([]int, len(blocks))
	h := fnv.New64a()
	total := 0
	for i, b := range blocks {
		_, _ = h.Write([]byte(b.Text))
		_, _ = h.Write([]byte{0})
		hs[i] = h.Sum64()
		total += b.Tokens
		cum[i] = total
	}
	return hs, cum
}

// OpenAI returns the cached tokens of a request by OpenAI's rule: the
// longest prefix an earlier request shared, counted when it reaches 1,024
// tokens, in 128-token steps; every prefix of this request is then known.
func (c *PromptCache) OpenAI(blocks []Block) int {
	hs, cum := prefixes(blocks)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[uint64]struct{}{}
	}
	shared := 0
	for i, h := range hs {
		if _, ok := c.seen[h]; !ok {
			break
		}
		shared = cum[i]
	}
	for _, h := range hs {
		c.seen[h] = struct{}{}
	}
	if shared < OpenAICacheMin {
		return 0
	}
	return shared / OpenAICacheStep * OpenAICacheStep
}

// Anthropic returns a request's cache reads and writes by Anthropic's rule:
// at each breakpoint the API looks back up to 20 blocks for a prefix an
// earlier request wrote, and reads the longest it finds; the prefix up to
// the last breakpoint is written (the part past the read), each
// breakpoint's prefix of 1,024 tokens or more is then known.
func (c *PromptCache) Anthropic(blocks []Block) (read, write int) {
	hs, cum := prefixes(blocks)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[uint64]struct{}{}
	}
	last := -1
	for i, b := range blocks {
		if !b.Breakpoint {
			continue
		}
		last = i
		for j := i; j >= 0 && j >= i-AnthropicLookback; j-- {
			if _, ok := c.seen[hs[j]]; ok {
				read = max(read, cum[j])
				break
			}
		}
	}
	for i, b := range blocks {
		if b.Breakpoint && cum[i] >= AnthropicCacheMin {
			c.seen[hs[i]] = struct{}{}
		}
	}
	if last >= 0 && cum[last] >= AnthropicCacheMin {
		write = max(0, cum[last]-read)
	}
	return read, write
}
