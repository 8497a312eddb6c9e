package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// A model that sends megabytes of tool arguments gets a refusal that says
// why, the log keeps the arguments whole, and no later request carries them
// again: the model is sent their head and a note.
func TestOversizeToolArgumentsAreStoredButNotSentAgain(t *testing.T) {
	pad := strings.Repeat("x", 3<<20)
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == chat.RoleTool:
			return testkit.Reply{Text: "noted"}
		case strings.Contains(last.Content, "huge"):
			return testkit.Reply{ChunkRunes: 64 << 10, ToolCalls: []chat.ToolCall{{ID: "call_big", Name: "calculate",
				Arguments: fmt.Sprintf(`{"expression":"1+1","pad":%q}`, pad)}}}
		}
		return testkit.Reply{Text: "ok"}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"do something huge", "and now?"} {
		res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: text}, nil)
		if err != nil || res.Problem != nil {
			t.Fatalf("send %q: %v, problem %+v", text, err, res.Problem)
		}
	}
	reqs := fake.Requests()
	if len(reqs) < 3 {
		t.Fatalf("%d model requests, want the call, its result and the next turn", len(reqs))
	}
	for i, r := range reqs[1:] {
		if len(r.Raw) > 64<<10 {
			t.Errorf("request %d after the call is %d bytes: the arguments were sent again", i+2, len(r.Raw))
		}
		if !strings.Contains(string(r.Raw), "cut_arguments_head") {
			t.Errorf("request %d does not show the cut arguments' head", i+2)
		}
	}
	msgs, err := d.Client.Transcript(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	var stored, refusal bool
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			stored = stored || strings.Contains(tc.Arguments, pad)
		}
		if m.Role == api.RoleTool && m.IsError && strings.Contains(m.Content, "over the limit") {
			refusal = true
		}
	}
	if !stored || !refusal {
		t.Fatalf("arguments stored whole: %v; refusal says why: %v", stored, refusal)
	}
}
