package oai_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/agentd/agentd/configs"
)

// TestChatCompletionsTooManyMessages: a history of 40,001 tiny messages,
// small in bytes, is over the default limits.max_history_messages: a 413
// naming messages in OpenAI's shape, and no chat is made for it (none
// counts against chats_per_tenant, none holds part of the history). A
// short history is then answered as ever.
func TestChatCompletionsTooManyMessages(t *testing.T) {
	d, _, sdk := startChat(t, 32000)
	ctx := context.Background()
	msgs := make([]openai.ChatCompletionMessageParamUnion, 0, 40_001)
	for range 20_000 {
		msgs = append(msgs, openai.UserMessage("u"), openai.AssistantMessage("a"))
	}
	msgs = append(msgs, openai.UserMessage("final"))
	_, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: msgs})
	var aerr *openai.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusRequestEntityTooLarge || aerr.Code != "too_large" || aerr.Param != "messages" || aerr.Type != "invalid_request_error" {
		t.Fatalf("40,001 messages: %v, want 413 too_large naming messages", err)
	}
	if cs, err := d.Hub.Chats(ctx, "a"); err != nil || len(cs) != 0 {
		t.Fatalf("the refused history left %d chats (%v)", len(cs), err)
	}
	if _, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: msgs[39_990:]}); err != nil {
		t.Fatalf("11 messages: %v", err)
	}
}

// TestChatCompletionsListsAreCountedBeforeTheyAreRead: each kind of list a
// history holds many tiny values in (messages, their tool calls and content
// parts, the tools), counted in all, is refused past
// limits.max_history_messages where it passes the bound, before anything
// is decoded (a message after the bound that could not be decoded does not
// change the answer), naming that kind; a history at the bounds is
// answered.
func TestChatCompletionsListsAreCountedBeforeTheyAreRead(t *testing.T) {
	const most = 5
	d, _, _ := startChat(t, 32000, func(c *configs.Config) { c.Limits.MaxHistoryMessages = most })
	calls := func(n int) any {
		var cs []any
		for i := range n {
			cs = append(cs, map[string]any{"id": fmt.Sprint("call_", i), "type": "function", "function": map[string]any{"name": "get_weather", "arguments": "{}"}})
		}
		return map[string]any{"role": "assistant", "content": nil, "tool_calls": cs}
	}
	parts := func(n int) any {
		var ps []any
		for range n {
			ps = append(ps, map[string]any{"type": "text", "text": "x"})
		}
		return map[string]any{"role": "user", "content": ps}
	}
	for _, c := range []struct {
		name  string
		msgs  []any
		param string
	}{
		{"one message past the bound, which could not be decoded", []any{userMsg("1"), userMsg("2"), userMsg("3"), userMsg("4"), userMsg("5"), map[string]any{"role": 5}}, "messages"},
		{"tool calls in one message", []any{userMsg("1"), calls(most + 1)}, "tool_calls"},
		{"tool calls in all", []any{userMsg("1"), calls(3), userMsg("2"), calls(3), userMsg("3")}, "tool_calls"},
		{"content parts", []any{parts(most + 1)}, "content"},
	} {
		r := postCC(t, d, "tok-a", "", c.msgs)
		if r.status != http.StatusRequestEntityTooLarge || r.body.Error.Param == nil || *r.body.Error.Param != c.param {
			t.Errorf("%s: %d %+v, want 413 naming %s", c.name, r.status, r.body.Error, c.param)
		}
	}
	if cs, err := d.Hub.Chats(context.Background(), "a"); err != nil || len(cs) != 0 {
		t.Fatalf("the refused histories left %d chats (%v)", len(cs), err)
	}
	if r := postCC(t, d, "tok-a", "", []any{userMsg("1"), userMsg("2"), userMsg("3"), userMsg("4"), parts(most)}); r.status != http.StatusOK {
		t.Fatalf("a history at the bounds: %d %+v", r.status, r.body)
	}
}
