package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/pgtest"
)

var errCrashed = errors.New("the daemon died here")

// crashingHub lets its first writes through and refuses every one after,
// as a daemon that died there would never make them (its clean-up
// neither).
type crashingHub struct {
	*hub.Hub
	left int
}

func (c *crashingHub) write() error {
	if c.left == 0 {
		return errCrashed
	}
	c.left--
	return nil
}

func (c *crashingHub) CreateChat(ctx context.Context, tenant string, req api.CreateChatRequest) (api.Chat, error) {
	if err := c.write(); err != nil {
		return api.Chat{}, err
	}
	return c.Hub.CreateChat(ctx, tenant, req)
}

func (c *crashingHub) CreateChatWith(ctx context.Context, tenant string, req api.CreateChatRequest, msgs []api.Message, recs ...hub.NewRecord) (api.Chat, error) {
	if err := c.write(); err != nil {
		return api.Chat{}, err
	}
	return c.Hub.CreateChatWith(ctx, tenant, req, msgs, recs...)
}

func (c *crashingHub) PutChatRecord(ctx context.Context, tenant, chatID, kind, id string, v any) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Hub.PutChatRecord(ctx, tenant, chatID, kind, id, v)
}

func (c *crashingHub) AddMessages(ctx context.Context, tenant, chatID, key string, msgs []api.Message) ([]api.Message, error) {
	if err := c.write(); err != nil {
		return nil, err
	}
	return c.Hub.AddMessages(ctx, tenant, chatID, key, msgs)
}

func (c *crashingHub) DeleteChat(ctx context.Context, tenant, id string) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Hub.DeleteChat(ctx, tenant, id)
}

// TestACrashLeavesAConversationWholeOrNone: creating a conversation with
// items, cut after each of the writes it makes, leaves either the whole
// conversation (its record and its items), acknowledged, or no chat at
// all. It was three writes (the chat, its record, its items): a crash
// after the first left an empty chat no client was told of, counted
// against the tenant's chat limit. On Badger and on Postgres.
func TestACrashLeavesAConversationWholeOrNone(t *testing.T) {
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768)
	pgtest.EachStore(t, cfg, func(t *testing.T, cfg configs.Config) {
		ctx := context.Background()
		h, err := hub.New(ctx, cfg, zerolog.Nop(), hub.Options{InMemory: true, RefreshEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close(context.Background()) })
		tenant := httpapi.DefaultTenant
		for writes := range 4 {
			s := httpapi.New(&crashingHub{Hub: h, left: writes}, cfg, nil, zerolog.Nop())
			req := httptest.NewRequest(http.MethodPost, "/v1/conversations", strings.NewReader(
				`{"metadata":{"topic":"trip"},"items":[{"role":"user","content":"I am going to Lyon."},{"role":"assistant","content":"Lovely."}]}`))
			req.Host = "127.0.0.1"
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			chats, err := h.Chats(ctx, tenant)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 0}[rec.Code == http.StatusOK]; len(chats) != want {
				t.Fatalf("cut after %d writes: %d, %d chats stored, want %d: %s", writes, rec.Code, len(chats), want, rec.Body)
			}
			for _, c := range chats {
				var meta map[string]any
				if err := h.ChatRecord(ctx, tenant, c.ID, "conversation", "meta", &meta); err != nil {
					t.Fatalf("cut after %d writes: the conversation's record: %v", writes, err)
				}
				items, err := h.Transcript(ctx, tenant, c.ID, 1, 0)
				if err != nil || len(items) != 2 {
					t.Fatalf("cut after %d writes: items %v %+v, want the 2 sent", writes, err, items)
				}
				if err := h.DeleteChat(ctx, tenant, c.ID); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
