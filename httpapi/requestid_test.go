package httpapi

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
)

// brokenHub fails the way a broken disk would; the HTTP layer sees only
// the Hub interface, so a test can stand in for the daemon.
type brokenHub struct{ Hub }

// Owner serves every chat here, as one node does.
func (brokenHub) Owner(context.Context, string, string) (string, error) { return "", nil }

func (brokenHub) Chat(context.Context, string, string) (api.Chat, error) {
	return api.Chat{}, errors.New("badger: value log /secret/path is corrupt")
}

// TenantRecords finds no record (the start's sweep of the pause index).
func (brokenHub) TenantRecords(context.Context, string, string, func(string, func(any) error) error) error {
	return nil
}

func (brokenHub) ChatsPage(context.Context, string, string, int) ([]api.Chat, bool, error) {
	panic("index out of range")
}

func serveBroken(t *testing.T, path, id string) (*httptest.ResponseRecorder, string) {
	t.Helper()
	var cfg configs.Config
	cfg.ApplyDefaults()
	var logs bytes.Buffer
	s := New(brokenHub{}, cfg, nil, zerolog.New(&logs))
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Host = "127.0.0.1"
	if id != "" {
		req.Header.Set(RequestIDHeader, id)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec, logs.String()
}

func TestA500HidesTheErrorAndLogsItUnderTheRequestID(t *testing.T) {
	// On OpenAI's routes the 500 is in OpenAI's shape, as their other errors.
	cases := map[string]struct{ path, logged, shape string }{
		"error":             {"/v1/chats/abc", "value log /secret/path is corrupt", `"kind":"internal"`},
		"panic":             {"/v1/chats", "index out of range", `"kind":"internal"`},
		"panic on OpenAI's": {"/v1/models", "nil pointer dereference", `"type":"server_error"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rec, logs := serveBroken(t, c.path, "req-42")
			if rec.Code != http.StatusInternalServerError || rec.Header().Get(RequestIDHeader) != "req-42" {
				t.Fatalf("status %d, request id %q", rec.Code, rec.Header().Get(RequestIDHeader))
			}
			body := rec.Body.String()
			if strings.Contains(body, "secret") || strings.Contains(body, "index") || !strings.Contains(body, "req-42") {
				t.Fatalf("the client was told %s; want a generic message with the request id", body)
			}
			if !strings.Contains(body, c.shape) {
				t.Fatalf("the client was told %s; want %s in it", body, c.shape)
			}
			if strings.Count(logs, c.logged) != 1 || !strings.Contains(logs, `"request_id":"req-42"`) {
				t.Fatalf("log %s: want the error once, with the request id", logs)
			}
			if strings.HasPrefix(name, "panic") && !strings.Contains(logs, "goroutine") {
				t.Fatalf("a panic is logged without its stack: %s", logs)
			}
		})
	}
}

func TestEveryAnswerCarriesARequestID(t *testing.T) {
	rec, _ := serveBroken(t, "/v1/no-such-route", "")
	if id := rec.Header().Get(RequestIDHeader); len(id) != 16 {
		t.Fatalf("request id %q, want a new 16-hex id", id)
	}
	rec, _ = serveBroken(t, "/v1/no-such-route", "bad id\nwith newline")
	if id := rec.Header().Get(RequestIDHeader); strings.Contains(id, " ") || id == "" {
		t.Fatalf("an unusable client id %q was kept", id)
	}
}
