package oai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
)

// A conversation is an agentd chat: its id is conv_ + the chat's, its
// items are the chat's transcript, and its metadata a chat record.
const (
	kindConversation = "conversation"
	conversationMeta = "meta"
)

// conversationRecord is what a conversation keeps beside its chat.
type conversationRecord struct {
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

type conversation struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"` // "conversation"
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

// maxItemsAtOnce is how many items one request may add, as on OpenAI.
const maxItemsAtOnce = 20

type conversationRequest struct {
	Items    []inputItem       `json:"items"`
	Metadata map[string]string `json:"metadata"`
}

func (h *Handler) conversationRoutes() []Route {
	return []Route{
		{"POST /v1/conversations", h.createConversation, nil},
		{"GET /v1/conversations/{id}", h.getConversation, conversationChat},
		{"POST /v1/conversations/{id}", h.updateConversation, conversationChat},
		{"DELETE /v1/conversations/{id}", h.deleteConversation, conversationChat},
		{"GET /v1/conversations/{id}/items", h.listItems, conversationChat},
		{"POST /v1/conversations/{id}/items", h.addItems, conversationChat},
		{"GET /v1/conversations/{id}/items/{item_id}", h.getItem, conversationChat},
		{"DELETE /v1/conversations/{id}/items/{item_id}", h.deleteItem, conversationChat},
	}
}

// messagesOf reads a conversation's new items: messages of the user or
// the assistant, in text, each at most most bytes.
func messagesOf(its []inputItem, most int) ([]api.Message, error) {
	if len(its) > maxItemsAtOnce {
		return nil, refuse("items", "%d items: add at most %d at a time", len(its), maxItemsAtOnce)
	}
	out := make([]api.Message, 0, len(its))
	for i, it := range its {
		param := fmt.Sprintf("items[%d]", i)
		if it.Type != itemMessage && !(it.Type == "" && it.Role != "") {
			return nil, refuse(param+".type", "item type %q: agentd adds message items to a conversation (function calls come from its responses)", it.Type)
		}
		if it.Role != "user" && it.Role != "assistant" {
			return nil, refuse(param+".role", "role %q: add user or assistant messages (instructions go with each response)", it.Role)
		}
		ps, err := parts(it.Content, param+".content")
		if err != nil {
			return nil, err
		}
		var text []string
		for _, p := range ps {
			if p.Type == "input_image" {
				return nil, refuse(param+".content", "images are added with a response's input, not as conversation items")
			}
			text = append(text, p.Text)
		}
		m := api.Message{Role: api.Role(it.Role), Content: strings.Join(text, "\n\n")}
		if len(m.Content) > most {
			return nil, tooLarge(param+".content", "the item's text is %d bytes; the limit is %d (limits.max_message_bytes)", len(m.Content), most)
		}
		out = append(out, m)
	}
	return out, nil
}

func (h *Handler) createConversation(w http.ResponseWriter, r *http.Request, tenant string) {
	var req conversationRequest
	if r.ContentLength != 0 && !decode(w, r, &req) {
		return
	}
	msgs, err := messagesOf(req.Items, h.cfg.Limits.MaxMessageBytes)
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	// One write, so a crash leaves no half-made conversation: an empty
	// chat no client knows of, counted against the tenant's chat limit.
	rec := conversationRecord{CreatedAt: unix(), Metadata: req.Metadata}
	c, err := h.hub.CreateChatWith(r.Context(), tenant, api.CreateChatRequest{}, msgs, hub.NewRecord{Kind: kindConversation, ID: conversationMeta, V: rec})
	if err != nil {
		WriteHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wireConversation(c.ID, rec))
}

func wireConversation(chatID string, rec conversationRecord) conversation {
	if rec.Metadata == nil {
		rec.Metadata = map[string]string{}
	}
	return conversation{ID: conversationID(chatID), Object: "conversation", CreatedAt: rec.CreatedAt, Metadata: rec.Metadata}
}

// conversationOfPath resolves the path's conversation inside tenant and
// reads its record (a chat made by a response has none: its created_at is
// the chat's).
func (h *Handler) conversationOfPath(ctx context.Context, tenant, id string) (string, conversationRecord, error) {
	var rec conversationRecord
	c, err := h.conversationChat(ctx, tenant, id)
	if err != nil {
		return "", rec, err
	}
	err = h.hub.ChatRecord(ctx, tenant, c.ID, kindConversation, conversationMeta, &rec)
	if errors.Is(err, hub.ErrNotFound) {
		rec, err = conversationRecord{CreatedAt: c.CreatedAt.Unix()}, nil
	}
	return c.ID, rec, err
}

// conversationChat is the chat of the path's conversation, inside tenant.
func (h *Handler) conversationChat(ctx context.Context, tenant, id string) (api.Chat, error) {
	gone := notFound("", fmt.Sprintf("Conversation with id '%s' not found.", clip(id, 100)))
	chatID, ok := chatOfConversation(id)
	if !ok {
		return api.Chat{}, gone
	}
	c, err := h.hub.Chat(ctx, tenant, chatID)
	if errors.Is(err, hub.ErrNotFound) {
		return c, gone
	}
	return c, err
}

func (h *Handler) getConversation(w http.ResponseWriter, r *http.Request, tenant string) {
	chatID, rec, err := h.conversationOfPath(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wireConversation(chatID, rec))
}

// updateConversation replaces the conversation's metadata.
func (h *Handler) updateConversation(w http.ResponseWriter, r *http.Request, tenant string) {
	var req struct {
		Metadata map[string]string `json:"metadata"`
	}
	if !decode(w, r, &req) {
		return
	}
	chatID, rec, err := h.conversationOfPath(r.Context(), tenant, r.PathValue("id"))
	if err == nil {
		rec.Metadata = req.Metadata
		err = h.hub.PutChatRecord(r.Context(), tenant, chatID, kindConversation, conversationMeta, rec)
	}
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wireConversation(chatID, rec))
}

