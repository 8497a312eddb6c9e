package httpapi_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestAToolCallCutByAgentdsRoomIsAskedOnceMoreWithMoreRoom: a model whose
// tool call agentd's answer room cuts (finish_reason length inside the
// arguments) is asked once more with more room; cut again, the turn ends
// with a problem saying so, where it was asked again with the same room
// up to the 100-round bound.
func TestAToolCallCutByAgentdsRoomIsAskedOnceMoreWithMoreRoom(t *testing.T) {
	var mu sync.Mutex
	var rooms []int
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		mu.Lock()
		rooms = append(rooms, r.MaxTokens)
		mu.Unlock()
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path": "a very long pa`}}, Finish: "length",
			Usage: &chat.Usage{InputTokens: 2000, OutputTokens: r.MaxTokens}}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	c := newChat(t, d, "")
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "read it"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(rooms) != 2 || rooms[1] <= rooms[0] {
		t.Fatalf("the model was asked %d times, with the answer rooms %v; want twice, the second with more room", len(rooms), rooms)
	}
	if res.Problem == nil || res.Problem.Kind != api.ProblemProvider {
		t.Fatalf("the turn ended with %+v; want a provider problem", res.Problem)
	}
	last := res.Messages[len(res.Messages)-1]
	if last.Role != api.RoleAssistant || len(last.ToolCalls) != 1 || !last.Partial || last.Problem != res.Problem.Message {
		t.Fatalf("the turn's last message: %+v", last)
	}
}
