package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
)

// TestACutWhileTheModelReasonsIsTriedAgainOnEachProtocol: over each
// protocol's wire (OpenAI-style reasoning_content, Anthropic thinking
// blocks, Ollama thinking), a stream cut after reasoning and before the
// first word is tried again: the client's event stream says thinking.reset
// between the two reasonings, and the chat stores the retry's answer once.
// A cut after the first word is not tried again: the turn ends with what
// was streamed, stored partial, and no reset.
func TestACutWhileTheModelReasonsIsTriedAgainOnEachProtocol(t *testing.T) {
	const thought, words = "First I weigh it.", "The answer was"
	// The first try's events before the cut: two pieces of reasoning
	// (5 runes each) after each protocol's opening (OpenAI's role chunk;
	// Anthropic's message_start, content_block_start and ping); or all four
	// pieces (Anthropic: then the signature, the block's end and the next
	// block's start) and two of the words.
	inThought := map[string]int{"openai": 3, "anthropic": 5, "ollama": 2}
	afterWord := map[string]int{"openai": 7, "anthropic": 12, "ollama": 6}
	for _, kind := range daemontest.Kinds {
		for name, c := range map[string]struct {
			cut           int
			calls         int64
			shownThought  string // what the client shows after the events
			shownWords    string
			resets        int
			storedThought string
			storedWords   string
			partial       bool
		}{
			"in its reasoning": {cut: inThought[kind], calls: 2, resets: 1, shownThought: "A second thought.", shownWords: "Said once.",
				storedThought: "A second thought.", storedWords: "Said once."},
			"after its first word": {cut: afterWord[kind], calls: 1, shownThought: thought, shownWords: "The answer",
				storedThought: thought, storedWords: "The answer", partial: true},
		} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				script, calls := scriptFor(testkit.Reply{Thinking: thought, Text: words, ChunkRunes: 5, CutAfterChunks: c.cut},
					testkit.Reply{Thinking: "A second thought.", Text: "Said once."})
				fake := startFake(t, kind, fakeOptions{Script: script, Models: []fakeModel{{ID: "m", Window: 32000}}})
				d := daemontest.Start(t, kindConfig(t, kind, fake.URL(), 32000), nil)
				ctx := context.Background()
				chatRes, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
				if err != nil {
					t.Fatal(err)
				}
				var th, said strings.Builder
				resets := 0
				res, err := d.Client.Send(ctx, chatRes.ID, api.SendMessageRequest{Content: "hello"}, func(ev api.Event) {
					var d struct{ Text string }
					_ = json.Unmarshal(ev.Data, &d)
					switch ev.Type {
					case api.EventThinkingDelta:
						th.WriteString(d.Text)
					case api.EventMessageDelta:
						said.WriteString(d.Text)
					case api.EventThinkingReset:
						th.Reset()
						resets++
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				if n := calls.Load(); n != c.calls {
					t.Fatalf("the model was asked %d times, want %d", n, c.calls)
				}
				if (res.Problem != nil) != c.partial {
					t.Fatalf("the turn ended with problem %+v", res.Problem)
				}
				if resets != c.resets || th.String() != c.shownThought || said.String() != c.shownWords {
					t.Fatalf("the client shows thinking %q and words %q after %d resets; want %q, %q after %d",
						th.String(), said.String(), resets, c.shownThought, c.shownWords, c.resets)
				}
				msgs, err := d.Client.Transcript(ctx, chatRes.ID)
				if err != nil {
					t.Fatal(err)
				}
				if len(msgs) != 2 {
					t.Fatalf("the chat holds %d messages, want the person's and one answer: %s", len(msgs), contents(msgs))
				}
				if a := msgs[1]; a.Thinking != c.storedThought || a.Content != c.storedWords || a.Partial != c.partial {
					t.Fatalf("stored answer: thinking %q, content %q, partial %v; want %q, %q, %v",
						a.Thinking, a.Content, a.Partial, c.storedThought, c.storedWords, c.partial)
				}
			})
		}
	}
}