// deleteConversation deletes its chat and everything stored under it.
func (h *Handler) deleteConversation(w http.ResponseWriter, r *http.Request, tenant string) {
	id := r.PathValue("id")
	chatID, _, err := h.conversationOfPath(r.Context(), tenant, id)
	if err == nil {
		err = h.hub.DeleteChat(r.Context(), tenant, chatID)
	}
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "conversation.deleted", "deleted": true})
}

// itemsPage is how many messages a conversation's items are read in at
// a time: a listing reads the pages its items are in, never the whole chat.
const itemsPage = 64

// An item's id names the stored message it is, so an item has one id
// wherever it appears: a response's output and input items, its stored
// copy and its conversation's items (docs/openai.md, "Item ids"). A
// message is msg_<seq>, its reasoning rs_<seq>, its nth tool call
// fc_<seq>_<n>, a tool result fco_<seq>.

func messageItemID(seq int64) string     { return "msg_" + strconv.FormatInt(seq, 10) }
func reasoningItemID(seq int64) string   { return "rs_" + strconv.FormatInt(seq, 10) }
func callItemID(seq int64, n int) string { return fmt.Sprintf("fc_%d_%d", seq, n) }
func resultItemID(seq int64) string      { return "fco_" + strconv.FormatInt(seq, 10) }

// itemSeq is the seq of the message whose item id names it: msg_<seq>,
// rs_<seq>, fc_<seq>_<n> or fco_<seq> (transcriptItems).
func itemSeq(id string) (int64, bool) {
	var rest string
	switch {
	case strings.HasPrefix(id, "msg_"):
		rest = id[len("msg_"):]
	case strings.HasPrefix(id, "rs_"):
		rest = id[len("rs_"):]
	case strings.HasPrefix(id, "fco_"):
		rest = id[len("fco_"):]
	case strings.HasPrefix(id, "fc_"):
		rest, _, _ = strings.Cut(id[len("fc_"):], "_")
	default:
		return 0, false
	}
	seq, err := strconv.ParseInt(rest, 10, 64)
	return seq, err == nil && seq > 0
}

// transcriptItems are messages as items: user and assistant messages,
// each assistant message's tool calls as function_calls, and tool results
// as function_call_outputs, with ids that name their seq. An assistant
// message the model reasoned for has its reasoning item first, its summary
// the stored reasoning, as a response that asked for summaries holds it
// (builder.endAnswer).
func transcriptItems(msgs []api.Message) []item {
	out := []item{}
	for _, m := range msgs {
		switch m.Role {
		case api.RoleUser:
			ps := []part{{Type: "input_text", Text: m.Content}}
			out = append(out, item{Type: itemMessage, ID: messageItemID(m.Seq), Status: statusCompleted, Role: "user", Content: &ps})
		case api.RoleAssistant:
			if m.Thinking != "" {
				out = append(out, item{Type: itemReasoning, ID: reasoningItemID(m.Seq), Status: messageStatus(m), Summary: &[]summaryPart{{Type: "summary_text", Text: m.Thinking}}})
			}
			if m.Content != "" {
				out = append(out, messageItem(messageItemID(m.Seq), messageStatus(m), outputText(m.Content)))
			}
			for i, c := range m.ToolCalls {
				out = append(out, item{Type: itemFunctionCall, ID: callItemID(m.Seq, i), Status: statusCompleted, CallID: c.ID, Name: c.Name, Arguments: &c.Arguments})
			}
		case api.RoleTool:
			out = append(out, item{Type: itemCallOutput, ID: resultItemID(m.Seq), Status: statusCompleted, CallID: m.ToolCallID, Output: &m.Content})
		}
	}
	return out
}

