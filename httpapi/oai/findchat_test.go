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

// failingHub makes chats, fails to store any history in them, and
// records which chats are deleted; the rest of Hub is not called.
type failingHub struct {
	Hub
	created, deleted []string
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

// TestANewChatWhoseHistoryFailsIsDeleted: a chat made for a brought
// history it could not store is deleted before the error is answered, so
// no orphan holding part of it is left to count against chats_per_tenant,
// and a retry does not add another.
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
	if strings.Join(f.deleted, ",") != strings.Join(f.created, ",") || len(f.created) != 2 {
		t.Fatalf("made chats %v, deleted %v: each must be deleted", f.created, f.deleted)
	}
}
