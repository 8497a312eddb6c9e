package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
)

// Real "too long" refusals, with only the numbers changed. Each is the body
// of a real answer recorded in providers/testdata/too_long.jsonl:
//   - OpenAI, A002: issue chathub-dev/chathub#320 (status 400).
//   - Anthropic, A015: issue boldsoftware/exe.dev#62 (status 400).
//   - Ollama, H014: errorInputTooLong in
//     https://github.com/ollama/ollama/blob/v0.17.4/runner/ollamarunner/runner.go,
//     sent as {"error": ...} with 400 by server/routes.go.
func openAITooLong(window, input int) string {
	return fmt.Sprintf(`{"error":{"message":"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, window, input)
}

func anthropicTooLong(window, input int) string {
	return fmt.Sprintf(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: %d tokens > %d maximum"},"request_id":"req_011CWdepJvA2D819tdYYq4h7"}`, input, window)
}

func ollamaTooLong(int, int) string {
	return `{"error":"the input length exceeds the context length"}`
}

var refusals = map[string]func(window, input int) string{
	"openai": openAITooLong, "anthropic": anthropicTooLong, "ollama": ollamaTooLong,
}

// provider stands in for a model whose real window is smaller than the
// daemon believes: once closed is set, it refuses (with its real body) every
// turn request over real tokens, or every one when always is set. It answers
// the summariser and learner, and notes briefly.
type provider struct {
	kind   string
	real   int
	closed atomic.Bool
	always atomic.Bool
	// most caps the refusals (0: no cap).
	most    int64
	refused atomic.Int64
}

func (p *provider) script(r testkit.Received) testkit.Reply {
	if rep, ok := sideReply(r); ok {
		return rep
	}
	if p.closed.Load() && (p.always.Load() || r.InputTokens > p.real) && (p.most == 0 || p.refused.Load() < p.most) {
		p.refused.Add(1)
		return testkit.Reply{Status: http.StatusBadRequest, Body: refusals[p.kind](p.real, max(r.InputTokens, p.real+1))}
	}
	last := r.Messages[len(r.Messages)-1]
	return testkit.Reply{Text: fmt.Sprintf("Noted (%d characters).", len(last.Content))}
}

