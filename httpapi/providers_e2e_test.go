package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/anthropicfake"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/ollamafake"
	"github.com/agentd/agentd/testkit/openaifake"
)

// fakeServer is what the tests need of each protocol's fake.
type fakeServer interface {
	URL() string
	Requests() []testkit.Received
	Close()
}

// fakeModel is one model a fake lists, in neutral terms.
type fakeModel struct {
	ID     string
	Window int
	Loaded bool // Ollama: in /api/ps before any chat
}

// fakeOptions configure a fake of any kind.
type fakeOptions struct {
	// Window the fake itself enforces (0: none). OpenAI and Anthropic refuse
	// with their real body; Ollama lowers num_ctx to it and cuts silently.
	Window int
	Script testkit.Script
	Models []fakeModel
}

// startFake starts the fake of a protocol kind and stops it when the test ends.
func startFake(t *testing.T, kind string, o fakeOptions) fakeServer {
	t.Helper()
	var f fakeServer
	switch kind {
	case "openai":
		var ms []openaifake.ModelEntry
		for _, m := range o.Models {
			ms = append(ms, openaifake.ModelEntry{ID: m.ID, Window: m.Window, WindowField: "max_model_len"})
		}
		f = openaifake.New(openaifake.Options{Window: o.Window, Script: o.Script, Models: ms})
	case "anthropic":
		ms := []anthropicfake.ModelEntry{}
		for _, m := range o.Models {
			ms = append(ms, anthropicfake.ModelEntry{ID: m.ID, DisplayName: m.ID, MaxInputTokens: m.Window, MaxTokens: 64_000})
		}
		f = anthropicfake.New(anthropicfake.Options{Window: o.Window, Script: o.Script, Models: ms})
	case "ollama":
		var ms []ollamafake.ModelEntry
		for _, m := range o.Models {
			ms = append(ms, ollamafake.ModelEntry{
				Name: m.ID, Size: 2 << 30, Family: "llama", ParameterSize: "3.2B", QuantizationLevel: "Q4_K_M",
				ModelInfo:    map[string]any{"general.architecture": "llama", "llama.context_length": m.Window},
				Capabilities: []string{"completion", "tools"}, Loaded: m.Loaded,
			})
		}
		f = ollamafake.New(ollamafake.Options{Window: o.Window, Script: o.Script, Models: ms})
	default:
		t.Fatalf("unknown kind %q", kind)
	}
	t.Cleanup(f.Close)
	return f
}

// kindConfig is daemontest.ConfigFor with extra models appended to the one
// provider.
func kindConfig(t *testing.T, kind, baseURL string, window int, extra ...configs.Model) configs.Config {
	t.Helper()
	cfg, err := daemontest.ConfigFor(kind, t.TempDir(), baseURL, window)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Providers[0].Models = append(cfg.Providers[0].Models, extra...)
	return cfg
}

// sideReply answers the daemon's own calls that are not the chat's turn:
// the summariser (fold and in-turn condensing) and the learner.
func sideReply(r testkit.Received) (testkit.Reply, bool) {
	switch r.System {
	case summarizer.Instructions:
		return testkit.Reply{Text: "The person sent long numbered notes and asked for echoes."}, true
	case summarizer.CondenseInstructions:
		return testkit.Reply{Text: "TASK: echo\nPROGRESS: none\nREMAINING: all\nDATA: none\nDECISIONS: none"}, true
	case learner.Instructions:
		return testkit.Reply{Text: "[]"}, true
	}
	return testkit.Reply{}, false
}

// turnRequests keeps the requests of the chat's own turns.
func turnRequests(rs []testkit.Received) []testkit.Received {
	var out []testkit.Received
	for _, r := range rs {
		if _, side := sideReply(r); !side {
			out = append(out, r)
		}
	}
	return out
}

// calcScriptFor asks for calculate when the person says "calculate", reports
// the tool's answer, and otherwise echoes. callID is the id the fake gives
// the call ("" as older Ollama sends none).
func calcScriptFor(callID string) testkit.Script {
	return func(r testkit.Received) testkit.Reply {
		if rep, ok := sideReply(r); ok {
			return rep
		}
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == chat.RoleTool:
			return testkit.Reply{Text: "The result is " + last.Content + "."}
		case strings.Contains(last.Content, "calculate"):
			return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: callID, Name: "calculate", Arguments: `{"expression":"6*7"}`}}}
		default:
			return testkit.Reply{Text: "You said: " + last.Content}
		}
	}
}

// callIDs is the tool call id each protocol's fake hands out, in the form
// each real API uses (Ollama before 0.12 names no calls).
var callIDs = map[string]string{"openai": "call_Xq1", "anthropic": "toolu_01A", "ollama": ""}

// eventLog collects the events of turns.
type eventLog struct {
	mu     sync.Mutex
	types  map[string]int
	deltas strings.Builder
	events []api.Event
}

func newEventLog() *eventLog { return &eventLog{types: map[string]int{}} }

func (s *eventLog) add(ev api.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.types[ev.Type]++
	s.events = append(s.events, ev)
	if ev.Type == chat.EventMessageDelta {
		var d struct{ Text string }
		_ = json.Unmarshal(ev.Data, &d)
		s.deltas.WriteString(d.Text)
	}
}

