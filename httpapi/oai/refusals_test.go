package oai_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"
)

// TestRefusalsNameTheFieldAtFault: a setting out of range is 400
// invalid_value naming the request's own field (max_tokens or
// max_completion_tokens, context_management for the compaction threshold),
// and text past limits.max_message_bytes is 413 too_large on every surface:
// a response's input, a function_call_output, a conversation's item. Nothing
// is left behind: no chat is made.
func TestRefusalsNameTheFieldAtFault(t *testing.T) {
	d, _, sdk := start(t, 32000, talker)
	ctx := context.Background()
	big := strings.Repeat("x", 300<<10) // past the default 256 KiB, within the 1 MiB body
	user := func(text string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "fake/m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}}
	}
	withTemp, withMaxTokens, withMaxCompletion := user("hi"), user("hi"), user("hi")
	withTemp.Temperature = openai.Float(5)
	withMaxTokens.MaxTokens = openai.Int(0)
	withMaxCompletion.MaxCompletionTokens = openai.Int(0)
	input := func(text string) responses.ResponseNewParamsInputUnion {
		return responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput(big)
	out.OfFunctionCallOutput.CallID = openai.String("call_1")
	output := responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}
	for _, tc := range []struct {
		name   string
		call   func() error
		status int
		code   string
		param  string
	}{
		{"chat temperature", func() error { _, err := sdk.Chat.Completions.New(ctx, withTemp); return err }, 400, "invalid_value", "temperature"},
		{"chat max_tokens", func() error { _, err := sdk.Chat.Completions.New(ctx, withMaxTokens); return err }, 400, "invalid_value", "max_tokens"},
		{"chat max_completion_tokens", func() error { _, err := sdk.Chat.Completions.New(ctx, withMaxCompletion); return err }, 400, "invalid_value", "max_completion_tokens"},
		{"response temperature", func() error {
			_, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", Input: input("hi"), Temperature: openai.Float(5)})
			return err
		}, 400, "invalid_value", "temperature"},
		{"response compact_threshold", func() error {
			_, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", Input: input("hi"),
				ContextManagement: []responses.ResponseNewParamsContextManagement{{Type: "compaction", CompactThreshold: openai.Int(500)}}})
			return err
		}, 400, "invalid_value", "context_management"},
		{"response input", func() error {
			_, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", Input: input(big)})
			return err
		}, 413, "too_large", "input"},
		{"function_call_output", func() error {
			_, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", Input: output, PreviousResponseID: openai.String("resp_x")})
			return err
		}, 413, "too_large", "input"},
		{"conversation item", func() error {
			_, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{
				responses.ResponseInputItemParamOfMessage(big, responses.EasyInputMessageRoleUser)}})
			return err
		}, 413, "too_large", "items[0].content"},
	} {
		var aerr *openai.Error
		if err := tc.call(); !errors.As(err, &aerr) || aerr.StatusCode != tc.status || aerr.Code != tc.code || aerr.Param != tc.param {
			t.Errorf("%s: %v; want %d %s on param %q", tc.name, err, tc.status, tc.code, tc.param)
		} else if strings.Contains(aerr.Message, "invalid request") {
			t.Errorf("%s: %q speaks of agentd's own error, not of the field", tc.name, aerr.Message)
		}
	}
	if cs, err := d.Hub.Chats(ctx, "a"); err != nil || len(cs) != 0 {
		t.Fatalf("%d chats left after the refusals (%v)", len(cs), err)
	}
}
