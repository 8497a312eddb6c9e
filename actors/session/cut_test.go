package session

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/openai"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
)

// halfSaid streams its words, then says nothing more until its call is
// cancelled.
type halfSaid struct {
	providers.Client
	words   []string
	thought []string // reasoning streamed before the words
	// fail, if set, ends the call with it once all is streamed.
	fail error
}

func (m halfSaid) Stream(ctx context.Context, _ providers.Request, emit func(providers.Event)) (providers.Response, error) {
	for _, w := range m.thought {
		emit(providers.Event{Kind: providers.EventThinking, Text: w})
	}
	for _, w := range m.words {
		emit(providers.Event{Kind: providers.EventText, Text: w})
	}
	if m.fail != nil {
		return providers.Response{}, m.fail
	}
	<-ctx.Done()
	return providers.Response{}, ctx.Err()
}

// halfSaidHarness is a harness whose model is hs around the harness's own
// client.
func halfSaidHarness(t *testing.T, hs halfSaid) *harness {
	return newHarnessWith(t, 128_000, nil, func(h *harness, d *Deps) {
		one := d.Catalog.(oneModel)
		hs.Client = one.client
		one.client = hs
		d.Catalog = one
	})
}

// TestATurnCutByAStopKeepsTheWordsItStreamed: the mark a stop stores for
// the turn it cuts holds the words of the answer its client already saw,
// then the mark, so the transcript read back after a restart is what was
// shown.
func TestATurnCutByAStopKeepsTheWordsItStreamed(t *testing.T) {
	h := halfSaidHarness(t, halfSaid{words: []string{"The first half ", "of an answer"}})
	sub := h.bus.Subscribe("c1", 1024)
	defer sub.Close()
	submitted := h.resultOf("c1", &SubmitTurn{TurnID: "t-hi", Message: chat.Message{Content: "hi"}})
	if _, ok := wait(t, "answer to the submit", submitted).(*TurnAccepted); !ok {
		t.Fatal("the turn was not accepted")
	}
	var seen strings.Builder
	for deltas := 0; deltas < 2; {
		ev := <-sub.C
		if ev.Type == chat.EventMessageDelta {
			seen.WriteString(ev.Data.(map[string]string)["text"])
			deltas++
		}
	}
	if err := h.system.Root.StopFuture(h.registry).Wait(); err != nil {
		t.Fatal(err)
	}
	h.store.mu.Lock()
	log := h.store.msgs["c1"]
	h.store.mu.Unlock()
	if len(log) != 2 {
		t.Fatalf("the log after the stop: %+v", log)
	}
	mark := log[1]
	want := seen.String() + "\n\n[This answer was cut short: " + mark.Problem + "]"
	if !mark.Partial || mark.Problem == "" || mark.Content != want {
		t.Fatalf("the cut answer was stored as %q (partial %v); want %q", mark.Content, mark.Partial, want)
	}
}

// TestACallCutByTheLengthLimitIsToldSoAndABrokenOneIsNot: a tool call
// the answer's length limit cut in its arguments gets a result saying it
// was cut and to send less, not that its JSON is invalid; arguments that
// are broken in an answer that ended normally still hear they are not
// valid JSON.
func TestACallCutByTheLengthLimitIsToldSoAndABrokenOneIsNot(t *testing.T) {
	for name, c := range map[string]struct {
		finish     string
		want, deny string
	}{
		"cut by the length limit": {finish: providers.FinishLength, want: "length limit", deny: "not valid JSON"},
		"broken by the model":     {finish: providers.FinishToolCalls, want: "not valid JSON", deny: "length limit"},
	} {
		t.Run(name, func(t *testing.T) {
			call := callTool("k1", "echo", `{"text": "a long te`)
			call.FinishReason = c.finish
			h := newHarness(t, 128_000, echoTools(t), call, reply("done"))
			res, _ := h.turn("echo a lot")
			if res.Problem != nil {
				t.Fatalf("problem: %+v", res.Problem)
			}
			i := slices.IndexFunc(res.Messages, func(m chat.Message) bool { return m.Role == chat.RoleTool })
			if i < 0 {
				t.Fatalf("no tool result among %+v", res.Messages)
			}
			got := res.Messages[i]
			if got.ToolCallID != "k1" || !got.IsError || !strings.Contains(got.Content, c.want) || strings.Contains(got.Content, c.deny) {
				t.Fatalf("the call's result: %+v; want an error naming %q, not %q", got, c.want, c.deny)
			}
		})
	}
}