// said is the text the stream leaves its client, as docs/api.md has it
// read: message.delta text, dropped at each message.reset.
func (s *eventLog) said() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, ev := range s.events {
		switch ev.Type {
		case api.EventMessageReset:
			b.Reset()
		case api.EventMessageDelta:
			var d struct{ Text string }
			_ = json.Unmarshal(ev.Data, &d)
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

func (s *eventLog) count(typ string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.types[typ]
}

// pvGet reads a GET answer of the daemon.
func pvGet(t *testing.T, d *daemontest.Daemon, path string, out any) {
	t.Helper()
	resp, err := http.Get(d.Server.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// listedModel returns GET /v1/models' entry for ref.
func listedModel(t *testing.T, d *daemontest.Daemon, ref string) api.Model {
	t.Helper()
	var list api.Models
	pvGet(t, d, "/v1/models", &list)
	for _, m := range list.Models {
		if m.ID == ref {
			return m
		}
	}
	t.Fatalf("GET /v1/models has no %s: %+v", ref, list.Models)
	return api.Model{}
}

func TestChatRunsThroughEachProtocolStreamingWithATool(t *testing.T) {
	for _, kind := range daemontest.Kinds {
		t.Run(kind, func(t *testing.T) {
			fake := startFake(t, kind, fakeOptions{Window: 32000, Script: calcScriptFor(callIDs[kind]), Models: []fakeModel{{ID: "m", Window: 32000}}})
			d := daemontest.Start(t, kindConfig(t, kind, fake.URL(), 32000), nil)
			ctx := context.Background()
			c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
			if err != nil {
				t.Fatal(err)
			}
			ev := newEventLog()
			var usage chat.Usage
			for _, text := range []string{"hello there", "please calculate six times seven"} {
				res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: text}, ev.add)
				if err != nil {
					t.Fatalf("send %q: %v", text, err)
				}
				if res.Problem != nil {
					t.Fatalf("send %q: problem %+v", text, res.Problem)
				}
				usage = usage.Add(chat.Usage(res.Usage))
			}
			// The answers arrive in pieces: the fakes split text into deltas of
			// four characters, so more than one delta per answer.
			if n := ev.count(chat.EventMessageDelta); n < 4 {
				t.Fatalf("%d message.delta events; the answers were not streamed", n)
			}
			if got, want := ev.deltas.String(), "You said: hello thereThe result is 42."; got != want {
				t.Fatalf("streamed text %q, want %q", got, want)
			}
			if ev.count(chat.EventToolCall) != 1 || ev.count(chat.EventToolResult) != 1 {
				t.Fatalf("tool.call %d, tool.result %d events; want one each", ev.count(chat.EventToolCall), ev.count(chat.EventToolResult))
			}

			msgs, err := d.Client.Transcript(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			var roles []string
			for _, m := range msgs {
				roles = append(roles, string(m.Role))
			}
			if got := strings.Join(roles, " "); got != "user assistant user assistant tool assistant" {
				t.Fatalf("roles %q", got)
			}
			call, result := msgs[3], msgs[4]
			if len(call.ToolCalls) != 1 || call.ToolCalls[0].Name != "calculate" || call.ToolCalls[0].ID == "" {
				t.Fatalf("stored call %+v", call.ToolCalls)
			}
			var args struct{ Expression string }
			if err := json.Unmarshal([]byte(call.ToolCalls[0].Arguments), &args); err != nil || args.Expression != "6*7" {
				t.Fatalf("stored arguments %q (%v)", call.ToolCalls[0].Arguments, err)
			}
			if callIDs[kind] != "" && call.ToolCalls[0].ID != callIDs[kind] {
				t.Fatalf("call id %q, the provider named it %q", call.ToolCalls[0].ID, callIDs[kind])
			}
			if result.Content != "42" || result.ToolCallID != call.ToolCalls[0].ID || result.IsError {
				t.Fatalf("stored result %+v for call %q", result, call.ToolCalls[0].ID)
			}
			if msgs[5].Content != "The result is 42." || msgs[1].Content != "You said: hello there" {
				t.Fatalf("stored answers %q / %q", msgs[1].Content, msgs[5].Content)
			}

			// What the provider saw: the calculator offered, and the result sent
			// back under the id the provider gave its call.
			reqs := turnRequests(fake.Requests())
			if len(reqs) != 3 {
				t.Fatalf("%d turn requests, want 3 (answer, tool call, answer after the result)", len(reqs))
			}
			last := reqs[2]
			if !hasString(last.Tools, "calculate") {
				t.Fatalf("tools offered %v", last.Tools)
			}
			back := last.Messages[len(last.Messages)-1]
			if back.Role != chat.RoleTool || back.Content != "42" {
				t.Fatalf("last message sent %+v, want the tool's result", back)
			}
			if callIDs[kind] != "" && back.ToolCallID != callIDs[kind] {
				t.Fatalf("result sent under id %q, want %q", back.ToolCallID, callIDs[kind])
			}
			// Usage as each fake counted it: the turn totals are the sums.
			in := 0
			for _, r := range reqs {
				in += r.InputTokens
			}
			if usage.InputTokens != in || usage.OutputTokens <= 0 {
				t.Fatalf("usage %+v; the fake counted %d input tokens over the turns", usage, in)
			}
		})
	}
}

func hasString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// noteText is n words of distinct, plain text (about 1.25 tokens a word by the
// fakes' count), tagged so each note differs.
func noteText(tag string, words int) string {
	var b strings.Builder
	for i := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		if i%10 == 0 {
			fmt.Fprintf(&b, "%s-%d", tag, i/10)
			continue
		}
		b.WriteString([]string{"river", "stone", "garden", "window", "lantern", "copper", "meadow", "harbor", "violet"}[i%9])
	}
	return b.String()
}
