package oai_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/configs"
)

// TestPastTheByteRateNothingIsMade: at one byte a second (a burst of
// eight), a tenant's bucket refills too slowly for this test to see. Once
// it is spent, a new Chat Completions history or first message, a new response and a new
// conversation with items are each 429 rate_limit_exceeded with a
// Retry-After, in OpenAI's shape, and leave no chat behind (each would
// otherwise be an orphan counted against chats_per_tenant). Another
// tenant's bucket is its own.
func TestPastTheByteRateNothingIsMade(t *testing.T) {
	d, _, sdk := startChat(t, 32000, func(c *configs.Config) { c.Limits.IngestBytesPerSecond = 1 })
	ctx := context.Background()
	if _, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("12345678")}}); err != nil {
		t.Fatalf("the burst: %v", err)
	}
	refusals := map[string]error{}
	_, refusals["a new history"] = sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("earlier"), openai.AssistantMessage("yes"), openai.UserMessage("abcdefgh")}})
	_, refusals["a new chat's first message"] = sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("abcdefgh")}})
	_, refusals["a new response"] = sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("abcdefgh")}})
	_, refusals["a new conversation"] = sdk.Conversations.New(ctx, conversations.ConversationNewParams{
		Items: []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfMessage("abcdefgh", responses.EasyInputMessageRoleUser)}})
	for what, err := range refusals {
		var aerr *openai.Error
		if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusTooManyRequests || aerr.Code != "rate_limit_exceeded" || aerr.Type != "requests" {
			t.Fatalf("%s: %v, want 429 rate_limit_exceeded", what, err)
		}
		resp := aerr.Response
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("%s: Retry-After %q, want whole seconds ≥ 1", what, resp.Header.Get("Retry-After"))
		}
	}
	if cs, err := d.Hub.Chats(ctx, "a"); err != nil || len(cs) != 1 {
		t.Fatalf("tenant a has %d chats (%v), want the first alone", len(cs), err)
	}
	other := sdkFor(d, "tok-b")
	if _, err := other.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("12345678")}}); err != nil {
		t.Fatalf("tenant b refused by a's bytes: %v", err)
	}
}
