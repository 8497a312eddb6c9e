package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
)

// brain is the fake model's script for the subprocess tests: it answers a
// person at length (so small windows fold often), calls the calculator
// when asked to "calculate", summarises slowly (so kills can land inside a
// fold), and checks every request it gets for a tool call without its
// result, which a real provider refuses.
type brain struct {
	mu  sync.Mutex
	rng *rand.Rand

	// MaxDelay is the most a reply waits before its first byte.
	MaxDelay time.Duration
	// FoldDelay is how long a summarising request takes.
	FoldDelay time.Duration
	// Words is roughly how many words an answer has.
	Words int

	folding   atomic.Int32 // summarising requests in flight
	summaries atomic.Int64
	requests  atomic.Int64
	unpaired  atomic.Int64
	firstBad  atomic.Value // string
}

func newBrain(seed uint64) *brain {
	return &brain{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), MaxDelay: 60 * time.Millisecond, FoldDelay: 300 * time.Millisecond, Words: 150}
}

func (b *brain) delay() time.Duration {
	if b.MaxDelay <= 0 {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Duration(b.rng.Int64N(int64(b.MaxDelay)))
}

// Script is the testkit.Script of the fake.
func (b *brain) Script(r testkit.Received) testkit.Reply {
	if r.System == summarizer.Instructions {
		b.folding.Add(1)
		defer b.folding.Add(-1)
		b.summaries.Add(1)
		time.Sleep(b.FoldDelay)
		return testkit.Reply{Text: "What the person wants: numbered test messages answered.\nDecided or done: answered them.\nFacts to keep: none.\nStill open: nothing."}
	}
	b.requests.Add(1)
	b.checkPairs(r.Messages)
	time.Sleep(b.delay())
	last := r.Messages[len(r.Messages)-1]
	switch {
	case last.Role == chat.RoleTool:
		return testkit.Reply{Text: "The result is " + last.Content + ". " + filler(last.Content, b.Words/3), ChunkRunes: 16}
	case strings.Contains(last.Content, "calculate"):
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: fmt.Sprintf("call_%d", b.requests.Load()), Name: "calculate", Arguments: `{"expression":"6*7"}`}}}
	case strings.Contains(last.Content, "hang"):
		return testkit.Reply{Hang: true}
	case strings.Contains(last.Content, "cut your answer"):
		// The connection drops after the role and three deltas.
		return testkit.Reply{Text: filler(last.Content, b.Words), ChunkRunes: 16, CutAfterChunks: 4}
	case strings.Contains(last.Content, "think it over"):
		// The model reasons before it answers, in several deltas.
		return testkit.Reply{Thinking: "Weighing it: " + filler(last.Content, b.Words/4), Text: filler(last.Content, b.Words), ChunkRunes: 16}
	case strings.Contains(last.Content, "slow"):
		time.Sleep(1500 * time.Millisecond)
	}
	return testkit.Reply{Text: filler(last.Content, b.Words), ChunkRunes: 16}
}

// checkPairs records a request in which an assistant's tool call is not
// directly followed by its result, or a result follows no call.
func (b *brain) checkPairs(msgs []chat.Message) {
	bad := func(why string) {
		if b.unpaired.Add(1) == 1 {
			b.firstBad.Store(why)
		}
	}
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role == chat.RoleTool {
			bad(fmt.Sprintf("tool result %q at %d follows no call", m.ToolCallID, i))
			continue
		}
		if len(m.ToolCalls) == 0 {
			continue
		}
		got := map[string]bool{}
		for i+1 < len(msgs) && msgs[i+1].Role == chat.RoleTool {
			i++
			got[msgs[i].ToolCallID] = true
		}
		for _, c := range m.ToolCalls {
			if !got[c.ID] {
				bad(fmt.Sprintf("tool call %q has no result after it", c.ID))
			}
		}
	}
}

func (b *brain) firstUnpaired() string {
	s, _ := b.firstBad.Load().(string)
	return s
}

// filler is an answer of about n words that quotes the question.
func filler(question string, n int) string {
	words := strings.Fields("the answer to that is long on purpose so that a small window fills and the chat is folded often while the test runs")
	var sb strings.Builder
	sb.WriteString("About \"" + question + "\": ")
	for i := range n {
		sb.WriteString(words[i%len(words)])
		sb.WriteByte(' ')
	}
	return strings.TrimSpace(sb.String()) + "."
}