// metricValue reads one sample of GET /metrics.
func metricValue(t *testing.T, d *daemontest.Daemon, name string) float64 {
	t.Helper()
	resp, err := http.Get(d.Server.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("/metrics has no %s", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// healCase is a chat whose history no longer fits the model's real window.
type healCase struct {
	kind string
	// configured is the window the daemon is told; real the one the
	// provider holds.
	configured, real int
	// fakeWindow is the window the fake enforces by itself (Ollama: it cuts
	// the prompt silently); 0 leaves the refusal to the scripted provider.
	fakeWindow int
	// noteWords sizes each history note; the history grows until one turn
	// request passes historyAbove tokens (as the fake counts).
	noteWords, historyAbove int
	// trigger is the message of the turn that does not fit.
	trigger string
}

func TestTooLongHealsSilentlyAndTheWindowIsLearned(t *testing.T) {
	cases := []healCase{
		// The provider refuses with its real body, naming the real window.
		{kind: "openai", configured: 32000, real: 8000, noteWords: 1200, historyAbove: 10_000, trigger: "Which note came first?"},
		{kind: "anthropic", configured: 32000, real: 8000, noteWords: 1200, historyAbove: 10_000, trigger: "Which note came first?"},
		// Ollama refuses nothing: told num_ctx 16384 for a model that reads
		// 4096, it lowers num_ctx to 4096 (as it does for a num_ctx above the
		// trained length), drops the oldest messages and answers 200. The
		// daemon must notice from prompt_eval_count (issue 3 §4) and heal.
		{kind: "ollama", configured: 16384, real: 4096, fakeWindow: 4096, noteWords: 150, historyAbove: 3500,
			trigger: "Here is one more long note, then tell me which note came first. " + noteText("last", 600)},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			p := &provider{kind: tc.kind, real: tc.real}
			fake := startFake(t, tc.kind, fakeOptions{Window: tc.fakeWindow, Script: p.script,
				Models: []fakeModel{{ID: "m", Window: tc.real}}})
			d := daemontest.Start(t, kindConfig(t, tc.kind, fake.URL(), tc.configured), nil)
			ctx := context.Background()
			c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
			if err != nil {
				t.Fatal(err)
			}

			// History the configured window takes whole and the real one cannot.
			turns := 0
			for {
				res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: noteText(fmt.Sprintf("note%d", turns), tc.noteWords)}, nil)
				if err != nil || res.Problem != nil {
					t.Fatalf("history turn %d: %v %+v", turns, err, res.Problem)
				}
				turns++
				reqs := turnRequests(fake.Requests())
				last := reqs[len(reqs)-1]
				if tc.fakeWindow > 0 && last.InputTokens > tc.fakeWindow {
					t.Fatalf("setup: history turn %d already sent %d tokens to a %d window", turns, last.InputTokens, tc.fakeWindow)
				}
				if last.InputTokens > tc.historyAbove {
					break
				}
				if turns > 40 {
					t.Fatal("setup: the history never grew past the real window")
				}
			}
			if v, _ := d.Client.Context(ctx, c.ID); v.FirstKeptSeq > 1 {
				t.Fatalf("setup: the history was folded before the refusal (first kept %d)", v.FirstKeptSeq)
			}
			before := len(turnRequests(fake.Requests()))

			// From now on the provider holds its real window (the Ollama fake
			// always did, and cuts rather than refuses).
			p.closed.Store(tc.fakeWindow == 0)
			ev := newEventLog()
			res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: tc.trigger}, ev.add)
			if err != nil {
				t.Fatal(err)
			}
			if res.Problem != nil || ev.count(chat.EventTurnProblem) != 0 {
				t.Fatalf("the turn ended with a problem: %+v", res.Problem)
			}
			if ev.count(chat.EventHealed) != 1 {
				t.Fatalf("%d healed events, want 1 (events: %v)", ev.count(chat.EventHealed), ev.types)
			}
			if ev.count(chat.EventCompacted) == 0 {
				t.Fatal("no compacted event: the heal did not fold the history")
			}
			reqs := turnRequests(fake.Requests())[before:]
			if len(reqs) != 2 {
				t.Fatalf("%d requests for the turn, want the refused one and one retry", len(reqs))
			}
			if reqs[0].InputTokens <= tc.real {
				t.Fatalf("setup: the first request (%d tokens) fitted the real window %d", reqs[0].InputTokens, tc.real)
			}
			retry := reqs[1]
			if retry.InputTokens > tc.real || (tc.kind == "openai" && retry.InputTokens+retry.MaxTokens > tc.real) {
				t.Fatalf("the retry sent %d tokens (+%d answer room) to a real window of %d", retry.InputTokens, retry.MaxTokens, tc.real)
			}
			var answer *api.Message
			for i := range res.Messages {
				if m := res.Messages[i]; m.Role == api.RoleAssistant {
					answer = &res.Messages[i]
				}
			}
			if answer == nil || !strings.HasPrefix(answer.Content, "Noted (") || answer.Partial {
				t.Fatalf("the turn stored %+v, want the answer to the retry", res.Messages)
			}
			// The stream leaves its client the stored answer: Ollama's
			// answer to the cut prompt, streamed before the cut showed, is
			// taken back (message.reset); a refusal streamed nothing.
			resets := 0
			if tc.fakeWindow > 0 {
				resets = 1
			}
			if said := ev.said(); said != answer.Content || ev.count(api.EventMessageReset) != resets {
				t.Fatalf("the stream said %q with %d message.reset; want the stored %q with %d", said, ev.count(api.EventMessageReset), answer.Content, resets)
			}

			// Nothing is lost: the stored transcript keeps every note.
			msgs, err := d.Client.Transcript(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 2*(turns+1) || msgs[0].Content != noteText("note0", tc.noteWords) {
				t.Fatalf("transcript holds %d messages, want %d with the first note whole", len(msgs), 2*(turns+1))
			}

			// The window is learned and shown where it came from.
			check := func(d *daemontest.Daemon, when string) {
				t.Helper()
				m := listedModel(t, d, "fake/m")
				if m.WindowSource != "refusal" {
					t.Fatalf("%s: fake/m window %d from %q, want from \"refusal\"", when, m.Window, m.WindowSource)
				}
				if tc.fakeWindow == 0 && m.Window != tc.real {
					t.Fatalf("%s: fake/m window %d, the refusal named %d", when, m.Window, tc.real)
				}
				// A refusal naming no window teaches an upper bound: less
				// than was sent, so less than the configured window.
				if m.Window <= 0 || m.Window >= tc.configured {
					t.Fatalf("%s: fake/m window %d, want below the configured %d", when, m.Window, tc.configured)
				}
			}
			check(d, "after the heal")
			view, err := d.Client.Context(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if view.WindowSource != "refusal" || !hasHealRequest(view.RecentRequests) {
				t.Fatalf("context: window %d from %q, recent requests %+v", view.Window, view.WindowSource, view.RecentRequests)
			}

			// Health and metrics note the heal.
			var health struct{ Heals float64 }
			pvGet(t, d, "/healthz", &health)
			if health.Heals != 1 {
				t.Fatalf("/healthz heals = %v, want 1", health.Heals)
			}
			if v := metricValue(t, d, "agentd_heals_total"); v != 1 {
				t.Fatalf("agentd_heals_total = %v, want 1", v)
			}

			check(d.Restart(), "after a restart")
		})
	}
}

