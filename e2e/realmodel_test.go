package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
)

// The real-server tests run against llama.cpp's llama-server and Ollama with
// the tiny generated model of testkit/realmodel (real Qwen2.5 tokenizer and
// chat template, gibberish words): they assert on structure — statuses,
// events, token counts, windows, tool-call shapes — never on wording.
// .ci/run starts the servers and sets these variables; where one is unset
// the tests that need it skip, saying so.
const (
	envLlama     = "AGENTD_TEST_LLAMA_URL"     // llama-server -c 2048
	envLlama4K   = "AGENTD_TEST_LLAMA4K_URL"   // llama-server -c 4096
	envOllama    = "AGENTD_TEST_OLLAMA_URL"    // ollama serve with model tiny-wired
	envOllamaLog = "AGENTD_TEST_OLLAMA_LOG"    // that server's log, for its own "truncating" lines
	envRealDir   = "AGENTD_TEST_REALMODEL_DIR" // the build cache: bin/llama-server, models/tiny-wired.gguf
	realModel    = "tiny-wired"
)

// realURL is the server a test runs against, or skips it.
func realURL(t *testing.T, env string) string {
	t.Helper()
	u := strings.TrimRight(os.Getenv(env), "/")
	if u == "" {
		t.Skipf("%s is not set: no real model server for this test (.ci/run starts them; see testkit/realmodel/README.md)", env)
	}
	return u
}

// realProvider is one provider entry of a real-server daemon's yaml.
type realProvider struct {
	Name, Kind, Company, BaseURL string
	Models                       []realModelCfg
}

type realModelCfg struct {
	ID     string
	Window int
	Tools  string
}

func llamaProvider(name, url string, models ...realModelCfg) realProvider {
	return realProvider{Name: name, Kind: "openai", Company: "llamacpp", BaseURL: url + "/v1", Models: models}
}

func ollamaProvider(name, url string, models ...realModelCfg) realProvider {
	return realProvider{Name: name, Kind: "ollama", BaseURL: url, Models: models}
}

// realYAML is the providers section of a daemon's yaml, with def
// ("provider/model") as the default model.
func realYAML(def string, ps ...realProvider) string {
	var b strings.Builder
	fmt.Fprintf(&b, "default_model: %s\nproviders:\n", def)
	for _, p := range ps {
		fmt.Fprintf(&b, "  - name: %s\n    kind: %s\n    base_url: %s\n", p.Name, p.Kind, p.BaseURL)
		if p.Company != "" {
			fmt.Fprintf(&b, "    company: %s\n", p.Company)
		}
		if len(p.Models) == 0 {
			continue
		}
		b.WriteString("    models:\n")
		for _, m := range p.Models {
			fmt.Fprintf(&b, "      - id: %s\n", m.ID)
			if m.Window > 0 {
				fmt.Fprintf(&b, "        window: %d\n", m.Window)
			}
			if m.Tools != "" {
				fmt.Fprintf(&b, "        tools: %s\n", m.Tools)
			}
		}
	}
	return b.String()
}

// startReal runs the agentd binary on the real servers of providers.
func startReal(t *testing.T, cfg daemonConfig) *daemon {
	t.Helper()
	if cfg.Limits == nil {
		// These bound a hang. The idle limit is generous: llama-server runs
		// one request at a time (-np 1), so on a loaded machine a turn can
		// wait minutes behind the chat's own summary and learner requests
		// before its first byte (seen at 60s, load average 30).
		cfg.Limits = map[string]string{"model_idle_timeout": "5m", "turn_timeout": "10m"}
	}
	d := newDaemon(t, cfg)
	d.start()
	return d
}

// models is the daemon's GET /v1/models.
func (d *daemon) models(t *testing.T) []api.Model {
	t.Helper()
	var out api.Models
	getJSON(t, d.Client.BaseURL+"/v1/models", &out)
	return out.Models
}

