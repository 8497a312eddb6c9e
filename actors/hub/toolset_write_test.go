package hub

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/testkit"
)

// failingToolsets fails every write of a toolset's record while fail is set.
type failingToolsets struct {
	Store
	fail atomic.Bool
}

func (s *failingToolsets) PutRecord(ctx context.Context, kind, id string, v any) error {
	if kind == recordToolset && s.fail.Load() {
		return errors.New("the disk is full")
	}
	return s.Store.PutRecord(ctx, kind, id, v)
}

// mcpServer serves server over streamable HTTP and counts the sessions its
// clients ended (a DELETE each).
func mcpServer(t *testing.T, server *mcp.Server) (url string, ended *atomic.Int32) {
	ended = new(atomic.Int32)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			ended.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ended
}

// TestAToolsetWhoseWriteFailsStaysAsItWas: a new version of an MCP toolset
// whose record cannot be written changes nothing: the version in use keeps
// its tools and its open connection, and the new server's connection is
// ended. The old code replaced the toolset before writing it, then rebuilt
// the old one under the tenant's lock, which an MCP toolset never passed:
// the new version stayed registered while the store held the old.
func TestAToolsetWhoseWriteFailsStaysAsItWas(t *testing.T) {
	ctx := context.Background()
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768)
	cfg.Toolsets.WebhooksAllowPrivate = true
	var store *failingToolsets
	h := hubOn(t, cfg, func(db Store) Store {
		store = &failingToolsets{Store: db}
		return store
	})
	first, firstEnded := mcpServer(t, testkit.WideMCPServer(2, 10))
	second, secondEnded := mcpServer(t, testkit.WideMCPServer(3, 10))

	if _, err := h.PutToolset(ctx, "alice", Toolset{Name: "crm", Executor: Executor{Kind: ExecMCP, URL: first}}); err != nil {
		t.Fatal(err)
	}
	store.fail.Store(true)
	if _, err := h.PutToolset(ctx, "alice", Toolset{Name: "crm", Executor: Executor{Kind: ExecMCP, URL: second}}); err == nil {
		t.Fatal("a toolset whose record was not written was put")
	}
	store.fail.Store(false)
	live, ok := h.tools.Toolset("alice", "crm")
	if !ok || len(live) != 2 {
		t.Fatalf("the toolset in use after the failed write holds %d tools (%v), want the first server's 2", len(live), ok)
	}
	if _, err := live[0].Run(ctx, []byte(`{}`)); err != nil {
		t.Fatalf("the first server's tool after the failed write: %v", err)
	}
	if firstEnded.Load() != 0 || secondEnded.Load() != 1 {
		t.Fatalf("sessions ended: first server %d, second %d; want 0 and 1", firstEnded.Load(), secondEnded.Load())
	}
	stored, err := h.Toolset(ctx, "alice", "crm")
	if err != nil || stored.Executor.URL != first || stored.Version != 1 {
		t.Fatalf("the stored toolset %+v, %v: want the first version", stored, err)
	}
}
