package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

func TestAModelThatCallsToolsInWordsGetsTheLoadedToolsInItsPrompt(t *testing.T) {
	var systems []string
	var nativeTools int
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		systems = append(systems, r.System)
		nativeTools += len(r.Tools)
		last := r.Messages[len(r.Messages)-1]
		switch {
		case strings.Contains(last.Content, "Tool result (remember)"):
			return testkit.Reply{Text: "Saved."}
		case strings.Contains(last.Content, "Tool result (find_tools)"):
			return testkit.Reply{Text: `Now I can.` + "\n" + `<tool_call>{"name": "remember", "arguments": {"text": "favourite tea is oolong"}}</tool_call>`}
		default:
			return testkit.Reply{Text: `<tool_call>{"name": "find_tools", "arguments": {"query": "store a memory"}}</tool_call>`}
		}
	}})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Providers[0].Models[0].Tools = "words"
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "Keep in mind: oolong is my tea."}, nil)
	if err != nil || res.Problem != nil {
		t.Fatal(err, res.Problem)
	}
	if nativeTools != 0 {
		t.Fatalf("a words model was sent %d native tools", nativeTools)
	}
	if len(systems) != 3 || !strings.Contains(systems[0], "- find_tools:") || strings.Contains(systems[0], "- remember:") {
		t.Fatalf("first prompt should list find_tools only; got %d requests; first:\n%s", len(systems), systems[0])
	}
	if !strings.Contains(systems[1], "- remember:") {
		t.Fatal("the plan was not read again after find_tools loaded remember")
	}
	var stored []api.ToolCall
	for _, m := range res.Messages {
		stored = append(stored, m.ToolCalls...)
	}
	if len(stored) != 2 || stored[1].Name != "remember" {
		t.Fatalf("stored calls = %+v", stored)
	}
	resp, err := http.Get(d.Server.URL + "/v1/memories")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var mem struct {
		Memories []struct{ Text, State string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&mem)
	if len(mem.Memories) != 1 || mem.Memories[0].Text != "favourite tea is oolong" || mem.Memories[0].State != "active" {
		t.Fatalf("memories = %+v", mem.Memories)
	}
}