// waitModel waits until the daemon's start-up refresh has read ref from its
// server (window_source is no longer "default") and returns it.
func (d *daemon) waitModel(t *testing.T, ref string) api.Model {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, m := range d.models(t) {
			if m.ID == ref && m.WindowSource != "default" {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("model %s never read from its server: %+v; %s", ref, d.models(t), d.logTail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// getJSON GETs url and decodes its JSON body into out.
func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	ctx, cancel := withTimeout(30 * time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// llamaNCtx is the window a llama-server runs with, by its own /props.
func llamaNCtx(t *testing.T, url string) int {
	t.Helper()
	var props struct {
		Settings struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	getJSON(t, url+"/props", &props)
	if props.Settings.NCtx <= 0 {
		t.Fatalf("%s/props names no n_ctx", url)
	}
	return props.Settings.NCtx
}

// ollamaLoaded is the context_length /api/ps reports for the loaded model,
// 0 when it is not loaded.
func ollamaLoaded(t *testing.T, url, model string) int {
	t.Helper()
	var ps struct {
		Models []struct {
			Name          string `json:"name"`
			ContextLength int    `json:"context_length"`
		} `json:"models"`
	}
	getJSON(t, url+"/api/ps", &ps)
	for _, m := range ps.Models {
		if m.Name == model || m.Name == model+":latest" {
			return m.ContextLength
		}
	}
	return 0
}

// realTurn is what one message's stream said.
type realTurn struct {
	res         api.TurnResult
	usages      []chat.Usage // one per model call, as the server counted
	healed      []chat.Healed
	compacted   int
	calls       []chat.ToolCall
	results     []chat.Message
	toolsLoaded []string
	problems    []chat.Problem
}

// realSendTimeout bounds one message's stream on a real server.
const realSendTimeout = 5 * time.Minute

// send posts content and collects its turn's events.
func (d *daemon) send(t *testing.T, chatID, content string) realTurn {
	t.Helper()
	ctx, cancel := withTimeout(realSendTimeout)
	defer cancel()
	return d.sendCtx(ctx, t, chatID, content)
}

func (d *daemon) sendCtx(ctx context.Context, t *testing.T, chatID, content string) realTurn {
	t.Helper()
	var rt realTurn
	decode := func(ev api.Event, v any) {
		if err := json.Unmarshal(ev.Data, v); err != nil {
			t.Errorf("event %s: %v: %s", ev.Type, err, ev.Data)
		}
	}
	res, err := d.Client.Send(ctx, chatID, api.SendMessageRequest{Content: content}, func(ev api.Event) {
		switch ev.Type {
		case chat.EventUsage:
			var u chat.Usage
			decode(ev, &u)
			rt.usages = append(rt.usages, u)
		case chat.EventHealed:
			var h chat.Healed
			decode(ev, &h)
			rt.healed = append(rt.healed, h)
		case chat.EventCompacted:
			rt.compacted++
		case chat.EventToolCall:
			var c chat.ToolCall
			decode(ev, &c)
			rt.calls = append(rt.calls, c)
		case chat.EventToolResult:
			var m chat.Message
			decode(ev, &m)
			rt.results = append(rt.results, m)
		case chat.EventToolsLoaded:
			var l struct {
				Names []string `json:"names"`
			}
			decode(ev, &l)
			rt.toolsLoaded = append(rt.toolsLoaded, l.Names...)
		case chat.EventTurnProblem:
			var p chat.Problem
			decode(ev, &p)
			rt.problems = append(rt.problems, p)
		}
	})
	if err != nil {
		t.Fatalf("send to %s: %v; %s", chatID, err, d.logTail(30))
	}
	rt.res = res
	return rt
}

// newChat makes a chat on ref.
func (d *daemon) newChat(t *testing.T, ref string) string {
	t.Helper()
	ctx, cancel := withTimeout(30 * time.Second)
	defer cancel()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{Model: ref})
	if err != nil {
		t.Fatalf("create chat on %s: %v", ref, err)
	}
	return c.ID
}

// answered fails the test unless the turn ended without a problem with an
// assistant's answer stored.
func answered(t *testing.T, what string, rt realTurn) {
	t.Helper()
	if rt.res.Problem != nil {
		t.Fatalf("%s: turn failed: %+v", what, *rt.res.Problem)
	}
	for _, m := range rt.res.Messages {
		if m.Role == api.RoleAssistant && len(m.ToolCalls) == 0 {
			return
		}
	}
	t.Fatalf("%s: no answer stored: %+v", what, rt.res.Messages)
}
