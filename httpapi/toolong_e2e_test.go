package httpapi_test

// Acceptance tests of issue 19: no request agentd makes, of any kind, is
// ever too long for the window of the model it goes to, and a refusal in
// disguise (finish_reason length with nothing said) heals like any other.

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// pasteTurn is turn i of a long chat where the person pastes large CSV
// extracts and code blocks, the text that fills a small window fastest.
func pasteTurn(i int) string {
	var b strings.Builder
	if i%2 == 0 {
		fmt.Fprintf(&b, "I'm Ana, I run a bakery. Here are this week's orders (part %d):\n```csv\norder,date,item,qty,price_eur\n", i)
		for r := range 45 {
			fmt.Fprintf(&b, "%d,2026-11-%02d,%s,%d,%d.%02d\n", i*100+r, r%28+1, []string{"rye", "croissant", "baguette"}[r%3], r%7+1, r%9+2, r*7%100)
		}
		b.WriteString("```\nWhich item sold best?")
		return b.String()
	}
	fmt.Fprintf(&b, "And the script that totals them (version %d):\n```python\n", i)
	for r := range 25 {
		fmt.Fprintf(&b, "def total_%d(rows):\n    return sum(float(x['price_eur']) * int(x['qty']) for x in rows if x['item'] == 'item%d')\n", r, r)
	}
	b.WriteString("```\nIs it right?")
	return b.String()
}

// A long chat replayed on a 4K and an 8K model: every request the fake sees
// (turns, summaries, in-turn condensing, learning) fits its window together
// with its own max_tokens, as the fake counts them; the fake refuses with
// the real OpenAI body anything over, so a refusal would show here.
func TestNoRequestOfAnyKindExceedsTheWindow(t *testing.T) {
	for _, win := range []int{4096, 8192} {
		t.Run(fmt.Sprint(win), func(t *testing.T) {
			script, _ := summaryScript()
			fake := openaifake.New(openaifake.Options{Window: win, Script: script})
			defer fake.Close()
			d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), win), nil, hub.Options{InMemory: true})
			c := newChat(t, d, "")
			for i := range 24 {
				send(t, d, c.ID, pasteTurn(i))
			}
			waitFor(t, "a learning request", func() bool { return len(requestsOf(fake, kindLearner)) > 0 })
			kinds := map[string]int{}
			for _, r := range fake.Requests() {
				k := requestKind(r)
				kinds[k]++
				if r.InputTokens+r.MaxTokens > win {
					t.Errorf("%s request of %d input tokens and max_tokens %d on a %d window", k, r.InputTokens, r.MaxTokens, win)
				}
			}
			t.Logf("window %d: requests by kind %v", win, kinds)
			if kinds[kindSummary] == 0 || kinds[kindLearner] == 0 {
				t.Errorf("the replay made no summarising or learning request (%v): nothing was checked", kinds)
			}
		})
	}
}

// finish_reason length with nothing said while the input filled the window
// (LM Studio with a list that overstates the window) is a refusal for
// length: the window is learned from it and the turn heals.
func TestLengthWithNoAnswerHeals(t *testing.T) {
	const listed, loaded = 8192, 4096
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		if requestKind(r) != kindTurn {
			script, _ := summaryScript()
			return script(r)
		}
		if r.InputTokens+r.MaxTokens > loaded {
			// What a server with context shift off does: it stops at once.
			return testkit.Reply{Finish: "length", Usage: &chat.Usage{InputTokens: loaded, OutputTokens: 0}}
		}
		return testkit.Reply{Text: "Rye sold best."}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), listed), nil, hub.Options{InMemory: true})
	c := newChat(t, d, "")
	var res = send(t, d, c.ID, pasteTurn(0))
	for i := 1; i < 6; i++ {
		res = send(t, d, c.ID, pasteTurn(i))
	}
	last := res.Messages[len(res.Messages)-1]
	if last.Role != api.RoleAssistant || last.Content != "Rye sold best." {
		t.Fatalf("last answer %+v: the turn did not heal", last)
	}
	v := chatContext(t, d, c.ID)
	if v.WindowSource != providers.SourceRefusal || v.Window >= listed {
		t.Errorf("window %d from %q: want one learned from the silent refusal, under %d", v.Window, v.WindowSource, listed)
	}
}

