package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentd/agentd/api"
)

// recordNewChat is the record kind of the markers of chats made for a
// request's turn (CreateNewChat), by id "<tenant>/<chat>": a marker still
// there once its request is gone tells a chat no client learnt of.
const recordNewChat = "newchat"

// newChatMarker is what a marker holds: when its chat was made.
type newChatMarker struct {
	At time.Time `json:"at"`
}

// newChatGrace is how long a new chat's request may take to have its turn
// accepted (the chat set up, its images read, the person's message
// stored) before a marker left is taken for its request's: in cluster mode
// another node's request may be making it; at the tenant's chat limit,
// this node's.
const newChatGrace = 10 * time.Minute

func newChatKey(tenant, chatID string) string { return tenant + "/" + chatID }

// CreateNewChat is CreateChatWith for a chat a request makes for its turn,
// the client to learn its id only from that turn's answer (Chat
// Completions, Responses). Until KeepNewChat, the chat carries a marker,
// written with it: a crash before the turn is accepted leaves a chat no
// client knows of, which the next start deletes (or, past newChatGrace, a
// tenant at its chat limit), so it does not count against
// limits.chats_per_tenant forever.
func (h *Hub) CreateNewChat(ctx context.Context, tenant string, req api.CreateChatRequest, msgs []api.Message) (api.Chat, error) {
	return h.createChatWith(ctx, tenant, req, msgs, true)
}

// KeepNewChat removes the marker of a chat CreateNewChat made, once its
// turn is accepted (the person's message stored).
func (h *Hub) KeepNewChat(ctx context.Context, tenant, chatID string) error {
	if err := h.store.DeleteRecord(ctx, recordNewChat, newChatKey(tenant, chatID)); err != nil {
		return fmt.Errorf("keep the new chat %s: %w", chatID, err)
	}
	return nil
}

// dropUnkept deletes the chats whose marker is older than cutoff, with
// their markers: every tenant's when tenant is "", else tenant's. It
// reports how many chats went.
func (h *Hub) dropUnkept(ctx context.Context, tenant string, cutoff time.Time) (int, error) {
	prefix := ""
	if tenant != "" {
		prefix = tenant + "/"
	}
	var ids []string
	err := h.store.RecordsPrefix(ctx, recordNewChat, prefix, func(id string, decode func(any) error) error {
		var m newChatMarker
		if err := decode(&m); err != nil {
			return err
		}
		if m.At.Before(cutoff) {
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read the new chats' markers: %w", err)
	}
	n := 0
	for _, id := range ids {
		t, chatID, _ := strings.Cut(id, "/")
		// The chat first: a crash between leaves the marker, and the next
		// sweep finds the chat gone.
		if err := h.DeleteChat(ctx, t, chatID); err == nil {
			n++
		} else if !errors.Is(err, ErrNotFound) {
			return n, fmt.Errorf("delete the unkept new chat %s: %w", chatID, err)
		}
		if err := h.store.DeleteRecord(ctx, recordNewChat, id); err != nil {
			return n, fmt.Errorf("delete the marker of the new chat %s: %w", chatID, err)
		}
	}
	return n, nil
}

// dropUnkeptAtStart deletes the new chats a request made but whose turn a
// crash kept from being accepted: every marker older than this start, on
// one node; only those past newChatGrace in cluster mode, where another
// node may be making one now.
func (h *Hub) dropUnkeptAtStart(ctx context.Context) {
	cutoff := time.Now()
	if h.cfg.Cluster.Enabled {
		cutoff = cutoff.Add(-newChatGrace)
	}
	n, err := h.dropUnkept(ctx, "", cutoff)
	if err != nil {
		h.log.Warn().Err(err).Msg("delete the new chats a crash left unkept")
	}
	if n > 0 {
		h.log.Info().Int("chats", n).Msg("deleted the new chats a crash left before their turn was accepted")
	}
}
