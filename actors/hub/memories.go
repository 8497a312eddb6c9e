package hub

import (
	"context"
	"errors"
	"fmt"
	"io"

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
	}
	return err
}

// Memories lists a tenant's memories in a state ("" for all).
func (h *Hub) Memories(ctx context.Context, tenant, state string) ([]memory.Memory, error) {
	switch state {
	case "", memory.StateActive, memory.StateWaiting, memory.StateUndone:
	default:
		return nil, fmt.Errorf("%w: state %q: use active, waiting or undone", ErrInvalid, state)
	}
	ms, err := h.memory.List(ctx, tenant, state)
	return ms, memErr(err)
}

// MemoryRuns lists a tenant's learning runs.
func (h *Hub) MemoryRuns(ctx context.Context, tenant string) ([]memory.Run, error) {
	rs, err := h.memory.Runs(ctx, tenant)
	return rs, memErr(err)
}

// ApproveMemory makes a waiting memory active.
func (h *Hub) ApproveMemory(ctx context.Context, tenant, id string) (memory.Memory, error) {
	m, err := h.memory.Approve(ctx, tenant, id)
	return m, memErr(err)
}

// UndoRun undoes what a learning run added.
func (h *Hub) UndoRun(ctx context.Context, tenant, id string) (memory.Run, error) {
	r, err := h.memory.UndoRun(ctx, tenant, id)
	return r, memErr(err)
}

// attachmentOwner records which tenant uploaded an attachment.
const attachmentOwner = "attachment-owner"

// Attach stores an uploaded file for tenant and returns its reference.
func (h *Hub) Attach(ctx context.Context, tenant string, r io.Reader, name, mediaType string) (chat.Attachment, error) {
	a, err := h.files.Put(ctx, r, name, mediaType)
	if err != nil {
		return a, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return a, h.store.PutRecord(ctx, attachmentOwner, tenant+"/"+a.ID, a)
}

// AttachPath stores a local file under an allowed directory.
func (h *Hub) AttachPath(ctx context.Context, tenant, path string) (chat.Attachment, error) {
	a, err := h.files.PutPath(ctx, path, h.cfg.Attachments.AllowedDirs)
	var refused *attachments.PathError
	if errors.As(err, &refused) {
		// The caller hears only the refusal; why it was refused (which may
		// say what exists outside the allowed dirs) is for the operator.
		h.log.Warn().Str("tenant", tenant).Str("path", refused.Path).AnErr("reason", refused.Detail).Msg("attach by path refused")
	}
	if err != nil {
		return a, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return a, h.store.PutRecord(ctx, attachmentOwner, tenant+"/"+a.ID, a)
}

// owners answers the attachment tools from the ownership records, so a
// model resolves ids only within its chat's tenant.
type owners struct{ store *persistence.Store }

func (o owners) Owns(ctx context.Context, tenant, id string) (bool, error) {
	var a chat.Attachment
	err := o.store.Record(ctx, attachmentOwner, tenant+"/"+id, &a)
	if errors.Is(err, persistence.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Attachment returns a tenant's uploaded attachment by id.
func (h *Hub) Attachment(ctx context.Context, tenant, id string) (chat.Attachment, error) {
	var a chat.Attachment
	if err := h.store.Record(ctx, attachmentOwner, tenant+"/"+id, &a); err != nil {
		return a, fmt.Errorf("attachment %s: %w", id, ErrNotFound)
	}
	return a, nil
}
