package oai_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentd/agentd/testkit"
)

// TestConversationWithItems: a conversation made with items is a chat
// whose transcript holds them; items added later and a response in the
// conversation follow them, and the provider sees them all in order.
// Another tenant cannot reach it; deleting it deletes the chat.
func TestConversationWithItems(t *testing.T) {
	d, fake, sdk := start(t, 32000, func(r testkit.Received) testkit.Reply { return testkit.Reply{Text: "noted"} })
	ctx := context.Background()
	user := func(text string) responses.ResponseInputItemUnionParam {
		return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser)
	}
	conv, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{Metadata: shared.Metadata{"topic": "trip"},
		Items: []responses.ResponseInputItemUnionParam{user("I am going to Lyon."), responses.ResponseInputItemParamOfMessage("Lovely.", responses.EasyInputMessageRoleAssistant)}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(conv.ID, "conv_") || !strings.Contains(conv.RawJSON(), `"topic":"trip"`) {
		t.Fatalf("conversation %+v", conv)
	}
	added, err := sdk.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{user("In May.")}})
	if err != nil || len(added.Data) != 1 {
		t.Fatalf("add items: %v %+v", err, added)
	}
	resp, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What should I pack?")}})
	if err != nil || resp.OutputText() != "noted" || resp.Conversation.ID != conv.ID {
		t.Fatalf("response in the conversation: %v %+v", err, resp)
	}
	reqs := fake.Requests()
	var sent []string
	for _, m := range reqs[len(reqs)-1].Messages {
		sent = append(sent, string(m.Role)+":"+m.Content)
	}
	// Consecutive user messages reach the provider as one.
	if want := "user:I am going to Lyon.|assistant:Lovely.|user:In May.\n\nWhat should I pack?"; !strings.Contains(strings.Join(sent, "|"), want) {
		t.Fatalf("the provider was sent %q, want %q in it", sent, want)
	}
	page, err := sdk.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil || len(page.Data) != 5 || page.Data[4].Role != "assistant" || !strings.Contains(page.Data[4].RawJSON(), `"noted"`) {
		t.Fatalf("items: %v %+v", err, page)
	}
	// Paging after an item goes on from it; after an id the list lacks is
	// refused, not the whole list again (a client would page forever).
	rest, err := sdk.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc, After: openai.String(page.Data[2].ID)})
	if err != nil || len(rest.Data) != 2 || rest.Data[0].ID != page.Data[3].ID {
		t.Fatalf("items after the third: %v %+v", err, rest)
	}
	var stale *openai.Error
	if _, err := sdk.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{After: openai.String("msg_zz")}); !errors.As(err, &stale) ||
		stale.StatusCode != http.StatusBadRequest || stale.Param != "after" {
		t.Fatalf("items after an id the list lacks: %v", err)
	}
	one, err := sdk.Conversations.Items.Get(ctx, conv.ID, page.Data[0].ID, conversations.ItemGetParams{})
	if err != nil || !strings.Contains(one.RawJSON(), "Lyon") {
		t.Fatalf("get item: %v %+v", err, one)
	}
	upd, err := sdk.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{Metadata: shared.Metadata{"topic": "packing"}})
	if err != nil || !strings.Contains(upd.RawJSON(), `"topic":"packing"`) {
		t.Fatalf("update: %v %+v", err, upd)
	}
	var aerr *openai.Error
	if _, err := sdk.Conversations.Items.Delete(ctx, conv.ID, page.Data[0].ID); !errors.As(err, &aerr) || aerr.StatusCode != http.StatusBadRequest {
		t.Fatalf("delete an item: %v", err)
	}
	other := sdkFor(d, "tok-b")
	if _, err := other.Conversations.Get(ctx, conv.ID); !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound {
		t.Fatalf("another tenant's conversation: %v", err)
	}
	if del, err := sdk.Conversations.Delete(ctx, conv.ID); err != nil || !del.Deleted {
		t.Fatalf("delete: %v %+v", err, del)
	}
	if _, err := sdk.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{}); !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound {
		t.Fatalf("a response of a deleted conversation: %v", err)
	}
	if cs, _ := d.Hub.Chats(ctx, "a"); len(cs) != 0 {
		t.Fatalf("%d chats after deleting the conversation", len(cs))
	}
}