func hasHealRequest(rs []api.RequestLog) bool {
	for _, r := range rs {
		if r.Kind == "heal" {
			return true
		}
	}
	return false
}

func TestRefusedTwiceEndsWithTheTooLongProblemAndOneNextStep(t *testing.T) {
	// What each kind's configuration holds: the chat's model, and the bigger
	// model of the same provider when there is one. Ollama's bigger model
	// must be loaded to count as ready.
	windows := map[string]int{"openai": 32000, "anthropic": 32000, "ollama": 16384}
	const bigWindow = 131072
	const trigger = "Please go through everything above once more."
	for _, kind := range daemontest.Kinds {
		for _, bigger := range []bool{true, false} {
			name := kind + "/no bigger model"
			if bigger {
				name = kind + "/bigger model configured"
			}
			t.Run(name, func(t *testing.T) {
				p := &provider{kind: kind, real: 8000}
				models := []fakeModel{{ID: "m", Window: windows[kind]}}
				var extra []configs.Model
				if bigger {
					models = append(models, fakeModel{ID: "big", Window: bigWindow, Loaded: true})
					extra = append(extra, configs.Model{ID: "big", Window: bigWindow})
				}
				fake := startFake(t, kind, fakeOptions{Script: p.script, Models: models})
				d := daemontest.Start(t, kindConfig(t, kind, fake.URL(), windows[kind], extra...), nil)
				ctx := context.Background()
				d.Hub.Refresh(ctx) // as `agentd serve` does: which models are loaded
				c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: noteText("first", 300)}, nil); err != nil || res.Problem != nil {
					t.Fatalf("first turn: %v %+v", err, res.Problem)
				}
				before := len(turnRequests(fake.Requests()))

				p.closed.Store(true)
				p.always.Store(true)
				ev := newEventLog()
				res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: trigger}, ev.add)
				if err != nil {
					t.Fatal(err)
				}
				if n := len(turnRequests(fake.Requests())) - before; n != 2 {
					t.Fatalf("the model was asked %d times; want once and one retry", n)
				}
				if ev.count(chat.EventHealed) != 0 || ev.count(chat.EventTurnProblem) != 1 {
					t.Fatalf("healed %d, turn.problem %d events", ev.count(chat.EventHealed), ev.count(chat.EventTurnProblem))
				}
				pr := res.Problem
				if pr == nil || pr.Kind != chat.ProblemTooLong || pr.NextStep == nil {
					t.Fatalf("problem %+v, want too-long with a next step", pr)
				}
				want := api.NextStep{Action: "new-chat", Message: trigger}
				if bigger {
					want = api.NextStep{Action: "switch-model", Model: "fake/big", Window: bigWindow}
				}
				if *pr.NextStep != want {
					got, _ := json.Marshal(pr.NextStep)
					t.Fatalf("next step %s, want %+v", got, want)
				}
				// The person's message is kept; no half answer is stored.
				msgs, _ := d.Client.Transcript(ctx, c.ID)
				if last := msgs[len(msgs)-1]; last.Role != api.RoleUser || last.Content != trigger {
					t.Fatalf("last stored message %+v", last)
				}
			})
		}
	}
}

