package oai_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
)

// TestAResponsesItemsHaveTheirConversationsIDs: the items of responses in
// a conversation (a reasoning item, an answer, a function call, then the
// call's output and the next answer), streamed or not, have one id each
// wherever they appear: the response as answered and as stored, its
// input items and the conversation's items, where each is read, and
// refused deletion (not unknown), by that id. On both stores.
func TestAResponsesItemsHaveTheirConversationsIDs(t *testing.T) {
	daemontest.EachStore(t, configs.Config{}, func(t *testing.T, cfg configs.Config) {
		for _, stream := range []bool{false, true} {
			responsesItemIDs(t, cfg.Store, stream)
		}
	})
}

func responsesItemIDs(t *testing.T, store configs.Store, stream bool) {
	_, _, sdk := startOn(t, store, 32000, func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleTool {
			return testkit.Reply{Text: "It is " + last.Content + " in Lyon."}
		}
		return testkit.Reply{Thinking: "The weather first.", Text: "Let me look.",
			ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Lyon"}`}}}
	})
	ctx := context.Background()
	conv, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}
	params := func(input responses.ResponseInputParam) responses.ResponseNewParams {
		return responses.ResponseNewParams{Model: "fake/m", Tools: []responses.ToolUnionParam{tool},
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
			Reasoning:    responses.ReasoningParam{Summary: responses.ReasoningSummaryAuto},
			Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: input}}
	}
	// Two user messages are stored as one, and so are one item.
	first := created(t, sdk, params(responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Going to Lyon.", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfMessage("What is the weather?", responses.EasyInputMessageRoleUser)}), stream)
	if types := outputTypes(first); !slices.Equal(types, []string{"reasoning", "message", "function_call"}) {
		t.Fatalf("stream %v: the first response's output is %v", stream, types)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny")
	out.OfFunctionCallOutput.CallID = openai.String("call_1")
	second := created(t, sdk, params(responses.ResponseInputParam{out}), stream)
	if second.OutputText() != "It is sunny in Lyon." {
		t.Fatalf("stream %v: the second response's output is %+v", stream, second.Output)
	}

	listed := map[string]string{} // the conversation's items: id → type
	page, err := sdk.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc, Limit: openai.Int(100)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range page.Data {
		listed[it.ID] = it.Type
	}
	want := map[string]string{}
	for _, r := range []responses.Response{first, second} {
		stored, err := sdk.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(outputIDs(*stored), outputIDs(r)) {
			t.Fatalf("stream %v: response %s was answered with items %v, is stored with %v", stream, r.ID, outputIDs(r), outputIDs(*stored))
		}
		for _, it := range r.Output {
			want[it.ID] = it.Type
		}
		in, err := sdk.Responses.InputItems.List(ctx, r.ID, responses.InputItemListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(in.Data) != 1 {
			t.Fatalf("stream %v: response %s has %d input items, want one", stream, r.ID, len(in.Data))
		}
		want[in.Data[0].ID] = in.Data[0].Type
	}
	if len(want) != 6 || len(listed) != 6 {
		t.Fatalf("stream %v: the responses' items are %v, the conversation's %v: want six each", stream, want, listed)
	}
	for id, typ := range want {
		if listed[id] != typ {
			t.Fatalf("stream %v: the responses' item %s (%s) is not among the conversation's items %v", stream, id, typ, listed)
		}
		got, err := sdk.Conversations.Items.Get(ctx, conv.ID, id, conversations.ItemGetParams{})
		if err != nil || got.ID != id || got.Type != typ {
			t.Fatalf("stream %v: get item %s: %v %+v", stream, id, err, got)
		}
	}
	var refused, unknown *openai.Error
	if _, err := sdk.Conversations.Items.Delete(ctx, conv.ID, first.Output[1].ID); !errors.As(err, &refused) || refused.StatusCode != http.StatusBadRequest {
		t.Fatalf("stream %v: delete the response's message item: %v", stream, err)
	}
	if _, err := sdk.Conversations.Items.Delete(ctx, conv.ID, "msg_999"); !errors.As(err, &unknown) || unknown.StatusCode != http.StatusNotFound {
		t.Fatalf("stream %v: delete an item the conversation lacks: %v", stream, err)
	}
}

func outputTypes(r responses.Response) []string {
	var out []string
	for _, it := range r.Output {
		out = append(out, it.Type)
	}
	return out
}

func outputIDs(r responses.Response) []string {
	var out []string
	for _, it := range r.Output {
		out = append(out, it.ID)
	}
	return out
}
