package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentd/agentd/actors/session"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
)

// chatRecords is the persistence kind of a chat's surface records: what a
// surface over the hub (the OpenAI-compatible API's responses) keeps about
// one chat, deleted with it.
func chatRecords(chatID string) string { return "chatrec/" + chatID }

// PutChatRecord stores v, durably, as the record kind/id of a tenant's
// chat; DeleteChat deletes it with the chat.
func (h *Hub) PutChatRecord(ctx context.Context, tenant, chatID, kind, id string, v any) error {
	if err := h.checkChat(ctx, tenant, chatID); err != nil {
		return err
	}
	return h.store.PutRecord(ctx, chatRecords(chatID), kind+"/"+id, v)
}

// ChatRecord reads the record kind/id of a tenant's chat into v; a missing
// one (or chat) is ErrNotFound.
func (h *Hub) ChatRecord(ctx context.Context, tenant, chatID, kind, id string, v any) error {
	if err := h.checkChat(ctx, tenant, chatID); err != nil {
		return err
	}
	err := h.store.Record(persistence.ReadsFor(ctx, tenant), chatRecords(chatID), kind+"/"+id, v)
	if errors.Is(err, persistence.ErrNotFound) {
		return fmt.Errorf("%s %s: %w", kind, id, ErrNotFound)
	}
	return err
}

// DeleteChatRecord removes the record kind/id of a tenant's chat; a
// missing record is no error.
func (h *Hub) DeleteChatRecord(ctx context.Context, tenant, chatID, kind, id string) error {
	if err := h.checkChat(ctx, tenant, chatID); err != nil {
		return err
	}
	return h.store.DeleteRecord(ctx, chatRecords(chatID), kind+"/"+id)
}

// surfaceRecords names every surface record of a tenant's chat, for
// deleting it. A chat's records are read as its tenant's (as ChatRecord's
// are): their kind names no tenant, so the store read them as no
// tenant's, in the lane reads of chats it has not seen share.
func (h *Hub) surfaceRecords(ctx context.Context, tenant, chatID string) ([]persistence.RecordKey, error) {
	var out []persistence.RecordKey
	err := h.store.Records(persistence.ReadsFor(ctx, tenant), chatRecords(chatID), func(id string, _ func(any) error) error {
		out = append(out, persistence.RecordKey{Kind: chatRecords(chatID), ID: id})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("records of chat %s: %w", chatID, err)
	}
	return out, nil
}

// AddMessages stores messages in a tenant's chat between turns — a
// conversation's items an application adds, the earlier history a Chat
// Completions client brings (with its tool calls and results) — and
// answers them stored, with their seqs; ErrBusy while a turn runs. key,
// when set, is the idempotency key they were sent with: messages sent
// again under it are not stored (nor charged) again, and the answer is
// those the chat stored under it; under a key the chat stored with other
// messages, ErrKeyReused.
func (h *Hub) AddMessages(ctx context.Context, tenant, chatID, key string, msgs []api.Message) ([]api.Message, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := h.checkChat(ctx, tenant, chatID); err != nil {
		return nil, err
	}
	in, err := addedOf(msgs)
	if err != nil {
		return nil, err
	}
	size := messageBytes(in...)
	charge := func() error { return h.ingest.take(tenant, size) }
	res, err := h.ask(ctx, chatID, &session.AddMessages{Messages: in, Key: key, Charge: charge}, askTimeout)
	if errors.Is(err, persistence.ErrTooBig) {
		return nil, fmt.Errorf("%w: %w", ErrLimit, err)
	}
	if err != nil {
		return nil, err
	}
	switch res := res.(type) {
	case *session.Added:
		return wireMessages(res.Messages), nil
	case *session.Answered:
		return h.addedBefore(ctx, chatID, res.UserSeq, in)
	}
	return nil, fmt.Errorf("add messages: unexpected reply %T", res)
}

// addedOf converts messages added between turns (AddMessages,
// CreateChatWith) to stored ones: user, assistant or tool messages only.
func addedOf(msgs []api.Message) ([]chat.Message, error) {
	in := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case api.RoleUser, api.RoleAssistant, api.RoleTool:
		default:
			return nil, fmt.Errorf("%w: message %d has role %q; add user, assistant or tool messages", ErrInvalid, i, m.Role)
		}
		in[i] = chat.Message{Role: chat.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID, ToolName: m.ToolName, IsError: m.IsError, Origin: m.Origin}
		for _, c := range m.ToolCalls {
			in[i].ToolCalls = append(in[i].ToolCalls, chat.ToolCall(c))
		}
	}
	return in, nil
}

// NewRecord is a surface record a chat is created with (CreateChatWith),
// stored as PutChatRecord stores kind/id.
type NewRecord struct {
	Kind, ID string
	V        any
}

