package hub

import (
	"context"
	"sync"
	"testing"
	"time"

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
	var held *heldMemories
	h := hubOn(t, testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768), func(db Store) Store {
		held = &heldMemories{Store: db, kind: "memory/alice", reading: make(chan struct{}), release: make(chan struct{})}
		return held
	})
	open := releaser(t, held.release)
	ids, bob := aliceAndBob(t, h, sessionWorkers+16)
	heldHoldsNoOtherTenant(t, h, ids, bob, func(id string) error {
		_, err := h.Context(context.Background(), "alice", id)
		return err
	}, open)
}

// releaser is the once-only close of release, also run as the test ends
// (before the hub's Close, which waits for what release holds).
func releaser(t *testing.T, release chan struct{}) func() {
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	return open
}

// aliceAndBob makes n chats of alice's and one of bob's.
func aliceAndBob(t *testing.T, h *Hub, n int) (alice []string, bob string) {
	t.Helper()
	for range n + 1 {
		tenant := "alice"
		if len(alice) == n {
			tenant = "bob"
		}
		c, err := h.CreateChat(context.Background(), tenant, api.CreateChatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if tenant == "bob" {
			return alice, c.ID
		}
		alice = append(alice, c.ID)
	}
	return alice, bob
}

// heldHoldsNoOtherTenant runs act on each of alice's chats ids (more than
// the sessions' dispatcher has workers), whose work is held until open is
// called: once every act waits (waited, or else: in a mailbox on a worker
// of the sessions' each or on a worker of its own), bob's chat still
// answers and no act has ended; once let go, every act ends well.
func heldHoldsNoOtherTenant(t *testing.T, h *Hub, ids []string, bob string, act func(id string) error, open func(), waited ...func() bool) {
	t.Helper()
	done := make(chan error, len(ids))
	for _, id := range ids {
		go func() { done <- act(id) }()
	}
	allWait := func() bool { return h.sessions.Workers() >= sessionWorkers || h.workers.Workers() >= len(ids) }
	if len(waited) > 0 {
		allWait = waited[0]
	}
	deadline := time.Now().Add(time.Minute) // a liveness bound, not a speed check
	for !allWait() {
		if time.Now().After(deadline) {
			t.Fatal("alice's held work never all waited")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := h.Context(context.Background(), "bob", bob); err != nil {
		t.Fatalf("bob's context while alice's work is held: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("alice's held work ended (%v) while it is held", err)
	default:
	}
	open()
	for range ids {
		if err := <-done; err != nil {
			t.Fatalf("alice's work once let go: %v", err)
		}
	}
}
