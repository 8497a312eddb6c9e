package oai_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
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