// A refusal to the learner teaches the window of the model it went to, and
// a chat on that model (a local server's: the learner uses the chat's own
// model) is sized to it from its next turn.
func TestLearnerRefusalTeachesTheChatsModel(t *testing.T) {
	const listed, real = 8192, 3000
	script, _ := summaryScript()
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		if requestKind(r) == kindLearner && r.InputTokens+r.MaxTokens > real {
			return testkit.Reply{Status: 400, Body: fmt.Sprintf(`{"error":{"message":"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
				real, r.InputTokens+r.MaxTokens, r.InputTokens, r.MaxTokens)}
		}
		return script(r)
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), listed), nil, hub.Options{InMemory: true})
	c := newChat(t, d, "")
	for i := 0; len(requestsOf(fake, kindLearner)) == 0 && i < 60; i++ {
		send(t, d, c.ID, pasteTurn(i))
	}
	waitFor(t, "the learner to learn the window", func() bool {
		v := chatContext(t, d, c.ID)
		return v.Window == real && v.WindowSource == providers.SourceRefusal
	})
	send(t, d, c.ID, "Thanks, which item sold best?")
	turns := requestsOf(fake, kindTurn)
	if last := turns[len(turns)-1]; last.NumCtx > real || last.InputTokens+last.MaxTokens > real {
		t.Errorf("the next turn was sized to %d (num_ctx %d, %d+%d tokens), not to the learned %d", listed, last.NumCtx, last.InputTokens, last.MaxTokens, real)
	}
}

// The summariser and the learner use a provider's cheapest model, whose
// window is not the chat's: a chat on a 32K model folds long stretches, and
// every summarising and learning request is sized to the 4K model it goes
// to, not to the chat's window.
func TestBackgroundRequestsFitTheirOwnModel(t *testing.T) {
	windows := map[string]int{"big": 32768, "small": 4096}
	script, _ := summaryScript()
	fake := openaifake.New(openaifake.Options{Script: script})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), windows["big"])
	cfg.Providers[0].Company = "openai"
	cfg.Providers[0].Cheapest = "small"
	cfg.Providers[0].Models = []configs.Model{{ID: "big", Window: windows["big"]}, {ID: "small", Window: windows["small"]}}
	d := daemontest.Start(t, cfg, nil, hub.Options{InMemory: true})
	c := newChat(t, d, "fake/big")
	for i := 0; len(requestsOf(fake, kindLearner)) == 0 && i < 120; i++ {
		send(t, d, c.ID, pasteTurn(i))
	}
	waitFor(t, "a learning request", func() bool { return len(requestsOf(fake, kindLearner)) > 0 })
	seen := map[string]int{}
	for _, r := range fake.Requests() {
		k := requestKind(r) + " on " + r.Model
		seen[k]++
		if w := windows[r.Model]; r.InputTokens+r.MaxTokens > w {
			t.Errorf("%s: %d input tokens and max_tokens %d on a %d window", k, r.InputTokens, r.MaxTokens, w)
		}
	}
	t.Logf("requests: %v", seen)
	if seen[kindLearner+" on small"] == 0 || seen[kindSummary+" on small"] == 0 {
		t.Errorf("no learning or summarising request went to the small model (%v): nothing was checked", seen)
	}
}

// A provider that never names its window (Groq's real body): a refusal
// teaches an upper bound; when the server is then reloaded with a smaller
// window (LM Studio, llama.cpp), the next refusal lowers the bound again, not
// only a refusal that names a number; no turn is lost on the way.
func TestBoundFromRefusalsNamingNoWindowIsLoweredAgain(t *testing.T) {
	const listed = 8192
	const groq = `{"error":{"message":"Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	script, _ := summaryScript()
	var mu sync.Mutex
	real := 6000
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		mu.Lock()
		over := r.InputTokens+r.MaxTokens > real
		mu.Unlock()
		if over {
			return testkit.Reply{Status: 400, Body: groq}
		}
		return script(r)
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), listed), nil, hub.Options{InMemory: true})
	c := newChat(t, d, "")
	var learned []int
	for i := range 24 {
		if i == 12 {
			mu.Lock()
			real = 3000 // the server is reloaded with a smaller context
			mu.Unlock()
		}
		send(t, d, c.ID, pasteTurn(i))
		if v := chatContext(t, d, c.ID); v.WindowSource == providers.SourceRefusal && (len(learned) == 0 || v.Window != learned[len(learned)-1]) {
			learned = append(learned, v.Window)
		}
	}
	t.Logf("windows learned, turn by turn: %v", learned)
	if len(learned) < 2 || learned[len(learned)-1] >= 6000 {
		t.Fatalf("windows learned %v: want a bound, then lower ones once the server shrank", learned)
	}
	for i := 1; i < len(learned); i++ {
		if learned[i] >= learned[i-1] {
			t.Errorf("window went %d → %d: a bound is only ever lowered", learned[i-1], learned[i])
		}
	}
}
