package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
)

// ExportHead returns what an export of a tenant's chat says before its
// messages: its setup (Chat.Messages is its last seq), its rolling summary,
// the time of the export. The caller reads the messages (Transcript) and
// the activity (Activity) page by page up to that seq, so that no chat is
// ever held whole in memory for a client.
func (h *Hub) ExportHead(ctx context.Context, tenant, id string) (api.ChatExport, error) {
	c, err := h.chatOf(ctx, tenant, id)
	if err != nil {
		return api.ChatExport{}, err
	}
	last, err := h.store.LastSeq(ctx, id)
	if err != nil {
		return api.ChatExport{}, err
	}
	snap, _, err := h.store.LoadSnapshot(ctx, id)
	if err != nil {
		return api.ChatExport{}, err
	}
	return api.ChatExport{Format: api.ExportFormat, ExportedAt: time.Now().UTC(), Chat: wireChat(c, last),
		Summary: snap.Summary, SummaryModel: snap.SummaryModel, FirstKeptSeq: snap.FirstKeptSeq,
		NoAutoRemember: c.NoAutoRemember, Shared: c.Shared}, nil
}

// Import stores an exported chat as a new chat of tenant, checked as a
// new chat is (model, limit, toolsets) and its messages as a log must be;
// it returns once every message is durable. Seqs are renumbered from 1.
func (h *Hub) Import(ctx context.Context, tenant string, exp api.ChatExport) (api.Chat, error) {
	if exp.Format != api.ExportFormat {
		return api.Chat{}, fmt.Errorf("%w: format %q: this agentd imports %q (what GET /v1/chats/{id}/export answers)", ErrInvalid, exp.Format, api.ExportFormat)
	}
	msgs, err := messagesOf(exp.Messages)
	if err != nil {
		return api.Chat{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := h.ingest.take(tenant, messageBytes(msgs...)+len(exp.Summary)); err != nil {
		return api.Chat{}, err
	}
	// The summary covers the messages before FirstKeptSeq, renumbered with them.
	snap := persistence.Snapshot{Summary: exp.Summary, SummaryModel: exp.SummaryModel, FirstKeptSeq: 1}
	if exp.FirstKeptSeq > 0 {
		kept := 0
		for _, m := range exp.Messages {
			if m.Seq < exp.FirstKeptSeq {
				kept++
			}
		}
		snap.FirstKeptSeq = int64(kept) + 1
	}
	if snap.FirstKeptSeq == 1 {
		snap.Summary, snap.SummaryModel = "", ""
	}
	// Outside text read before is still outside text: learning waits for an OK.
	snap.Untrusted = slices.ContainsFunc(msgs, func(m chat.Message) bool { return m.Untrusted })
	in := exp.Chat
	if in.Title == "" {
		if i := slices.IndexFunc(msgs, func(m chat.Message) bool { return m.Role == chat.RoleUser && m.Origin == chat.OriginPerson }); i >= 0 {
			in.Title = chat.TitleFrom(msgs[i].Content)
		}
	}
	c, err := h.createChat(ctx, tenant, persistence.Chat{Model: in.Model, Title: in.Title, NoAutoRemember: exp.NoAutoRemember, Shared: exp.Shared, Instructions: in.Instructions,
		Settings: settingsOf(in.Settings), Toolsets: in.Toolsets, Tools: specsOfWire(in.Tools)},
		func(ctx context.Context, c persistence.Chat) error {
			snap.Model = c.Model
			// Linked first, as a sent message's are, so no stored chat carries
			// an attachment whose use is not recorded.
			undo, err := h.linkImported(ctx, tenant, c.ID, msgs)
			if err != nil {
				return err
			}
			if err := h.store.ImportChat(ctx, c, snap, msgs); err != nil {
				undo()
				return err
			}
			return nil
		})
	if errors.Is(err, persistence.ErrTooBig) {
		return api.Chat{}, fmt.Errorf("%w: a message does not fit in one write; import the chat with it shorter", ErrLimit)
	}
	return wireChat(c, int64(len(msgs))), err
}

// messagesOf converts imported messages to stored ones, refusing a log no
// provider would take: an unknown role, or a tool result that answers no
// earlier call.
func messagesOf(ms []api.Message) ([]chat.Message, error) {
	out := make([]chat.Message, len(ms))
	calls := map[string]bool{}
	for i, m := range ms {
		switch m.Role {
		case api.RoleUser, api.RoleAssistant:
		case api.RoleTool:
			if !calls[m.ToolCallID] {
				return nil, fmt.Errorf("message %d (seq %d): tool result for call %q, which no earlier message made", i, m.Seq, m.ToolCallID)
			}
		default:
			return nil, fmt.Errorf("message %d (seq %d): role %q: use user, assistant or tool", i, m.Seq, m.Role)
		}
		out[i] = chat.Message{Role: chat.Role(m.Role), Content: m.Content, CreatedAt: m.CreatedAt, Thinking: m.Thinking,
			ThinkingSignature: m.ThinkingSignature, ToolCallID: m.ToolCallID, ToolName: m.ToolName, IsError: m.IsError,
			Untrusted: m.Untrusted, Origin: m.Origin, Partial: m.Partial, Problem: m.Problem, MaxOutputReached: m.MaxOutputReached, Refused: m.Refused, Model: m.Model}
		for _, c := range m.ToolCalls {
			calls[c.ID] = true
			out[i].ToolCalls = append(out[i].ToolCalls, chat.ToolCall(c))
		}
		for _, im := range m.Images {
			out[i].Images = append(out[i].Images, chat.Image(im))
		}
		for _, a := range m.Attachments {
			out[i].Attachments = append(out[i].Attachments, chat.Attachment(a))
		}
	}
	return out, nil
}
