package oai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
