package memory

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/tools"
)

// TestAddPastTheLimitStoresNothing: new memories past MaxPerTenant are
// ErrFull and leave the store as it was (no run, no memory, no raised
// mark); a fact already known is still just skipped; undone memories do
// not count, waiting ones do; another tenant has its own count.
func TestAddPastTheLimitStoresNothing(t *testing.T) {
	ctx := context.Background()
	s := New(openDB(t), Options{MaxPerTenant: 3})
	run, _ := mustAdd(t, s, AddInput{Tenant: "t", ChatID: "c", Texts: []string{"Keeps bees.", "Owns a boat."}})
	mustAdd(t, s, AddInput{Tenant: "t", ChatID: "c", Texts: []string{"Speaks Basque."}, Wait: true})

	_, _, err := s.Add(ctx, AddInput{Tenant: "t", ChatID: "c", Texts: []string{"Hates jazz."}, ReadTo: 9})
	if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "3 kept, at most 3") {
		t.Fatalf("add past the limit: %v, want ErrFull saying 3 kept, at most 3", err)
	}
	if all, _ := s.List(ctx, "t", ""); len(all) != 3 {
		t.Fatalf("%d memories after a refused add, want 3: %v", len(all), texts(all))
	}
	if runs, _ := s.Runs(ctx, "t"); len(runs) != 2 {
		t.Fatalf("%d runs after a refused add, want 2", len(runs))
	}
	if mark, _ := s.ReadUntil(ctx, "t", "c"); mark != 0 {
		t.Fatalf("a refused add raised the mark to %d", mark)
	}
	if r, ms, err := s.Add(ctx, AddInput{Tenant: "t", Texts: []string{"keeps  BEES."}}); err != nil || r.ID != "" || len(ms) != 0 {
		t.Fatalf("a known fact at the limit: %+v, %v, %v; want nothing added and no error", r, ms, err)
	}
	if _, ms := mustAdd(t, s, AddInput{Tenant: "other", Texts: []string{"Hates jazz."}}); len(ms) != 1 {
		t.Fatalf("another tenant's add: %v", texts(ms))
	}

	if _, err := s.UndoRun(ctx, "t", run.ID); err != nil {
		t.Fatal(err)
	}
	if _, ms := mustAdd(t, s, AddInput{Tenant: "t", Texts: []string{"Hates jazz.", "Plays chess."}}); len(ms) != 2 {
		t.Fatalf("after an undo freed two places: added %v, want both", texts(ms))
	}
}

// TestRememberWhenFull: the model hears that nothing was stored and why.
func TestRememberWhenFull(t *testing.T) {
	s := New(openDB(t), Options{MaxPerTenant: 1})
	r := tools.NewRegistry()
	if err := RegisterTools(r, s); err != nil {
		t.Fatal(err)
	}
	alice := tools.WithCallInfo(context.Background(), tools.CallInfo{Tenant: "alice", ChatID: "c1", Seq: 7})
	if res := call(t, r, alice, "remember", RememberParams{Text: "Keeps bees."}); res.IsError {
		t.Fatalf("first remember: %s", res.Text)
	}
	res := call(t, r, alice, "remember", RememberParams{Text: "Owns a boat."})
	if !res.IsError || !strings.Contains(res.Text, "memory is full") || !strings.Contains(res.Text, "at most 1") {
		t.Fatalf("remember when full: %+v, want an error result saying the memory is full", res)
	}
	if all, _ := s.List(context.Background(), "alice", ""); len(all) != 1 {
		t.Fatalf("%d memories, want 1", len(all))
	}
}

// heldScan stalls reading one tenant's memories until released.
type heldScan struct {
	*persistence.Store
	kind    string
	entered chan struct{}
	release chan struct{}
}

func (h *heldScan) Records(ctx context.Context, kind string, fn func(id string, decode func(v any) error) error) error {
	if kind == h.kind {
		close(h.entered)
		<-h.release
	}
	return h.Store.Records(ctx, kind, fn)
}

// TestWritesOfOneTenantWaitNotOnAnother: while one tenant's Add scans its
// memories (held here), another tenant adds, approves, edits and raises a
// mark: one lock for every tenant made them all wait for the scan.
func TestWritesOfOneTenantWaitNotOnAnother(t *testing.T) {
	ctx := context.Background()
	held := &heldScan{Store: openDB(t), kind: memKind("slow"), entered: make(chan struct{}), release: make(chan struct{})}
	s := New(held, Options{})
	_, waiting := mustAdd(t, s, AddInput{Tenant: "fast", Texts: []string{"Speaks Basque."}, Wait: true})
	slow := make(chan error, 1)
	go func() {
		_, _, err := s.Add(ctx, AddInput{Tenant: "slow", Texts: []string{"Likes golf."}})
		slow <- err
	}()
	<-held.entered
	fast := make(chan error, 1)
	go func() {
		_, _, err := s.Add(ctx, AddInput{Tenant: "fast", ChatID: "c", Texts: []string{"Likes chess."}})
		if err == nil {
			_, err = s.Approve(ctx, "fast", waiting[0].ID)
		}
		if err == nil {
			_, err = s.Edit(ctx, "fast", waiting[0].ID, "Speaks Basque well.")
		}
		if err == nil {
			err = s.SetReadUntil(ctx, "fast", "c", 4)
		}
		fast <- err
	}()
	select {
	case err := <-fast:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a tenant's writes waited on another tenant's scan")
	}
	close(held.release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}
