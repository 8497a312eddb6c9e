package hub

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/pgtest"
)

// TestATenantsRecordReadsAreItsOwn: the hub reads a tenant's records
// (its toolsets, attachments, memories, the OpenAI surfaces' records, its
// chats' own, the learner's read-until marks of its chats) as that tenant's (persistence.ReadsFor). They shared the lane of reads of no
// tenant's, so reads there holding all the connections that lane may take
// (here reads of a chat this node has not seen, held up by a lock) held
// up every tenant's records too.
func TestATenantsRecordReadsAreItsOwn(t *testing.T) {
	ctx := context.Background()
	const conns = 3
	dsn := pgtest.DSN(t)
	t.Setenv("AGENTD_PG_DSN", fmt.Sprintf("%s&pool_max_conns=%d", dsn, conns))
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 4096)
	cfg.Store = configs.Store{Kind: configs.StorePostgres, DSNEnv: "AGENTD_PG_DSN"}
	h := hubOn(t, cfg, func(s Store) Store { return s })
	if err := h.PutTenantRecord(ctx, "b", "note", "1", "hello"); err != nil {
		t.Fatal(err)
	}
	c, err := h.CreateChat(ctx, "b", api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.PutChatRecord(ctx, "b", c.ID, "response", "r1", "stored"); err != nil {
		t.Fatal(err)
	}

	locker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Close(ctx) }()
	// watch looks on from outside locker's transaction, which would see
	// one snapshot of the activity.
	watch, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Close(ctx) }()
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE messages IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	reads := make(chan error, conns-1)
	for range conns - 1 {
		go func() {
			_, err := h.store.Messages(ctx, "unseen", 1, 0)
			reads <- err
		}()
	}
	defer func() {
		_ = tx.Rollback(ctx)
		for range conns - 1 {
			if err := <-reads; err != nil {
				t.Errorf("a read of a chat not seen: %v", err)
			}
		}
	}()
	for deadline := time.Now().Add(time.Minute); ; runtime.Gosched() {
		var blocked int
		if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = current_setting('application_name') AND wait_event_type = 'Lock'`).Scan(&blocked); err != nil {
			t.Fatal(err)
		}
		if blocked == conns-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d reads held up by the lock after a minute", blocked, conns-1)
		}
	}

	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var note string
	if err := h.TenantRecord(rctx, "b", "note", "1", &note); err != nil || note != "hello" {
		t.Fatalf("tenant b's record while reads of no tenant's hold their lane: %q, %v", note, err)
	}
	var rec string
	if err := h.ChatRecord(rctx, "b", c.ID, "response", "r1", &rec); err != nil || rec != "stored" {
		t.Fatalf("a record of tenant b's chat while reads of no tenant's hold their lane: %q, %v", rec, err)
	}
	// What deleting the chat reads of its records.
	if keys, err := h.surfaceRecords(rctx, "b", c.ID); err != nil || len(keys) != 1 {
		t.Fatalf("the records of tenant b's chat, to delete it, while reads of no tenant's hold their lane: %v, %v", keys, err)
	}
	if _, err := h.Memories(rctx, "b", ""); err != nil {
		t.Fatalf("tenant b's memories while reads of no tenant's hold their lane: %v", err)
	}
	if _, err := h.MemoryRuns(rctx, "b"); err != nil {
		t.Fatalf("tenant b's learning runs while reads of no tenant's hold their lane: %v", err)
	}
	// The learner's read-until mark of tenant b's chat, read before it is
	// raised and to run past it.
	if err := h.memory.SetReadUntil(rctx, "b", c.ID, 3); err != nil {
		t.Fatalf("raise the read-until mark of tenant b's chat while reads of no tenant's hold their lane: %v", err)
	}
	if mark, err := h.memory.ReadUntil(rctx, "b", c.ID); err != nil || mark != 3 {
		t.Fatalf("the read-until mark of tenant b's chat while reads of no tenant's hold their lane: %d, %v", mark, err)
	}
}
