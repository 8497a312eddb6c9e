package oai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
)

// TestConversationWithItems: a conversation made with items is a chat
// whose transcript holds them; items added later and a response in the
// conversation follow them, and the provider sees them all in order.
// Another tenant cannot reach it; deleting it deletes the chat. On both
// stores.
func TestConversationWithItems(t *testing.T) {
	daemontest.EachStore(t, configs.Config{}, func(t *testing.T, cfg configs.Config) { conversationWithItems(t, cfg.Store) })
}

func conversationWithItems(t *testing.T, store configs.Store) {
	d, fake, sdk := startOn(t, store, 32000, func(r testkit.Received) testkit.Reply { return testkit.Reply{Text: "noted"} })
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
	// Another tenant gets, on every route, what an id no conversation has gets.
	other := sdkFor(d, "tok-b")
	unknown := "conv_" + hub.NewID()
	item := page.Data[0].ID
	for name, try := range map[string]func(id string) error{
		"get": func(id string) error { _, err := other.Conversations.Get(ctx, id); return err },
		"update": func(id string) error {
			_, err := other.Conversations.Update(ctx, id, conversations.ConversationUpdateParams{Metadata: shared.Metadata{"x": "y"}})
			return err
		},
		"delete": func(id string) error { _, err := other.Conversations.Delete(ctx, id); return err },
		"items": func(id string) error {
			_, err := other.Conversations.Items.List(ctx, id, conversations.ItemListParams{})
			return err
		},
		"add": func(id string) error {
			_, err := other.Conversations.Items.New(ctx, id, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{user("hi")}})
			return err
		},
		"item": func(id string) error {
			_, err := other.Conversations.Items.Get(ctx, id, item, conversations.ItemGetParams{})
			return err
		},
		"delete item": func(id string) error { _, err := other.Conversations.Items.Delete(ctx, id, item); return err },
		"respond in it": func(id string) error {
			_, err := other.Responses.New(ctx, responses.ResponseNewParams{Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(id)},
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
			return err
		},
	} {
		var foreign, none *openai.Error
		if !errors.As(try(conv.ID), &foreign) || !errors.As(try(unknown), &none) || foreign.StatusCode != http.StatusNotFound ||
			none.StatusCode != foreign.StatusCode || strings.ReplaceAll(none.RawJSON(), unknown, "ID") != strings.ReplaceAll(foreign.RawJSON(), conv.ID, "ID") {
			t.Fatalf("%s, another tenant's conversation: %+v; an unknown one: %+v", name, foreign, none)
		}
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

// TestConversationItemsPageAcrossTheTranscript: a conversation of 200
// messages, some of them an assistant message with two tool calls (three
// items) or calls alone (two), lists every item exactly once, in order,
// paged either way with after, whatever the page's size; so does one of
// 16 messages of 200 KB, whose transcript is read in pages cut by their
// bytes, and answered in pages of at most 1 MiB of text and one item more,
// whatever their limit. An item is read by its id; an after or an item id that names no
// item is refused.
func TestConversationItemsPageAcrossTheTranscript(t *testing.T) {
	d, _, sdk := start(t, 32000, func(r testkit.Received) testkit.Reply { return testkit.Reply{Text: "noted"} })
	ctx := context.Background()
	native := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	for _, tc := range []struct {
		name       string
		n, size    int
		limits     []int64
		checkItems bool
	}{{"200 short messages", 200, 10, []int64{7, 100}, true}, {"16 messages of 200 KB", 16, 200 << 10, []int64{3, 100}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var msgs []api.Message
			for i := 0; len(msgs) < tc.n; i++ {
				calls := []api.ToolCall{{ID: fmt.Sprintf("call_%d_a", i), Name: "look", Arguments: "{}"}, {ID: fmt.Sprintf("call_%d_b", i), Name: "look", Arguments: "{}"}}
				text := fmt.Sprintf("looking %d", i)
				if i%3 == 0 {
					text = "" // calls alone
				}
				out := strings.Repeat("r", tc.size)
				msgs = append(msgs, api.Message{Role: api.RoleUser, Content: fmt.Sprintf("question %d", i)},
					api.Message{Role: api.RoleAssistant, Content: text, ToolCalls: calls},
					api.Message{Role: api.RoleTool, ToolCallID: calls[0].ID, Content: out},
					api.Message{Role: api.RoleTool, ToolCallID: calls[1].ID, Content: out},
					api.Message{Role: api.RoleAssistant, Content: fmt.Sprintf("answer %d", i)})
			}
			c, err := native.Import(ctx, api.ChatExport{Format: api.ExportFormat, Messages: msgs[:tc.n]})
			if err != nil {
				t.Fatal(err)
			}
			stored, err := native.Transcript(ctx, c.ID)
			if err != nil || len(stored) != tc.n {
				t.Fatalf("the imported chat holds %d messages (%v)", len(stored), err)
			}
			var want []string // the items, oldest first, as their ids name them
			for _, m := range stored {
				switch {
				case m.Role == api.RoleTool:
					want = append(want, fmt.Sprintf("fco_%d", m.Seq))
				case m.Role == api.RoleUser || m.Content != "":
					want = append(want, fmt.Sprintf("msg_%d", m.Seq))
				}
				for i := range m.ToolCalls {
					want = append(want, fmt.Sprintf("fc_%d_%d", m.Seq, i))
				}
			}
			conv := "conv_" + c.ID
			for _, order := range []conversations.ItemListParamsOrder{conversations.ItemListParamsOrderAsc, conversations.ItemListParamsOrderDesc} {
				for _, limit := range tc.limits {
					got, pages := listAll(ctx, t, sdk, conv, order, limit, len(want))
					expect := slices.Clone(want)
					if order == conversations.ItemListParamsOrderDesc {
						slices.Reverse(expect)
					}
					if !slices.Equal(got, expect) {
						t.Fatalf("%s by %d: listed %d items, want %d (first difference at %d)", order, limit, len(got), len(expect), firstDifference(got, expect))
					}
					// Six tool results of 200 KB are 1.2 MB of text: two pages
					// at least, however many items a page may hold.
					if tc.size > 1<<20/8 && pages < 2 {
						t.Fatalf("%s by %d: %d items of %d bytes in %d pages", order, limit, len(got), tc.size, pages)
					}
				}
			}
			if !tc.checkItems {
				return
			}
			call, err := sdk.Conversations.Items.Get(ctx, conv, "fc_2_1", conversations.ItemGetParams{})
			if err != nil || !strings.Contains(call.RawJSON(), `"call_0_b"`) {
				t.Fatalf("get fc_2_1: %v %+v", err, call)
			}
			var aerr *openai.Error
			for _, id := range []string{"fc_2_2", "msg_3", "msg_999", "fco_0", "msg_-1", "zz"} {
				if _, err := sdk.Conversations.Items.Get(ctx, conv, id, conversations.ItemGetParams{}); !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound {
					t.Errorf("get %s: %v, want 404", id, err)
				}
			}
			for _, after := range []string{"msg_999", "msg_3", "fc_2_5"} {
				if _, err := sdk.Conversations.Items.List(ctx, conv, conversations.ItemListParams{After: openai.String(after)}); !errors.As(err, &aerr) || aerr.StatusCode != http.StatusBadRequest || aerr.Param != "after" {
					t.Errorf("after %s: %v, want 400", after, err)
				}
			}
		})
	}
}

// maxItem is more than the JSON of the largest item a test lists.
const maxItem = 256 << 10

// listAll pages through a conversation's items with after, limit at a
// time, and returns their ids and how many pages it read; a page with more
// after it must be full, or hold a page's bytes (1 MiB) of text.
func listAll(ctx context.Context, t *testing.T, sdk openai.Client, conv string, order conversations.ItemListParamsOrder, limit int64, most int) (got []string, pages int) {
	t.Helper()
	params := conversations.ItemListParams{Order: order, Limit: openai.Int(limit)}
	for ; ; pages++ {
		page, err := sdk.Conversations.Items.List(ctx, conv, params)
		if err != nil || pages > most {
			t.Fatalf("%s by %d: page %d: %v", order, limit, pages, err)
		}
		var raw struct {
			HasMore bool `json:"has_more"`
		}
		if err := json.Unmarshal([]byte(page.RawJSON()), &raw); err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Data {
			got = append(got, it.ID)
		}
		if !raw.HasMore {
			return got, pages + 1
		}
		// Short of its limit, a page must hold a page's bytes of text, and
		// at most one item more than that.
		if size := len(page.RawJSON()); int64(len(page.Data)) != limit && size < 1<<20 || size > 1<<20+maxItem {
			t.Fatalf("%s by %d: a page of %d items (%d bytes) with more after it", order, limit, len(page.Data), size)
		}
		params.After = openai.String(page.Data[len(page.Data)-1].ID)
	}
}

func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
