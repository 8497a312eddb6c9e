package hub

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

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
			cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768)
			metrics := newMetrics()
			db, err := openStore(ctx, cfg, zerolog.Nop(), true, metrics.storeDurable)
			if err != nil {
				t.Fatal(err)
			}
			held := &heldWrites{Store: db, held: map[string]bool{}, release: make(chan struct{})}
			h, err := newOn(ctx, cfg, zerolog.Nop(), Options{InMemory: true, RefreshEvery: -1}, held, metrics)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = h.Close(context.Background()) })
			var release sync.Once
			open := func() { release.Do(func() { close(held.release) }) }
			t.Cleanup(open) // before Close

			const chats = sessionWorkers + 16
			ids := make([]string, chats)
			for i := range ids {
				c, err := h.CreateChat(ctx, "alice", api.CreateChatRequest{})
				if err != nil {
					t.Fatal(err)
				}
				ids[i], held.held[c.ID] = c.ID, true
			}
			bob, err := h.CreateChat(ctx, "bob", api.CreateChatRequest{})
			if err != nil {
				t.Fatal(err)
			}
			held.armed.Store(true)

			done := make(chan error, chats)
			for _, id := range ids {
				go func() { done <- write(h, id) }()
			}
			// Every write of alice's waits: in a mailbox on a worker of the
			// sessions' each (as it was), or on a worker of its own.
			deadline := time.Now().Add(time.Minute) // a liveness bound, not a speed check
			for h.sessions.Workers() < sessionWorkers && h.workers.Workers() < chats {
				if time.Now().After(deadline) {
					t.Fatal("alice's writes never all waited")
				}
				time.Sleep(10 * time.Millisecond)
			}

			if _, err := h.Context(ctx, "bob", bob.ID); err != nil {
				t.Fatalf("bob's context while alice's writes are held: %v", err)
			}
			select {
			case err := <-done:
				t.Fatalf("a write of alice's ended (%v) while it is held", err)
			default:
			}
			open()
			for range chats {
				if err := <-done; err != nil {
					t.Fatalf("alice's write once let go: %v", err)
				}
			}
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
