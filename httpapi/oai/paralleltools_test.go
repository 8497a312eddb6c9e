package oai_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/anthropicfake"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/ollamafake"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestParallelToolCallsFalseReachesTheProvider: parallel_tool_calls false
// on Chat Completions and on Responses is told to the provider in its own
// words (OpenAI-style: parallel_tool_calls false; Anthropic: tool_choice
// auto with disable_parallel_tool_use), and to Ollama, which has no such
// field, not at all (nor is the request refused). It reached no provider.
func TestParallelToolCallsFalseReachesTheProvider(t *testing.T) {
	script := func(testkit.Received) testkit.Reply { return testkit.Reply{Text: "ok"} }
	type fake interface {
		URL() string
		Requests() []testkit.Received
		Close()
	}
	cases := []struct {
		kind, want string
		start      func() fake
	}{
		{"openai", `"parallel_tool_calls":false`, func() fake { return openaifake.New(openaifake.Options{Script: script}) }},
		{"anthropic", `"tool_choice":{"disable_parallel_tool_use":true,"type":"auto"}`, func() fake {
			return anthropicfake.New(anthropicfake.Options{Script: script,
				Models: []anthropicfake.ModelEntry{{ID: "m", DisplayName: "m", MaxInputTokens: 32000, MaxTokens: 64_000}}})
		}},
		{"ollama", "", func() fake {
			return ollamafake.New(ollamafake.Options{Script: script, Models: []ollamafake.ModelEntry{{Name: "m", Size: 2 << 30, Family: "llama",
				ModelInfo: map[string]any{"general.architecture": "llama", "llama.context_length": 32000}, Capabilities: []string{"completion", "tools"}}}})
		}},
	}
	tool := `{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{}}}}`
	bodies := map[string]string{
		"chat/completions": `{"model":"fake/m","messages":[{"role":"user","content":"hi"}],"tools":[` + tool + `],"parallel_tool_calls":false}`,
		"responses":        `{"model":"fake/m","input":"hi","tools":[{"type":"function","name":"lookup","parameters":{"type":"object","properties":{}}}],"parallel_tool_calls":false}`,
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			f := c.start()
			t.Cleanup(f.Close)
			cfg, err := daemontest.ConfigFor(c.kind, t.TempDir(), f.URL(), 32000)
			if err != nil {
				t.Fatal(err)
			}
			d := daemontest.Start(t, cfg, nil)
			for route, body := range bodies {
				resp, err := http.Post(d.Server.URL+"/v1/"+route, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d %s", route, resp.StatusCode, got)
				}
				reqs := f.Requests()
				raw := string(reqs[len(reqs)-1].Raw)
				if c.want != "" && !strings.Contains(raw, c.want) {
					t.Errorf("%s: the provider was sent %s, want %s in it", route, raw, c.want)
				}
				if c.want == "" && strings.Contains(raw, "parallel") {
					t.Errorf("%s: Ollama was sent %s, which has no such field", route, raw)
				}
			}
		})
	}
}
