package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/actors/toolindex"
	"github.com/agentd/agentd/chat"
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

// TestAToolsetWhoseIndexingFailsIsNotStored: a PUT whose toolset the tool
// index cannot index (toolindex.ReplaceScope fails, as it does when its
// indexing panics) is refused, and the store, the registry and the index
// keep the version put before. The old code stored and registered the
// toolset, then indexed it: the store held a version find_tools missed
// until a restart.
func TestAToolsetWhoseIndexingFailsIsNotStored(t *testing.T) {
	ctx := context.Background()
	h := hubOn(t, testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768), func(db Store) Store { return db })
	first := Toolset{Name: "crm", Executor: Executor{Kind: ExecClient}, Tools: []chat.ToolSpec{{Name: "lookup_invoice", Description: "Find an invoice by its number.", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	if _, err := h.PutToolset(ctx, "alice", first); err != nil {
		t.Fatal(err)
	}
	indexedFirst(t, h) // the index's first load is done: replaceScope is the test's now
	replaceScope = func(string, []toolindex.Tool) (*toolindex.Register, error) {
		return nil, fmt.Errorf("%w: indexing panicked: a bad tool", toolindex.ErrChangeFailed)
	}
	t.Cleanup(func() { replaceScope = toolindex.ReplaceScope })
	second := first
	second.Tools = []chat.ToolSpec{{Name: "move_pallet", Description: "Move a pallet in the warehouse.", Parameters: json.RawMessage(`{"type":"object"}`)}}
	if _, err := h.PutToolset(ctx, "alice", second); !errors.Is(err, toolindex.ErrChangeFailed) {
		t.Fatalf("a toolset that could not be indexed was put: %v", err)
	}
	replaceScope = toolindex.ReplaceScope
	stored, err := h.Toolset(ctx, "alice", "crm")
	if err != nil || stored.Version != 1 || len(stored.Tools) != 1 || stored.Tools[0].Name != "lookup_invoice" {
		t.Fatalf("the stored toolset %+v, %v: want the first version", stored, err)
	}
	if live, ok := h.tools.Toolset("alice", "crm"); !ok || len(live) != 1 || live[0].Name != "lookup_invoice" {
		t.Fatalf("the registered toolset %v (%v): want the first version", live, ok)
	}
	indexedFirst(t, h)
}

// indexedFirst fails t unless the tool index holds alice's toolset crm
// as its first version (lookup_invoice alone). The ask waits for the
// index's first load, which reads replaceScope.
func indexedFirst(t *testing.T, h *Hub) {
	t.Helper()
	scope := toolindex.ToolsetScope("alice", "crm")
	res, err := actors.Ask(context.Background(), h.system.Root, h.toolIndex, &toolindex.Get{ReqID: "g", Names: []string{"lookup_invoice", "move_pallet"}, Scopes: []string{scope}}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := res.(*toolindex.GetResult); !ok || len(g.Tools) != 1 || g.Tools[0].Name != "lookup_invoice" {
		t.Fatalf("the tool index holds %+v for the toolset, want the first version's lookup_invoice alone", res)
	}
}
