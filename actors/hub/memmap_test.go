package hub

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
)

// heldMemories holds every read of one tenant's memories (its memory map's
// build) until release is closed.
type heldMemories struct {
	Store
	kind    string
	once    sync.Once
	reading chan struct{} // closed at the first read
	release chan struct{}
}

func (s *heldMemories) Records(ctx context.Context, kind string, fn func(id string, decode func(v any) error) error) error {
	if kind == s.kind {
		s.once.Do(func() { close(s.reading) })
		<-s.release
	}
	return s.Store.Records(ctx, kind, fn)
}

// TestAMapBuildHoldsNoOtherTenant: while one tenant's memory map is built
// (its read held here), more of its chats than the sessions' dispatcher has
// workers ask what their model is sent, and another tenant's chat still
// answers. The build ran in the asking session's mailbox and the tenant's
// other sessions waited there for its lock: they took every worker, and no
// other tenant's chat ran until the build ended.
func TestAMapBuildHoldsNoOtherTenant(t *testing.T) {
	ctx := context.Background()
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768)
	metrics := newMetrics()
	db, err := openStore(ctx, cfg, zerolog.Nop(), true, metrics.storeDurable)
	if err != nil {
		t.Fatal(err)
	}
	held := &heldMemories{Store: db, kind: "memory/alice", reading: make(chan struct{}), release: make(chan struct{})}
	h, err := newOn(ctx, cfg, zerolog.Nop(), Options{InMemory: true, RefreshEvery: -1}, held, metrics)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	var release sync.Once
	open := func() { release.Do(func() { close(held.release) }) }
	t.Cleanup(open) // before Close

	const chats = sessionWorkers + 16
	ids := make([]string, chats)
	for i := range ids {
		c, err := h.CreateChat(ctx, "alice", api.CreateChatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = c.ID
	}
	bob, err := h.CreateChat(ctx, "bob", api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}

	answered := make(chan error, chats)
	for _, id := range ids {
		go func() {
			_, err := h.Context(ctx, "alice", id)
			answered <- err
		}()
	}
	<-held.reading
	// Every ask of alice's waits for the one build: in a mailbox on a
	// worker of the sessions' each (as it was), or on a worker of its own.
	deadline := time.Now().Add(time.Minute) // a liveness bound, not a speed check
	for h.sessions.Workers() < sessionWorkers && h.workers.Workers() < chats {
		if time.Now().After(deadline) {
			t.Fatal("alice's asks never all waited for her map")
		}
		time.Sleep(10 * time.Millisecond)
	}

	if _, err := h.Context(ctx, "bob", bob.ID); err != nil {
		t.Fatalf("bob's context while alice's map is built: %v", err)
	}
	select {
	case err := <-answered:
		t.Fatalf("alice's context answered (%v) while her map's build is held", err)
	default:
	}
	open()
	for range chats {
		if err := <-answered; err != nil {
			t.Fatalf("alice's context once her map is built: %v", err)
		}
	}
}
