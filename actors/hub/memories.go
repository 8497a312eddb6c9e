package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/attachments"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/memory"
	"github.com/agentd/agentd/persistence"
)

// ErrConflict: the request does not fit the record's state (e.g. approving
// an undone memory).
var ErrConflict = errors.New("conflict")

func memErr(err error) error {
	switch {
	case errors.Is(err, memory.ErrNotFound):
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	case errors.Is(err, memory.ErrState):
		return fmt.Errorf("%w: %v", ErrConflict, err)
	case errors.Is(err, memory.ErrEmpty):
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return err
}

// Memories lists a tenant's memories in a state ("" for all).
func (h *Hub) Memories(ctx context.Context, tenant, state string) ([]api.Memory, error) {
	switch state {
	case "", memory.StateActive, memory.StateWaiting, memory.StateUndone:
	default:
		return nil, fmt.Errorf("%w: state %q: use active, waiting or undone", ErrInvalid, state)
	}
	ms, err := h.memory.List(ctx, tenant, state)
	out := make([]api.Memory, len(ms))
	for i, m := range ms {
		out[i] = wireMemory(m)
	}
	return out, memErr(err)
}

// MemoryRuns lists a tenant's learning runs.
func (h *Hub) MemoryRuns(ctx context.Context, tenant string) ([]api.MemoryRun, error) {
	rs, err := h.memory.Runs(ctx, tenant)
	out := make([]api.MemoryRun, len(rs))
	for i, r := range rs {
		out[i] = wireRun(r)
	}
	return out, memErr(err)
}

// ApproveMemory makes a waiting memory active.
func (h *Hub) ApproveMemory(ctx context.Context, tenant, id string) (api.Memory, error) {
	m, err := h.memory.Approve(ctx, tenant, id)
	return wireMemory(m), memErr(err)
}

// EditMemory replaces the text of one of the tenant's memories.
func (h *Hub) EditMemory(ctx context.Context, tenant, id, text string) (api.Memory, error) {
	m, err := h.memory.Edit(ctx, tenant, id, text)
	return wireMemory(m), memErr(err)
}

// DeleteMemory forgets one of the tenant's memories.
func (h *Hub) DeleteMemory(ctx context.Context, tenant, id string) error {
	return memErr(h.memory.Delete(ctx, tenant, id))
}

// UndoRun undoes what a learning run added.
func (h *Hub) UndoRun(ctx context.Context, tenant, id string) (api.MemoryRun, error) {
	r, err := h.memory.UndoRun(ctx, tenant, id)
	return wireRun(r), memErr(err)
}

// attachmentOwner records which tenant uploaded an attachment.
const attachmentOwner = "attachment-owner"

// Attach stores an uploaded file for tenant and returns its reference.
func (h *Hub) Attach(ctx context.Context, tenant string, r io.Reader, name, mediaType string) (api.Attachment, error) {
	a, err := h.ownAttachment(ctx, tenant, func(q attachments.Quota) (chat.Attachment, error) {
		a, err := h.files.Put(ctx, r, name, mediaType, q)
		if err != nil {
			// %w twice: the API tells a body that stopped arriving (408) from a bad one.
			return a, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return a, nil
	})
	return api.Attachment(a), err
}

// attachPath stores a local file under an allowed directory.
func (h *Hub) attachPath(ctx context.Context, tenant, path string) (chat.Attachment, error) {
	return h.ownAttachment(ctx, tenant, func(q attachments.Quota) (chat.Attachment, error) {
		a, err := h.files.PutPath(ctx, path, h.cfg.Attachments.AllowedDirs, q)
		var refused *attachments.PathError
		if errors.As(err, &refused) {
			// The caller hears only the refusal; why it was refused (which may
			// say what exists outside the allowed dirs) is for the operator.
			h.logFor(ctx).Warn().Str("tenant", tenant).Str("path", refused.Path).AnErr("reason", refused.Detail).Msg("attach by path refused")
		}
		if err != nil {
			return a, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return a, nil
	})
}

// owners answers the attachment tools from the ownership records, so a
// model resolves ids only within its chat's tenant.
type owners struct{ store Store }

func (o owners) Owned(ctx context.Context, tenant, id string) (chat.Attachment, bool, error) {
	var a chat.Attachment
	err := o.store.Record(persistence.ReadsFor(ctx, tenant), attachmentOwner, tenant+"/"+id, &a)
	if errors.Is(err, persistence.ErrNotFound) {
		return a, false, nil
	}
	if err != nil {
		return a, false, fmt.Errorf("attachment %s of %s: %w", id, tenant, err)
	}
	return a, true, nil
}

// attachmentUse links a tenant's attachment to each chat it was sent to
// (kind per tenant, id attachment/chat), so deleting a chat can drop the
// ownership of the files no other chat of the tenant was sent.
func attachmentUse(tenant string) string { return "attachment-use/" + url.PathEscape(tenant) }

// attach resolves a message's attachments into reference notes: uploaded
// ids the tenant owns, and paths under the allowed directories; each is
// linked to the chat. Each hold is read again and linked under the
// tenant's lock, so the expiry of unsent uploads (expireUnsent) drops
// none between.
func (h *Hub) attach(ctx context.Context, tenant, chatID string, msg *chat.Message, req api.SendMessageRequest) error {
	for _, id := range req.AttachmentIDs {
		a, err := h.attachment(ctx, tenant, id)
		if err != nil {
			return err
		}
		msg.Attachments = append(msg.Attachments, a)
	}
	for _, p := range req.Paths {
		a, err := h.attachPath(ctx, tenant, p)
		if err != nil {
			return err
		}
		msg.Attachments = append(msg.Attachments, a)
	}
	unlock := h.totals.locks.lock(tenant)
	defer unlock()
	for _, a := range msg.Attachments {
		if _, err := h.attachment(ctx, tenant, a.ID); err != nil {
			return err
		}
	}
	for _, a := range msg.Attachments {
		if err := h.store.PutRecord(ctx, attachmentUse(tenant), a.ID+"/"+chatID, true); err != nil {
			return fmt.Errorf("link attachment %s to chat %s: %w", a.ID, chatID, err)
		}
	}
	return nil
}

// linkImported records which of the tenant's attachments an imported chat's
// messages carry, as attach does for a sent message, so that deleting the
// chat they were exported from leaves the tenant's hold on them. An id the
// tenant does not hold stays unlinked: importing a transcript never grants
// a file. It returns an undo for when the import is not stored after all.
func (h *Hub) linkImported(ctx context.Context, tenant, chatID string, msgs []chat.Message) (undo func(), err error) {
	unlock := h.totals.locks.lock(tenant) // as attach's
	defer unlock()
	var recs []persistence.RecordPut
	seen := map[string]bool{}
	for _, m := range msgs {
		for _, a := range m.Attachments {
			if seen[a.ID] {
				continue
			}
			seen[a.ID] = true
			if _, held, err := (owners{h.store}).Owned(ctx, tenant, a.ID); err != nil {
				return nil, err
			} else if held {
				recs = append(recs, persistence.RecordPut{Kind: attachmentUse(tenant), ID: a.ID + "/" + chatID, V: true})
			}
		}
	}
	if len(recs) == 0 {
		return func() {}, nil
	}
	if err := h.store.PutRecords(ctx, recs...); err != nil {
		return nil, fmt.Errorf("link attachments of imported chat %s: %w", chatID, err)
	}
	return func() {
		for _, r := range recs {
			// Best effort: a link left behind only keeps the tenant's hold.
			_ = h.store.DeleteRecord(context.WithoutCancel(ctx), r.Kind, r.ID)
		}
	}, nil
}

// attachmentRecords names, for deleting a chat, its attachment links and
// the ownership of each attachment no other chat of the tenant was sent,
// and the bytes those holds come to. An upload never sent to a chat stays
// the tenant's.
func (h *Hub) attachmentRecords(ctx context.Context, tenant, chatID string) ([]persistence.RecordKey, int64, error) {
	var mine []string
	elsewhere := map[string]bool{}
	err := h.store.Records(persistence.ReadsFor(ctx, tenant), attachmentUse(tenant), func(id string, _ func(any) error) error {
		att, ch, _ := strings.Cut(id, "/")
		if ch == chatID {
			mine = append(mine, att)
		} else {
			elsewhere[att] = true
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("attachments of chat %s: %w", chatID, err)
	}
	var out []persistence.RecordKey
	var dropped int64
	for _, att := range mine {
		out = append(out, persistence.RecordKey{Kind: attachmentUse(tenant), ID: att + "/" + chatID})
		if elsewhere[att] {
			continue
		}
		a, held, err := (owners{h.store}).Owned(ctx, tenant, att)
		if err != nil {
			return nil, 0, err
		}
		if held {
			out = append(out, persistence.RecordKey{Kind: attachmentOwner, ID: tenant + "/" + att})
			dropped += a.Size
		}
	}
	return out, dropped, nil
}

// attachment returns a tenant's uploaded attachment by id.
func (h *Hub) attachment(ctx context.Context, tenant, id string) (chat.Attachment, error) {
	var a chat.Attachment
	if err := h.store.Record(persistence.ReadsFor(ctx, tenant), attachmentOwner, tenant+"/"+id, &a); err != nil {
		return a, fmt.Errorf("attachment %s: %w", id, ErrNotFound)
	}
	return a, nil
}