// listItems answers a page of a conversation's items, reading the
// transcript a bounded page of messages at a time (hub.TranscriptPage)
// from where the list starts (the seq its after names, else the first or
// the last message) until it holds one item more than a page answers
// (answered), or the transcript ends.
func (h *Handler) listItems(w http.ResponseWriter, r *http.Request, tenant string) {
	lp, ok := listParams(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	c, err := h.conversationChat(ctx, tenant, r.PathValue("id"))
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	chatID := c.ID
	start := int64(1)
	if lp.desc {
		start = c.Messages
	}
	if lp.after != "" {
		if start, ok = itemSeq(lp.after); !ok || start > c.Messages {
			lp.unknownAfter(w)
			return
		}
	}
	lo, hi := start, min(start+itemsPage-1, c.Messages)
	if lp.desc {
		lo, hi = max(start-itemsPage+1, 1), start
	}
	seen := lp.after == ""
	its := []item{}
	for answered(its, lp.limit) == len(its) && lo >= 1 && lo <= hi && hi <= c.Messages {
		msgs, err := h.hub.TranscriptPage(ctx, tenant, chatID, lo, hi)
		if err != nil {
			writePlanError(w, r, err)
			return
		}
		if n := len(msgs); n > 0 && msgs[n-1].Seq < hi {
			// The page stopped at its bound. Newest first, what is past
			// where it stopped comes first: read that again.
			if lp.desc {
				lo = msgs[n-1].Seq + 1
				continue
			}
			hi = msgs[n-1].Seq
		}
		page := transcriptItems(msgs)
		if lp.desc {
			slices.Reverse(page)
		}
		for _, it := range page {
			if seen {
				its = append(its, it)
			}
			seen = seen || it.ID == lp.after
		}
		if !seen {
			lp.unknownAfter(w)
			return
		}
		if lp.desc {
			lo, hi = max(lo-itemsPage, 1), lo-1
		} else {
			lo, hi = hi+1, min(hi+itemsPage, c.Messages)
		}
	}
	writePage(w, its, lp.limit)
}

// addItems stores new messages in the conversation between its responses;
// items sent again under their Idempotency-Key are answered as stored,
// not stored twice.
func (h *Handler) addItems(w http.ResponseWriter, r *http.Request, tenant string) {
	var req struct {
		Items []inputItem `json:"items"`
	}
	if !decode(w, r, &req) {
		return
	}
	msgs, err := messagesOf(req.Items, h.cfg.Limits.MaxMessageBytes)
	if err == nil && len(msgs) == 0 {
		err = refuse("items", "items is empty: send the messages to add")
	}
	chatID := ""
	if err == nil {
		chatID, _, err = h.conversationOfPath(r.Context(), tenant, r.PathValue("id"))
	}
	var stored []api.Message
	if err == nil {
		stored, err = h.hub.AddMessages(r.Context(), tenant, chatID, r.Header.Get(IdempotencyKeyHeader), msgs)
	}
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	its := transcriptItems(stored)
	page := map[string]any{"object": "list", "data": its, "has_more": false, "first_id": nil, "last_id": nil}
	if len(its) > 0 {
		page["first_id"], page["last_id"] = its[0].ID, its[len(its)-1].ID
	}
	writeJSON(w, http.StatusOK, page)
}

// getItem answers one item, read from the message its id names.
func (h *Handler) getItem(w http.ResponseWriter, r *http.Request, tenant string) {
	it, err := h.item(r.Context(), tenant, r.PathValue("id"), r.PathValue("item_id"))
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, it)
}

// item reads the item id of the path's conversation, inside tenant, from
// the message the id names.
func (h *Handler) item(ctx context.Context, tenant, conv, id string) (item, error) {
	chatID, _, err := h.conversationOfPath(ctx, tenant, conv)
	if err != nil {
		return item{}, err
	}
	if seq, ok := itemSeq(id); ok {
		msgs, err := h.hub.Transcript(ctx, tenant, chatID, seq, seq)
		if err != nil {
			return item{}, err
		}
		its := transcriptItems(msgs)
		if i := slices.IndexFunc(its, func(it item) bool { return it.ID == id }); i >= 0 {
			return its[i], nil
		}
	}
	return item{}, notFound("", fmt.Sprintf("Item with id '%s' not found.", clip(id, 100)))
}

// deleteItem is refused: agentd keeps a chat's log whole, since its
// summary, memories and healing are built from it. An id that names no
// item of the conversation is 404, as on getItem.
func (h *Handler) deleteItem(w http.ResponseWriter, r *http.Request, tenant string) {
	if _, err := h.item(r.Context(), tenant, r.PathValue("id"), r.PathValue("item_id")); err != nil {
		writePlanError(w, r, err)
		return
	}
	WriteError(w, http.StatusBadRequest, "unsupported", "item_id", "deleting a conversation item is not supported by agentd: it keeps a chat's log whole (its summary and memories are built from it); delete the conversation instead")
}
