package oai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// longHistory is n messages of 1000 bytes, the person's and the
// assistant's in turn, ending with the person's.
func longHistory(n int) []any {
	msgs := make([]any, n)
	for i := range msgs {
		role := "user"
		if (n-1-i)%2 == 1 {
			role = "assistant"
		}
		msgs[i] = map[string]any{"role": role, "content": fmt.Sprintf("%05d ", i) + strings.Repeat("x", 994)}
	}
	return msgs
}

// TestANewChatsLongHistoryIsStoredWhole: a Chat Completions request that
// makes a new chat whose history is bigger than one store transaction
// takes (6 MB, under limits.max_history_bytes) is answered, and the chat
// holds that history whole, on either store: the chat and its history
// are one write (Store.ImportChat, in batches where it must).
func TestANewChatsLongHistoryIsStoredWhole(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 1 << 22, Script: talker})
	t.Cleanup(fake.Close)
	daemontest.EachStore(t, daemontest.Config(t.TempDir(), fake.URL(), 1<<22), func(t *testing.T, cfg configs.Config) {
		d := daemontest.Start(t, cfg, map[string]string{"tok-a": "a"})
		history := longHistory(6001)
		r := postCC(t, d, "tok-a", "", history)
		if r.status != http.StatusOK || r.chatID == "" {
			t.Fatalf("a new chat's long history: %d %+v", r.status, r.body)
		}
		stored, err := (&api.Client{BaseURL: d.Server.URL, Token: "tok-a"}).Transcript(context.Background(), r.chatID)
		if err != nil {
			t.Fatal(err)
		}
		if len(stored) != len(history)+1 {
			t.Fatalf("the chat holds %d messages; want the %d sent and the answer", len(stored), len(history))
		}
		for i, m := range history {
			if want := m.(map[string]any)["content"]; stored[i].Content != want {
				t.Fatalf("message %d is %.8q; want %.8q", i, stored[i].Content, want)
			}
		}
	})
}

// errDied is what a hub that stopped mid-request answers: the process is
// gone, and so is every write after.
var errDied = errors.New("the process died")

// dyingHub is a hub whose process dies after the request's first write:
// it makes that write, then refuses every write after, the deletion that
// would tidy up (dropNew) among them.
type dyingHub struct {
	*hub.Hub
	writes atomic.Int32
}

func (h *dyingHub) alive() bool { return h.writes.Add(1) == 1 }

func (h *dyingHub) CreateChat(ctx context.Context, tenant string, req api.CreateChatRequest) (api.Chat, error) {
	if !h.alive() {
		return api.Chat{}, errDied
	}
	return h.Hub.CreateChat(ctx, tenant, req)
}

func (h *dyingHub) CreateChatWith(ctx context.Context, tenant string, req api.CreateChatRequest, msgs []api.Message, recs ...hub.NewRecord) (api.Chat, error) {
	if !h.alive() {
		return api.Chat{}, errDied
	}
	return h.Hub.CreateChatWith(ctx, tenant, req, msgs, recs...)
}

func (h *dyingHub) CreateNewChat(ctx context.Context, tenant string, req api.CreateChatRequest, msgs []api.Message) (api.Chat, error) {
	if !h.alive() {
		return api.Chat{}, errDied
	}
	return h.Hub.CreateNewChat(ctx, tenant, req, msgs)
}

func (h *dyingHub) KeepNewChat(ctx context.Context, tenant, chatID string) error {
	if !h.alive() {
		return errDied
	}
	return h.Hub.KeepNewChat(ctx, tenant, chatID)
}

func (h *dyingHub) AddMessages(ctx context.Context, tenant, chatID, key string, msgs []api.Message) ([]api.Message, error) {
	if !h.alive() {
		return nil, errDied
	}
	return h.Hub.AddMessages(ctx, tenant, chatID, key, msgs)
}

func (h *dyingHub) SubmitUnpaused(ctx context.Context, tenant, id, turnID string, key hub.Key, req api.SendMessageRequest, joined func(string), queued func(bool)) (string, error) {
	if !h.alive() {
		return "", errDied
	}
	return h.Hub.SubmitUnpaused(ctx, tenant, id, turnID, key, req, joined, queued)
}

