package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
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

// indexPanicHub fails a toolset's PUT as the hub does when indexing it
// panicked (toolindex.ReplaceScope's error, with the panic's stack).
type indexPanicHub struct{ brokenHub }

func (indexPanicHub) PutWireToolset(context.Context, string, string, api.PutToolsetRequest) (api.Toolset, error) {
	return api.Toolset{}, fmt.Errorf("index toolset crm: %w: indexing scope panicked: a bad tool\ngoroutine 7 [running]:", hub.ErrIndexFailed)
}

// TestAToolsetWhoseIndexingPanickedIsA500SayingSo: a toolset PUT whose
// indexing panicked (a bug) is a 500 that says indexing the toolset
// failed, with the request id; the panic and its stack are the log's. It
// was the generic "internal error".
func TestAToolsetWhoseIndexingPanickedIsA500SayingSo(t *testing.T) {
	var cfg configs.Config
	cfg.ApplyDefaults()
	var logs bytes.Buffer
	s := New(indexPanicHub{}, cfg, nil, zerolog.New(&logs))
	req := httptest.NewRequest(http.MethodPut, "/v1/toolsets/crm", strings.NewReader(`{"executor":{"kind":"client"},"tools":[{"name":"lookup_invoice"}]}`))
	req.Host = "127.0.0.1"
	req.Header.Set(RequestIDHeader, "req-42")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	var got api.Error
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
	}
	if rec.Code != http.StatusInternalServerError || got.Message != "indexing the toolset failed; the operator's log has it under request id req-42" {
		t.Fatalf("%d %+v; want 500 saying indexing the toolset failed, with the request id", rec.Code, got)
	}
	if !strings.Contains(logs.String(), "a bad tool") || !strings.Contains(logs.String(), "goroutine 7") || !strings.Contains(logs.String(), `"request_id":"req-42"`) {
		t.Fatalf("log %s: want the panic and its stack under the request id", logs.String())
	}
}
