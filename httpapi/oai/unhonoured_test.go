package oai_test

import (
	"context"
	"errors"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// pixel is a one-pixel PNG as a data URL.
const pixel = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

// TestUnhonouredFieldsAreRefused: a field whose promise agentd cannot keep
// is a 400 naming it, as Chat Completions' response_format is, not a 200
// that quietly breaks it: structured output asked through the Responses
// API's text.format (whose SDK helpers then fail to parse plain text as
// JSON), a stored prompt template OpenAI keeps (the answer would ignore
// it), the deprecated functions and function_call of Chat Completions (the
// model would never see the functions), and an image where agentd keeps
// text only (a function_call_output's, a developer message's), which it
// would drop unseen. Plain text asked for is answered,
// and nothing is left behind for a refusal: no chat is made.
func TestUnhonouredFieldsAreRefused(t *testing.T) {
	d, _, sdk := start(t, 32000, talker)
	ctx := context.Background()
	input := responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}
	respond := func(edit func(*responses.ResponseNewParams)) func() error {
		return func() error {
			p := responses.ResponseNewParams{Model: "fake/m", Input: input}
			edit(&p)
			_, err := sdk.Responses.New(ctx, p)
			return err
		}
	}
	complete := func(edit func(*openai.ChatCompletionNewParams)) func() error {
		return func() error {
			p := openai.ChatCompletionNewParams{Model: "fake/m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
			edit(&p)
			_, err := sdk.Chat.Completions.New(ctx, p)
			return err
		}
	}
	for _, tc := range []struct {
		name  string
		call  func() error
		param string
	}{
		{"response json_schema", respond(func(p *responses.ResponseNewParams) {
			p.Text.Format.OfJSONSchema = &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "answer", Schema: map[string]any{"type": "object"}, Strict: openai.Bool(true)}
		}), "text.format.type"},
		{"response json_object", respond(func(p *responses.ResponseNewParams) {
			p.Text.Format.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
		}), "text.format.type"},
		{"response prompt", respond(func(p *responses.ResponseNewParams) {
			p.Prompt = responses.ResponsePromptParam{ID: "pmpt_123"}
		}), "prompt"},
		{"function_call_output image", respond(func(p *responses.ResponseNewParams) {
			p.PreviousResponseID = openai.String("resp_x")
			p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String("call_1"),
					Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfResponseFunctionCallOutputItemArray: responses.ResponseFunctionCallOutputItemListParam{
						{OfInputText: &responses.ResponseInputTextContentParam{Text: "the chart:"}},
						{OfInputImage: &responses.ResponseInputImageContentParam{ImageURL: openai.String(pixel)}},
					}}}}}}
		}), "input[0].output[1].type"},
		{"developer message image", respond(func(p *responses.ResponseNewParams) {
			p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
					responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailAuto)}, responses.EasyInputMessageRoleDeveloper),
				responses.ResponseInputItemParamOfMessage("hi", responses.EasyInputMessageRoleUser)}}
			p.Input.OfInputItemList[0].OfMessage.Content.OfInputItemContentList[0].OfInputImage.ImageURL = openai.String(pixel)
		}), "input[0].content[0].type"},
		{"chat functions", complete(func(p *openai.ChatCompletionNewParams) {
			//lint:ignore SA1019 the deprecated field is what this case sends
			p.Functions = []openai.ChatCompletionNewParamsFunction{{Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object"}}}
		}), "functions"},
		{"chat function_call", complete(func(p *openai.ChatCompletionNewParams) {
			p.FunctionCall = openai.ChatCompletionNewParamsFunctionCallUnion{OfFunctionCallMode: openai.String("auto")}
		}), "function_call"},
	} {
		var aerr *openai.Error
		if err := tc.call(); !errors.As(err, &aerr) || aerr.StatusCode != 400 || aerr.Type != "invalid_request_error" || aerr.Param != tc.param {
			t.Errorf("%s: %v; want 400 invalid_request_error on param %q", tc.name, err, tc.param)
		}
	}
	if cs, err := d.Hub.Chats(ctx, "a"); err != nil || len(cs) != 0 {
		t.Fatalf("%d chats left after the refusals (%v)", len(cs), err)
	}
	r, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", Input: input,
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfText: &shared.ResponseFormatTextParam{}}}})
	if err != nil || r.Status != "completed" || r.OutputText() == "" {
		t.Fatalf("plain text asked for: %v, %+v", err, r)
	}
}
