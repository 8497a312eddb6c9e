package hub

import (
	"context"
	"errors"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
)

// TestMessagesSentAgainUnderTheirKeyMustBeTheSame: messages added again
// under their idempotency key are answered from the chat only when they
// are the ones it stored; a tool result whose tool name or error flag
// differs is ErrKeyReused. Those two were not compared, so a result sent
// as a failure was answered as the success stored under the key.
func TestMessagesSentAgainUnderTheirKeyMustBeTheSame(t *testing.T) {
	ctx := context.Background()
	h := hubOn(t, testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768), func(s Store) Store { return s })
	c, err := h.CreateChat(ctx, "alice", api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := func(name string, failed bool) []api.Message {
		return []api.Message{
			{Role: api.RoleAssistant, ToolCalls: []api.ToolCall{{ID: "call_1", Name: "lookup", Arguments: "{}"}}},
			{Role: api.RoleTool, ToolCallID: "call_1", ToolName: name, Content: "42", IsError: failed},
		}
	}
	if _, err := h.AddMessages(ctx, "alice", c.ID, "k1", msgs("lookup", false)); err != nil {
		t.Fatal(err)
	}
	if got, err := h.AddMessages(ctx, "alice", c.ID, "k1", msgs("lookup", false)); err != nil || len(got) != 2 {
		t.Fatalf("the same messages again: %v %+v, want those stored", err, got)
	}
	for name, again := range map[string][]api.Message{"another tool name": msgs("search", false), "an error": msgs("lookup", true)} {
		if got, err := h.AddMessages(ctx, "alice", c.ID, "k1", again); !errors.Is(err, ErrKeyReused) {
			t.Errorf("sent again with %s: %v %+v, want ErrKeyReused", name, err, got)
		}
	}
}