// CreateChatWith is CreateChat storing, in the same write, the chat's
// first messages (as AddMessages would, charged alike) and its surface
// records: a crash leaves the whole chat or none, never an empty one the
// client was not told of that counts against the tenant's chat limit.
func (h *Hub) CreateChatWith(ctx context.Context, tenant string, req api.CreateChatRequest, msgs []api.Message, recs ...NewRecord) (api.Chat, error) {
	return h.createChatWith(ctx, tenant, req, msgs, false, recs...)
}

// createChatWith is CreateChatWith, storing a new chat's marker
// (CreateNewChat) when marked.
func (h *Hub) createChatWith(ctx context.Context, tenant string, req api.CreateChatRequest, msgs []api.Message, marked bool, recs ...NewRecord) (api.Chat, error) {
	in, err := addedOf(msgs)
	if err != nil {
		return api.Chat{}, err
	}
	if err := h.ingest.take(tenant, messageBytes(in...)); err != nil {
		return api.Chat{}, err
	}
	c, err := h.createChat(ctx, tenant, newChat(req),
		func(ctx context.Context, c persistence.Chat) error {
			puts := make([]persistence.RecordPut, len(recs))
			for i, r := range recs {
				puts[i] = persistence.RecordPut{Kind: chatRecords(c.ID), ID: r.Kind + "/" + r.ID, V: r.V}
			}
			if marked {
				puts = append(puts, persistence.RecordPut{Kind: recordNewChat, ID: newChatKey(tenant, c.ID), V: newChatMarker{At: c.CreatedAt}})
			}
			return h.store.ImportChat(ctx, c, persistence.Snapshot{Model: c.Model, FirstKeptSeq: 1}, in, puts...)
		})
	if errors.Is(err, persistence.ErrTooBig) {
		return api.Chat{}, fmt.Errorf("%w: a message does not fit in one write; send it shorter", ErrLimit)
	}
	return wireChat(c, int64(len(in))), err
}

// addedBefore answers messages sent again under their idempotency key,
// which the chat stored from seq on: those it stored, when they are the
// same messages, else ErrKeyReused.
func (h *Hub) addedBefore(ctx context.Context, chatID string, seq int64, in []chat.Message) ([]api.Message, error) {
	stored, err := h.store.Messages(ctx, chatID, seq, seq+int64(len(in))-1)
	if err != nil {
		return nil, err
	}
	if len(stored) != len(in) {
		return nil, fmt.Errorf("%w: the chat stored other messages under it", ErrKeyReused)
	}
	for i := range in {
		if !chat.SameAdded(&stored[i], &in[i]) {
			return nil, fmt.Errorf("%w: the chat stored other messages under it", ErrKeyReused)
		}
	}
	return wireMessages(stored), nil
}

// tenantRecords is the persistence kind of a tenant's surface records that
// no one chat owns: an index a surface keeps (which chat paused on a Chat
// Completions tool call). They name chats, never grant them: whoever reads
// one resolves its chat inside the tenant.
func tenantRecords(tenant string) string { return "tenantrec/" + tenant }

// PutTenantRecord stores v, durably, as the record kind/id of tenant.
func (h *Hub) PutTenantRecord(ctx context.Context, tenant, kind, id string, v any) error {
	return h.store.PutRecord(ctx, tenantRecords(tenant), kind+"/"+id, v)
}

// TenantRecord reads the record kind/id of tenant into v; a missing one is
// ErrNotFound.
func (h *Hub) TenantRecord(ctx context.Context, tenant, kind, id string, v any) error {
	err := h.store.Record(persistence.ReadsFor(ctx, tenant), tenantRecords(tenant), kind+"/"+id, v)
	if errors.Is(err, persistence.ErrNotFound) {
		return fmt.Errorf("%s %s: %w", kind, id, ErrNotFound)
	}
	return err
}

// TenantRecords calls fn for every record of kind of tenant, in id order,
// with its id (without kind); fn decodes. An error fn returns ends the
// reading and is returned.
func (h *Hub) TenantRecords(ctx context.Context, tenant, kind string, fn func(id string, decode func(v any) error) error) error {
	return h.store.RecordsPrefix(persistence.ReadsFor(ctx, tenant), tenantRecords(tenant), kind+"/", func(id string, decode func(any) error) error {
		return fn(strings.TrimPrefix(id, kind+"/"), decode)
	})
}

// DeleteTenantRecord removes the record kind/id of tenant; a missing one
// is no error.
func (h *Hub) DeleteTenantRecord(ctx context.Context, tenant, kind, id string) error {
	return h.store.DeleteRecord(ctx, tenantRecords(tenant), kind+"/"+id)
}