// A refusal in the middle of a long tool turn: the turn itself no longer
// fits the window the refusal names, so folding earlier turns is not enough
// and the retry must go through the in-turn compaction on the learned window.
func TestHealMidTurnGoesThroughInTurnCompaction(t *testing.T) {
	const configured, real, mails = 32000, 8000, 8
	var closed atomic.Bool
	var refused atomic.Int64
	script := func(r testkit.Received) testkit.Reply {
		if r.System == summarizer.CondenseInstructions {
			return testkit.Reply{Text: "TASK: list the invoices of 8 mails\nPROGRESS: some read\nREMAINING: the rest\nDATA: INV numbers\nDECISIONS: none"}
		}
		if rep, ok := sideReply(r); ok {
			return rep
		}
		if closed.Load() && r.InputTokens > real {
			refused.Add(1)
			return testkit.Reply{Status: http.StatusBadRequest, Body: openAITooLong(real, r.InputTokens)}
		}
		read := 0
		for _, m := range r.Messages {
			read += len(m.ToolCalls)
		}
		if read >= mails {
			return testkit.Reply{Text: "Done: 8 invoices listed."}
		}
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: fmt.Sprintf("call_%d", read), Name: "read_mail", Arguments: fmt.Sprintf(`{"n":%d}`, read)}}}
	}
	fake := startFake(t, "openai", fakeOptions{Script: script})
	d := daemontest.Start(t, kindConfig(t, "openai", fake.URL(), configured), nil, hub.Options{Tools: mailTools})
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	closed.Store(true)
	ev := newEventLog()
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "Read all eight mails and list every invoice number."}, ev.add)
	if err != nil {
		t.Fatal(err)
	}
	if res.Problem != nil {
		t.Fatalf("turn ended with %+v", res.Problem)
	}
	if refused.Load() != 1 || ev.count(chat.EventHealed) != 1 {
		t.Fatalf("%d refusals, %d healed events; want one of each", refused.Load(), ev.count(chat.EventHealed))
	}
	if ev.count(chat.EventCompactionApplied) == 0 {
		t.Fatal("no compaction.applied: the live turn was never compacted to the learned window")
	}
	if last := res.Messages[len(res.Messages)-1]; last.Content != "Done: 8 invoices listed." {
		t.Fatalf("last message %+v", last)
	}
	if m := listedModel(t, d, "fake/m"); m.Window != real || m.WindowSource != "refusal" {
		t.Fatalf("fake/m window %d from %q, want %d from refusal", m.Window, m.WindowSource, real)
	}
	msgs, _ := d.Client.Transcript(ctx, c.ID)
	results := 0
	for _, m := range msgs {
		if m.Role == api.RoleTool {
			if m.Content != mailBody(results) {
				t.Fatalf("stored result %d is not the tool's output byte for byte", results)
			}
			results++
		}
	}
	if results != mails {
		t.Fatalf("transcript holds %d results, want %d", results, mails)
	}
}

// A refusal that names no window (Ollama's never do) still teaches one: an
// upper bound from what was sent (issue 3 §5, "many never name the window").
func TestRefusalNamingNoWindowTeachesAnUpperBound(t *testing.T) {
	const configured = 16384
	p := &provider{kind: "ollama", most: 1}
	fake := startFake(t, "ollama", fakeOptions{Script: p.script, Models: []fakeModel{{ID: "m", Window: configured}}})
	d := daemontest.Start(t, kindConfig(t, "ollama", fake.URL(), configured), nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: noteText("first", 300)}, nil); err != nil || res.Problem != nil {
		t.Fatalf("first turn: %v %+v", err, res.Problem)
	}
	before := len(turnRequests(fake.Requests()))
	p.closed.Store(true)
	p.always.Store(true)
	ev := newEventLog()
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "And now?"}, ev.add)
	if err != nil {
		t.Fatal(err)
	}
	if res.Problem != nil || ev.count(chat.EventHealed) != 1 {
		t.Fatalf("problem %+v, %d healed events; want a silent heal", res.Problem, ev.count(chat.EventHealed))
	}
	refused := turnRequests(fake.Requests())[before]
	m := listedModel(t, d, "fake/m")
	// The refused request was well under the configured window, so any
	// bound learned from it is too.
	if m.WindowSource != "refusal" || m.Window >= configured {
		t.Fatalf("fake/m window %d from %q after a refusal of a %d-token request; want a smaller window from \"refusal\"",
			m.Window, m.WindowSource, refused.InputTokens)
	}
}