func (h *dyingHub) DeleteChat(ctx context.Context, tenant, id string) error {
	if !h.alive() {
		return errDied
	}
	return h.Hub.DeleteChat(ctx, tenant, id)
}

// TestANewChatCutAfterItsFirstWriteHoldsItsHistoryWhole: a request that
// makes a new chat with an earlier history, cut after its first write,
// leaves no chat holding part of that history: the chat and its history
// are that one write. The chat was written alone, then its history: a
// crash between left an empty chat no client knew of.
func TestANewChatCutAfterItsFirstWriteHoldsItsHistoryWhole(t *testing.T) {
	d, _, _ := startChat(t, 32000)
	cut := &dyingHub{Hub: d.Hub}
	var cfg configs.Config
	cfg.ApplyDefaults()
	surface := oai.New(cut, cfg, zerolog.Nop())
	history := []any{userMsg("one"), map[string]any{"role": "assistant", "content": "two"}, userMsg("three")}
	b, _ := json.Marshal(map[string]any{"model": "fake/m", "messages": history})
	w := httptest.NewRecorder()
	for _, rt := range surface.HistoryRoutes() {
		if rt.Pattern == "POST /v1/chat/completions" {
			rt.Handle(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(b)), "a")
		}
	}
	if w.Code == http.StatusOK {
		t.Fatalf("a request cut after its first write was answered: %s", w.Body)
	}
	chats, err := d.Hub.Chats(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chats {
		if c.Messages != 2 {
			t.Errorf("chat %s holds %d messages; want the history before the last message, whole (2)", c.ID, c.Messages)
		}
	}
}

// TestANewChatACrashLeftBeforeItsTurnIsDeletedAtStart: a Chat Completions
// or Responses request whose process dies once it has made its chat, before
// its turn stores the person's message, leaves a chat no client learnt of;
// the next start deletes it, so it does not count against
// limits.chats_per_tenant. It stayed, counted, forever. On either store.
func TestANewChatACrashLeftBeforeItsTurnIsDeletedAtStart(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: talker})
	t.Cleanup(fake.Close)
	bodies := map[string]string{
		"/v1/chat/completions": `{"model":"fake/m","messages":[{"role":"user","content":"hello"}]}`,
		"/v1/responses":        `{"model":"fake/m","input":"hello"}`,
	}
	for path, body := range bodies {
		t.Run(path, func(t *testing.T) {
			cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
			cfg.Limits.ChatsPerTenant = 1
			daemontest.EachStore(t, cfg, func(t *testing.T, cfg configs.Config) {
				cfg.DataDir = t.TempDir()
				d := daemontest.Start(t, cfg, map[string]string{"tok-a": "a"})
				surface := oai.New(&dyingHub{Hub: d.Hub}, cfg, zerolog.Nop())
				w := httptest.NewRecorder()
				for _, rt := range append(surface.Routes(), surface.HistoryRoutes()...) {
					if rt.Pattern == "POST "+path {
						rt.Handle(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)), "a")
					}
				}
				if w.Code == http.StatusOK {
					t.Fatalf("a request cut after its first write was answered: %s", w.Body)
				}
				if chats, err := d.Hub.Chats(context.Background(), "a"); err != nil || len(chats) != 1 {
					t.Fatalf("before the restart: chats %+v, %v; want the one the cut request made", chats, err)
				}
				d = d.Restart()
				if chats, err := d.Hub.Chats(context.Background(), "a"); err != nil || len(chats) != 0 {
					t.Fatalf("after the restart: chats %+v, %v; want the unkept new chat deleted", chats, err)
				}
				req, _ := http.NewRequest(http.MethodPost, d.Server.URL+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer tok-a")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b, _ := io.ReadAll(resp.Body)
					t.Fatalf("the next request, at a limit of one chat: %d %s", resp.StatusCode, b)
				}
				// A chat whose turn was accepted is the client's: a start keeps it.
				d = d.Restart()
				if chats, err := d.Hub.Chats(context.Background(), "a"); err != nil || len(chats) != 1 || chats[0].Messages != 2 {
					t.Fatalf("after the next restart: chats %+v, %v; want the answered chat kept", chats, err)
				}
			})
		})
	}
}
