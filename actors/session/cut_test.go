package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/eventbus"
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

// reasoningFake is an OpenAI-style server (DeepSeek's reasoning_content,
// over the wire) whose first answer is first, then second, and a session
// harness on it; calls counts the requests.
func reasoningFake(t *testing.T, first, second testkit.Reply) (*harness, *atomic.Int32) {
	var calls atomic.Int32
	fake := openaifake.New(openaifake.Options{Script: func(testkit.Received) testkit.Reply {
		if calls.Add(1) == 1 {
			return first
		}
		return second
	}})
	t.Cleanup(fake.Close)
	client, err := openai.New(openai.Config{Name: "ds", Company: "deepseek", BaseURL: fake.URL(), APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, 128_000, nil, func(h *harness, d *Deps) {
		one := d.Catalog.(oneModel)
		one.client = client
		d.Catalog = one
	})
	return h, &calls
}

// shown is what a watcher shows of a turn's answer from its events:
// the reasoning (emptied by thinking.reset) and the words, and how many
// resets it heard.
func shown(evs []eventbus.Event) (thought, said string, resets int) {
	var th, sa strings.Builder
	for _, ev := range evs {
		switch ev.Type {
		case chat.EventThinkingDelta:
			th.WriteString(ev.Data.(map[string]string)["text"])
		case chat.EventMessageDelta:
			sa.WriteString(ev.Data.(map[string]string)["text"])
		case chat.EventThinkingReset:
			th.Reset()
			resets++
		}
	}
	return th.String(), sa.String(), resets
}

// TestACutWhileTheModelReasonsIsTriedAgain: a stream cut after reasoning
// and before the first word is tried again, as a cut before any output is.
// The watcher hears thinking.reset between the two reasonings, and the
// answer is stored with the retry's reasoning and words alone. It used to
// end the turn with the first reasoning stored as a partial answer.
func TestACutWhileTheModelReasonsIsTriedAgain(t *testing.T) {
	// The role chunk and two pieces of reasoning, then the cut.
	h, calls := reasoningFake(t, testkit.Reply{Thinking: "First I weigh it.", Text: "Never sent.", ChunkRunes: 5, CutAfterChunks: 3},
		testkit.Reply{Thinking: "A second thought.", Text: "The answer."})
	res, evs := h.turn("hi")
	if res.Problem != nil {
		t.Fatalf("the turn ended with %+v; want it answered by the retry", res.Problem)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the model was asked %d times, want 2", n)
	}
	var before strings.Builder
	for _, ev := range evs {
		if ev.Type == chat.EventThinkingReset {
			if !strings.Contains(ev.Data.(map[string]string)["reason"], "stream") {
				t.Errorf("thinking.reset says %v; want the fault", ev.Data)
			}
			break
		}
		if ev.Type == chat.EventThinkingDelta {
			before.WriteString(ev.Data.(map[string]string)["text"])
		}
	}
	if before.String() != "First I we" {
		t.Fatalf("reasoning streamed before the reset %q; want the first try's two pieces", before.String())
	}
	thought, said, resets := shown(evs)
	if resets != 1 || thought != "A second thought." || said != "The answer." {
		t.Fatalf("the watcher shows thinking %q and words %q after %d resets; want the retry's alone after one", thought, said, resets)
	}
	h.store.mu.Lock()
	log := slices.Clone(h.store.msgs["c1"])
	h.store.mu.Unlock()
	if len(log) != 2 || log[1].Thinking != "A second thought." || log[1].Content != "The answer." || log[1].Partial {
		t.Fatalf("the log %+v; want the person's message and the retry's answer, once", log)
	}
}

// TestACutAfterTheFirstWordIsNotTriedAgain: once a word of the answer
// went out, a cut ends the turn with what was streamed, reasoning and
// words, stored as a partial answer; no thinking.reset is sent.
func TestACutAfterTheFirstWordIsNotTriedAgain(t *testing.T) {
	// The role chunk, four pieces of reasoning, two of words, then the cut.
	h, calls := reasoningFake(t, testkit.Reply{Thinking: "First I weigh it.", Text: "The answer was", ChunkRunes: 5, CutAfterChunks: 7},
		testkit.Reply{Thinking: "A second thought.", Text: "Never asked."})
	res, evs := h.turn("hi")
	if n := calls.Load(); n != 1 {
		t.Fatalf("the model was asked %d times after its first words, want 1", n)
	}
	thought, said, resets := shown(evs)
	if resets != 0 || thought != "First I weigh it." || said != "The answer" {
		t.Fatalf("the watcher shows thinking %q and words %q after %d resets", thought, said, resets)
	}
	last := res.Messages[len(res.Messages)-1]
	if res.Problem == nil || !last.Partial || last.Thinking != thought || last.Content != said {
		t.Fatalf("the cut answer ended with %+v, stored as %+v; want a problem and the streamed answer, partial", res.Problem, last)
	}
}

// thinksThenFails reasons "thought N" on its Nth call, then fails with a
// passing fault.
type thinksThenFails struct {
	calls atomic.Int32
}

func (m *thinksThenFails) Stream(_ context.Context, _ providers.Request, emit func(providers.Event)) (providers.Response, error) {
	n := m.calls.Add(1)
	emit(providers.Event{Kind: providers.EventThinking, Text: fmt.Sprintf("thought %d", n)})
	return providers.Response{}, &providers.Error{Provider: "fake", Retryable: true, RetryAfter: time.Millisecond, Err: errors.New("stream interrupted")}
}

func (m *thinksThenFails) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

// TestReasoningCutOnEveryTrySpendsTheRetries: cuts while the model
// reasons share the turn's tries with the other passing faults; the turn
// gives up after them with the last try's reasoning alone stored, which is
// what the watcher shows after the last reset.
func TestReasoningCutOnEveryTrySpendsTheRetries(t *testing.T) {
	model := &thinksThenFails{}
	h := newHarnessWith(t, 128_000, nil, func(_ *harness, d *Deps) {
		d.Catalog = oneModel{client: model, info: providers.ModelInfo{Provider: "fake", ID: "m", Window: 128_000}}
	})
	res, evs := h.turn("hi")
	if n := model.calls.Load(); n != maxRetries+1 {
		t.Fatalf("the model was asked %d times, want %d", n, maxRetries+1)
	}
	if res.Problem == nil || !strings.Contains(res.Problem.Message, fmt.Sprintf("given up after %d tries", maxRetries+1)) {
		t.Fatalf("problem %+v; want the tries spent", res.Problem)
	}
	want := fmt.Sprintf("thought %d", maxRetries+1)
	thought, _, resets := shown(evs)
	last := res.Messages[len(res.Messages)-1]
	if resets != maxRetries || thought != want || !last.Partial || last.Thinking != want {
		t.Fatalf("%d resets, the watcher shows %q, stored %+v; want %d resets and %q alone", resets, thought, last, maxRetries, want)
	}
}
