package hub

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/testkit"
)

// heldWrites holds, once armed, every message append and chat record
// update of the chats in held until release is closed.
type heldWrites struct {
	Store
	held    map[string]bool // filled before armed, read-only after
	armed   atomic.Bool
	release chan struct{}
}

func (s *heldWrites) hold(chatID string) {
	if s.armed.Load() && s.held[chatID] {
		<-s.release
	}
}

func (s *heldWrites) Append(ctx context.Context, chatID string, msgs ...chat.Message) ([]chat.Message, error) {
	s.hold(chatID)
	return s.Store.Append(ctx, chatID, msgs...)
}

func (s *heldWrites) UpdateChat(ctx context.Context, c persistence.Chat) error {
	s.hold(c.ID)
	return s.Store.UpdateChat(ctx, c)
}

// TestAChatsWritesHoldNoOtherTenant: while one tenant's chats store the
// messages an application adds, or a patch of their settings (the writes
// held here), more of them than the sessions' dispatcher has workers wait,
// and another tenant's chat still answers. Those writes ran in the
// sessions' mailboxes: each parked one of the shared workers, and no other
// tenant's chat ran until a write ended.
func TestAChatsWritesHoldNoOtherTenant(t *testing.T) {
	title := "renamed"
	for name, write := range map[string]func(h *Hub, id string) error{
		"add messages": func(h *Hub, id string) error {
			_, err := h.AddMessages(context.Background(), "alice", id, "", []api.Message{{Role: api.RoleUser, Content: "earlier words"}})
			return err
		},
		"patch": func(h *Hub, id string) error {
			return h.Patch(context.Background(), "alice", id, api.PatchChatRequest{Title: &title})
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var held *heldWrites
			h := hubOn(t, testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768), func(db Store) Store {
				held = &heldWrites{Store: db, held: map[string]bool{}, release: make(chan struct{})}
				return held
			})
			open := releaser(t, held.release)
			ids, bob := aliceAndBob(t, h, sessionWorkers+16)
			for _, id := range ids {
				held.held[id] = true
			}
			held.armed.Store(true)
			heldHoldsNoOtherTenant(t, h, ids, bob, func(id string) error { return write(h, id) }, open)
			for _, id := range ids[:3] {
				c, err := h.Chat(ctx, "alice", id)
				if err != nil {
					t.Fatal(err)
				}
				msgs, err := h.Transcript(ctx, "alice", id, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				if name == "patch" && c.Title != title || name == "add messages" && len(msgs) != 1 {
					t.Fatalf("chat %s after its write: title %q, %d messages", id, c.Title, len(msgs))
				}
			}
		})
	}
}
