package hub

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/pgtest"
)

// TestATenantAtItsLimitDropsOnlyNewChatsPastTheGrace: a tenant at its chat
// limit no longer counts a new chat left unkept for longer than
// newChatGrace (its marker still there: its turn was never accepted), which
// goes; one within the grace may be another node's request making it, and
// stays counted; a kept one is the client's. On Badger and on Postgres.
func TestATenantAtItsLimitDropsOnlyNewChatsPastTheGrace(t *testing.T) {
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768)
	cfg.Limits.ChatsPerTenant = 3
	pgtest.EachStore(t, cfg, func(t *testing.T, cfg configs.Config) {
		ctx, h := context.Background(), sweepHub(t, cfg)
		newChat := func() api.Chat {
			c, err := h.CreateNewChat(ctx, "a", api.CreateChatRequest{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		kept, stale, fresh := newChat(), newChat(), newChat()
		if err := h.KeepNewChat(ctx, "a", kept.ID); err != nil {
			t.Fatal(err)
		}
		old := newChatMarker{At: time.Now().Add(-newChatGrace - time.Minute)}
		if err := h.store.PutRecord(ctx, recordNewChat, newChatKey("a", stale.ID), old); err != nil {
			t.Fatal(err)
		}
		if _, err := h.CreateChat(ctx, "a", api.CreateChatRequest{}); err != nil {
			t.Fatalf("at the limit with a new chat unkept past the grace: %v", err)
		}
		if _, err := h.Chat(ctx, "a", stale.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("the chat unkept past the grace: %v; want it deleted", err)
		}
		for what, id := range map[string]string{"kept": kept.ID, "within the grace": fresh.ID} {
			if _, err := h.Chat(ctx, "a", id); err != nil {
				t.Errorf("the %s chat: %v; want it kept", what, err)
			}
		}
		if _, err := h.CreateChat(ctx, "a", api.CreateChatRequest{}); !errors.Is(err, ErrLimit) {
			t.Errorf("at the limit again, its new chat within the grace: %v; want ErrLimit", err)
		}
	})
}