// TestATurnCutKeepsTheReasoningItStreamed: the reasoning a model streamed
// before its answer was cut, by a stop or by a failure, is kept in the
// stored cut message's thinking, as a whole answer keeps it, beside the
// words streamed.
func TestATurnCutKeepsTheReasoningItStreamed(t *testing.T) {
	thought, said := []string{"Let me ", "think."}, []string{"The first half"}
	t.Run("by a stop", func(t *testing.T) {
		h := halfSaidHarness(t, halfSaid{words: said, thought: thought})
		sub := h.bus.Subscribe("c1", 1024)
		defer sub.Close()
		submitted := h.resultOf("c1", &SubmitTurn{TurnID: "t-hi", Message: chat.Message{Content: "hi"}})
		if _, ok := wait(t, "answer to the submit", submitted).(*TurnAccepted); !ok {
			t.Fatal("the turn was not accepted")
		}
		for ev := range sub.C {
			if ev.Type == chat.EventMessageDelta { // the reasoning went out before it
				break
			}
		}
		if err := h.system.Root.StopFuture(h.registry).Wait(); err != nil {
			t.Fatal(err)
		}
		h.store.mu.Lock()
		log := slices.Clone(h.store.msgs["c1"])
		h.store.mu.Unlock()
		if len(log) != 2 || log[1].Thinking != "Let me think." || !strings.HasPrefix(log[1].Content, "The first half\n\n[This answer was cut short: ") {
			t.Fatalf("the log after the stop: %+v; want the cut answer with its reasoning", log)
		}
	})
	t.Run("by a failure", func(t *testing.T) {
		h := halfSaidHarness(t, halfSaid{words: said, thought: thought, fail: &providers.Error{Provider: "fake", Status: 400, Body: "bad"}})
		res, _ := h.turn("hi")
		last := res.Messages[len(res.Messages)-1]
		if res.Problem == nil || !last.Partial || last.Content != "The first half" || last.Thinking != "Let me think." {
			t.Fatalf("the turn ended with %+v and the message %+v; want the cut answer with its reasoning", res.Problem, last)
		}
	})
}

// TestAFaultAfterStreamedReasoningKeepsWhatWasStreamed: a stream cut
// after the model's reasoning (DeepSeek's reasoning_content, over the wire)
// ends the turn with that reasoning stored, as a cut after its words does.
// It was tried again: the watcher got the second reasoning behind the
// first, and the answer was stored with the second alone.
func TestAFaultAfterStreamedReasoningKeepsWhatWasStreamed(t *testing.T) {
	var calls atomic.Int32
	fake := openaifake.New(openaifake.Options{Script: func(testkit.Received) testkit.Reply {
		if calls.Add(1) == 1 {
			// The role chunk and two pieces of reasoning, then the cut.
			return testkit.Reply{Thinking: "First I weigh it.", Text: "Never sent.", ChunkRunes: 5, CutAfterChunks: 3}
		}
		return testkit.Reply{Thinking: "A second thought.", Text: "The answer."}
	}})
	defer fake.Close()
	client, err := openai.New(openai.Config{Name: "ds", Company: "deepseek", BaseURL: fake.URL(), APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, 128_000, nil, func(h *harness, d *Deps) {
		one := d.Catalog.(oneModel)
		one.client = client
		d.Catalog = one
	})
	res, evs := h.turn("hi")
	var thought, said strings.Builder
	for _, ev := range evs {
		switch ev.Type {
		case chat.EventThinkingDelta:
			thought.WriteString(ev.Data.(map[string]string)["text"])
		case chat.EventMessageDelta:
			said.WriteString(ev.Data.(map[string]string)["text"])
		}
	}
	if thought.Len() == 0 {
		t.Fatal("no reasoning was streamed")
	}
	last := res.Messages[len(res.Messages)-1]
	if last.Role != chat.RoleAssistant || last.Thinking != thought.String() || last.Content != said.String() {
		t.Fatalf("streamed thinking %q and words %q; stored %+v (problem %+v)", thought.String(), said.String(), last, res.Problem)
	}
	if res.Problem == nil || !last.Partial {
		t.Fatalf("the cut answer ended with %+v, stored as %+v; want a problem and a partial answer", res.Problem, last)
	}
}
