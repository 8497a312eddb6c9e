package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestNodeOpenAIClient runs e2e/node/openai.mjs — the official openai npm
// package, pinned by its lock file — against the agentd binary and the
// OpenAI-style fake: a Responses chain, a conversation, a Chat Completions
// client re-sending its growing history, all streamed, an answer the client
// loses, which the SDK sends again by itself, and a Chat Completions answer
// cut by its provider, which the SDK must raise, and a model's reasoning on
// both surfaces. The script checks what the
// SDK sees; this test checks that no request the fake received was over its
// window, that the re-sent history stayed one chat holding each message
// once, and that the message whose answer was lost was stored and asked
// once. It skips without node, or before `npm ci`
// in e2e/node (.ci/run does both).
func TestNodeOpenAIClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the openai npm client is not tried")
	}
	dir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		t.Skip("the openai npm package is not installed: run `npm ci` in e2e/node")
	}
	const window, turns = 2048, 16
	b := newBrain(18)
	b.MaxDelay, b.FoldDelay, b.Words = 0, 0, 40
	fake := openaifake.New(openaifake.Options{Window: window, Script: b.Script})
	defer fake.Close()
	d := newDaemon(t, daemonConfig{FakeURL: fake.URL(), Window: window, Limits: map[string]string{"requests_per_second": "1000"}})
	d.start()

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "openai.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGENTD_BASE_URL="+d.Client.BaseURL+"/v1", "AGENTD_MODEL=fake/m", "TURNS="+strconv.Itoa(turns))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node openai.mjs: %v\n%s\nagentd: %s", err, stderr.String(), d.logTail(30))
	}
	var out struct {
		Response string `json:"response"`
		Lost     struct {
			Words    string `json:"words"`
			Response string `json:"response"`
		} `json:"lost"`
		Conversation    string `json:"conversation"`
		ChatCompletions struct {
			Chat     string `json:"chat"`
			Messages int    `json:"messages"`
		} `json:"chat_completions"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); err != nil {
		t.Fatalf("the script's line %q: %v", stdout.String(), err)
	}

	reqs := fake.Requests()
	asked := 0
	for i, r := range reqs {
		if r.InputTokens > window {
			t.Errorf("request %d to the fake holds %d tokens, over its window of %d", i, r.InputTokens, window)
		}
		if n := len(r.Messages); n > 0 && strings.HasSuffix(r.Messages[n-1].Content, out.Lost.Words) {
			asked++
		}
	}
	// The answer the client lost: the SDK's retry was answered from the
	// chat, which stored the message once, and the provider was asked once.
	if stored := storedTimes(ctx, t, d.Client, out.Lost.Words); stored != 1 || asked != 1 {
		t.Errorf("a message whose answer the client lost, sent again by the SDK: stored %d times, the provider asked %d times; want once each", stored, asked)
	}
	if b.summaries.Load() == 0 {
		t.Errorf("%d requests and none summarised: the histories never outgrew the window, so fitting them was not tried", len(reqs))
	}
	msgs, err := d.Client.Transcript(ctx, out.ChatCompletions.Chat)
	if err != nil {
		t.Fatalf("transcript of the Chat Completions chat %s: %v", out.ChatCompletions.Chat, err)
	}
	// The client sent a system message, then a person's message and kept
	// the answer each turn: agentd stored each of those once.
	if len(msgs) != 2*turns || out.ChatCompletions.Messages != 2*turns+1 {
		t.Errorf("the chat holds %d messages; the client's history had %d (one system): want %d stored", len(msgs), out.ChatCompletions.Messages, 2*turns)
	}
}

// storedTimes counts the messages of all the client's chats whose words are
// words.
func storedTimes(ctx context.Context, t *testing.T, c *api.Client, words string) int {
	t.Helper()
	n := 0
	for after := ""; ; {
		page, err := c.Chats(ctx, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range page.Chats {
			msgs, err := c.Transcript(ctx, ch.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				if m.Content == words {
					n++
				}
			}
		}
		if page.Next == "" {
			return n
		}
		after = page.Next
	}
}
