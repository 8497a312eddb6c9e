package persistence

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit/pgtest"
	"github.com/jackc/pgx/v5"
)

// twoNodes opens two stores on one Postgres schema: two agentd nodes.
func twoNodes(t *testing.T) (*Postgres, *Postgres) {
	t.Helper()
	dsn := pgtest.DSN(t)
	return openStore(t, dsn), openStore(t, dsn)
}

// openStore opens a store on dsn, closed when t ends.
func openStore(t *testing.T, dsn string) *Postgres {
	t.Helper()
	s, _, err := OpenPostgres(context.Background(), dsn, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func user(text string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: text} }

func TestAStaleOwnersWritesFailOnceAnotherNodeClaimsTheChat(t *testing.T) {
	ctx := context.Background()
	a, b := twoNodes(t)
	if err := a.CreateChat(ctx, Chat{ID: "c", Tenant: "t", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := a.Claim(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, "c", user("one")); err != nil {
		t.Fatal(err)
	}
	if err := b.Claim(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	_, err := a.Append(ctx, "c", user("stale"))
	if !errors.Is(err, ErrChatMoved) {
		t.Fatalf("the stale owner's append: %v; want ErrChatMoved", err)
	}
	_, err = appendWithSnapshot(ctx, a, "c", func(int64) Snapshot { return Snapshot{Summary: "stale"} }, nil, user("stale too"))
	if !errors.Is(err, ErrChatMoved) {
		t.Fatalf("the stale owner's append with its snapshot: %v; want ErrChatMoved", err)
	}
	if err := a.SaveSnapshot(ctx, "c", Snapshot{Summary: "stale"}); !errors.Is(err, ErrChatMoved) {
		t.Fatalf("the stale owner's snapshot: %v; want ErrChatMoved", err)
	}
	got, err := b.Append(ctx, "c", user("two"))
	if err != nil || got[0].Seq != 2 {
		t.Fatalf("the new owner's append: %v, %v; want seq 2", got, err)
	}
	if _, ok, _ := b.LoadSnapshot(ctx, "c"); ok {
		t.Fatal("the stale owner's snapshot landed")
	}
	msgs, err := b.Messages(ctx, "c", 1, 0)
	if err != nil || len(msgs) != 2 || msgs[0].Content != "one" || msgs[1].Content != "two" {
		t.Fatalf("log = %+v, %v; want one, two", msgs, err)
	}
	// Claiming back fences the other way; writes through a chat neither
	// store claimed (no session) are not fenced.
	if err := a.Claim(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, "c", user("stale")); !errors.Is(err, ErrChatMoved) {
		t.Fatalf("b after a claimed back: %v; want ErrChatMoved", err)
	}
	if _, err := a.Append(ctx, "c", user("three")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, "unclaimed", user("x")); err != nil {
		t.Fatal(err)
	}
	// A deleted chat forgets its owner: a stale store cannot write it.
	if err := a.DeleteChat(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, "c", user("after delete")); !errors.Is(err, ErrChatMoved) {
		t.Fatalf("b's append after the delete: %v; want ErrChatMoved", err)
	}
}

// The race a failover is: the old owner keeps appending while the new one
// claims and reads the log. What the new owner reads after its claim must
// be everything the old owner ever manages to write: none of the old
// owner's writes lands after the claim.
func TestWhatTheNewOwnerReadsIsAllTheOldOneEverWrites(t *testing.T) {
	ctx := context.Background()
	for round := range 5 {
		a, b := twoNodes(t)
		id := fmt.Sprintf("race-%d", round)
		if err := a.Claim(ctx, id); err != nil {
			t.Fatal(err)
		}
		acked := make(chan int, 1)
		go func() {
			n := 0
			for {
				if _, err := a.Append(ctx, id, user(fmt.Sprint(n))); err != nil {
					if !errors.Is(err, ErrChatMoved) {
						t.Errorf("old owner: %v", err)
					}
					acked <- n
					return
				}
				n++
			}
		}()
		// Let the old owner write some before the takeover: wait for its
		// rows, not for time.
		for deadline := time.Now().Add(time.Minute); ; {
			if n, err := b.LastSeq(ctx, id); err != nil || n >= 3 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err := b.Claim(ctx, id); err != nil {
			t.Fatal(err)
		}
		seen, err := b.Messages(ctx, id, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := <-acked
		if len(seen) != n {
			t.Fatalf("round %d: the old owner had %d appends acknowledged, the new owner read %d after its claim", round, n, len(seen))
		}
		got, err := b.Append(ctx, id, user("new owner"))
		if err != nil || got[0].Seq != int64(n+1) {
			t.Fatalf("round %d: the new owner's append: %v, %v; want seq %d", round, got, err, n+1)
		}
		all, err := b.Messages(ctx, id, 1, 0)
		if err != nil || len(all) != n+1 {
			t.Fatalf("round %d: log has %d, %v; want %d", round, len(all), err, n+1)
		}
		for i, m := range all[:n] {
			if m.Content != fmt.Sprint(i) {
				t.Fatalf("round %d: seq %d = %q, want %d in order, once each", round, m.Seq, m.Content, i)
			}
		}
	}
}

// A node paused mid-transaction holds its share of the owner row until the
// server's idle-in-transaction timeout cuts its connection; the node that
// claimed meanwhile goes on. The paused node's write then fails on the cut
// connection, and it must say the chat moved (the client asks the new
// owner), not that the store broke. Here the cut is pg_terminate_backend of
// a write held mid-transaction by a table lock. The re-read of the epoch
// that tells it apart runs on the writer's connection: on a reader's, it
// waited while tenants' reads held every one, and the write failed raw.
func TestAWriteCutWhileAnotherNodeClaimsFailsAsMoved(t *testing.T) {
	for _, tc := range []struct{ claimed, readsHoldAll bool }{{true, false}, {false, false}, {true, true}} {
		claimed := tc.claimed
		t.Run(fmt.Sprintf("claimed meanwhile=%v, reads hold every connection=%v", claimed, tc.readsHoldAll), func(t *testing.T) {
			ctx := context.Background()
			dsn := pgtest.DSN(t)
			a, b := openStore(t, dsn), openStore(t, dsn)
			if err := a.CreateChat(ctx, Chat{ID: "c", Tenant: "t", CreatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			if err := a.Claim(ctx, "c"); err != nil {
				t.Fatal(err)
			}
			if tc.readsHoldAll {
				holdEveryReader(t, a)
			}
			// blocker holds the lock; watch looks on from outside its
			// transaction (which would see one snapshot of the activity).
			blocker, watch := connect(t, dsn), connect(t, dsn)
			var blockerPID int
			if err := blocker.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&blockerPID); err != nil {
				t.Fatal(err)
			}
			lock, err := blocker.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = lock.Rollback(ctx) }()
			if _, err := lock.Exec(ctx, `LOCK TABLE messages IN EXCLUSIVE MODE`); err != nil {
				t.Fatal(err)
			}
			appended := make(chan error, 1)
			go func() {
				_, err := a.Append(ctx, "c", user("held"))
				appended <- err
			}()
			held := waitBlockedBy(t, watch, blockerPID)
			claimErr := make(chan error, 1)
			if claimed {
				go func() { claimErr <- b.Claim(ctx, "c") }()
				waitBlockedBy(t, watch, held)
			}
			if _, err := watch.Exec(ctx, `SELECT pg_terminate_backend($1)`, held); err != nil {
				t.Fatal(err)
			}
			err = <-appended
			if err == nil {
				t.Fatal("the cut write succeeded")
			}
			if errors.Is(err, ErrChatMoved) != claimed {
				t.Fatalf("the cut write: %v; want ErrChatMoved: %v", err, claimed)
			}
			if claimed {
				if err := <-claimErr; err != nil {
					t.Fatalf("the claim: %v", err)
				}
			}
			if err := lock.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if msgs, err := b.Messages(ctx, "c", 1, 0); err != nil || len(msgs) != 0 {
				t.Fatalf("log = %+v, %v; want it empty", msgs, err)
			}
		})
	}
}

// holdEveryReader holds every one of s's reading connections until the
// test ends, as tenants' slow reads can.
func holdEveryReader(t *testing.T, s *Postgres) {
	t.Helper()
	for range s.pool.Config().MaxConns {
		c, err := s.pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Release)
	}
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// waitBlockedBy waits until a backend waits on pid's locks and returns it.
func waitBlockedBy(t *testing.T, conn *pgx.Conn, pid int) int {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var waiting int
		err := conn.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)) LIMIT 1`, pid).Scan(&waiting)
		if err == nil {
			return waiting
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
	}
	t.Fatalf("no backend came to wait on backend %d's locks in a minute", pid)
	return 0
}

// TestAClaimIsOneRoundTrip: every session start claims its chat, so many
// chats woken at once pay it many times over; it took four round trips
// (BEGIN, the claim lock, the epoch, COMMIT), now one statement.
func TestAClaimIsOneRoundTrip(t *testing.T) {
	p, u, _ := pgtest.Silenced(t)
	s := openPooled(t, u.String(), 2, PostgresOptions{PingEvery: time.Hour})
	ctx := context.Background()
	if err := s.CreateChat(ctx, Chat{ID: "c", Tenant: "t", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// The pings' one connection, held, makes none meanwhile.
	ping, err := s.ppool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ping.Release()
	if err := s.Claim(ctx, "c"); err != nil { // prepares its statement
		t.Fatal(err)
	}
	before := p.RoundTrips()
	if err := s.Claim(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	// One, and one more if pgx pings the connection first (it does when
	// the connection was idle a second).
	if n := p.RoundTrips() - before; n > 2 {
		t.Fatalf("a claim made %d round trips; want one", n)
	}
}
