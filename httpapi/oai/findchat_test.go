package oai

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
)

// failingHub cannot store a new chat's history, and records the chats
// it makes and deletes; the rest of Hub is not called.
type failingHub struct {
	Hub
	created, deleted []string
}

func (f *failingHub) CreateNewChat(context.Context, string, api.CreateChatRequest, []api.Message) (api.Chat, error) {
	return api.Chat{}, fmt.Errorf("%w: the history does not fit", hub.ErrLimit)
}

func (f *failingHub) CreateChat(_ context.Context, _ string, req api.CreateChatRequest) (api.Chat, error) {
	id := fmt.Sprintf("c%d", len(f.created)+1)
	f.created = append(f.created, id)
	return api.Chat{ID: id, Model: req.Model}, nil
}

func (f *failingHub) AddMessages(context.Context, string, string, string, []api.Message) ([]api.Message, error) {
	return nil, fmt.Errorf("%w: the history does not fit", hub.ErrLimit)
}

func (f *failingHub) DeleteChat(_ context.Context, _, id string) error {
	f.deleted = append(f.deleted, id)
	return nil
}

// TestANewChatWhoseHistoryFailsIsDeleted: a chat for a brought history
// that could not be stored is not left behind (made with its history in
// one write, it is never made), so no orphan holding part of it counts
// against chats_per_tenant, and a retry does not add another.
func TestANewChatWhoseHistoryFailsIsDeleted(t *testing.T) {
	f := &failingHub{}
	var cfg configs.Config
	cfg.ApplyDefaults()
	h := New(f, cfg, zerolog.Nop())
	body := `{"model":"fake/m","messages":[{"role":"user","content":"u"},{"role":"assistant","content":"a"},{"role":"user","content":"now?"}]}`
	for range 2 {
		w := httptest.NewRecorder()
		h.chatCompletions(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)), "t1")
		if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"limit"`) {
			t.Fatalf("answered %d %s, want the hub's 429 limit", w.Code, w.Body)
		}
	}
	if strings.Join(f.deleted, ",") != strings.Join(f.created, ",") {
		t.Fatalf("made chats %v, deleted %v: each must be deleted", f.created, f.deleted)
	}
}
