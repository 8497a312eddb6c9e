package persistence

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit/pgtest"
)

func TestOpenPostgresSaysWhatIsWrongWithTheDSNOrTheServer(t *testing.T) {
	ctx := context.Background()
	_, _, err := OpenPostgres(ctx, "postgres://agentd:s3cret@127.0.0.1:notaport/db", PostgresOptions{})
	if err == nil || !strings.Contains(err.Error(), "postgres DSN") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a bad DSN: %v; want a DSN error that hides the password", err)
	}
	dsn, addr := pgtest.Unreachable(t)
	_, _, err = OpenPostgres(ctx, dsn, PostgresOptions{})
	if err == nil || !strings.Contains(err.Error(), "connect to postgres at "+addr+"/agentd") {
		t.Fatalf("an unreachable server: %v; want it named", err)
	}
}

func TestMigrationsApplyOnceAndAFailedOneChangesNothing(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s, applied, err := OpenPostgres(ctx, dsn, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if len(applied) == 0 || applied[0] != "0001_store.sql" {
		t.Fatalf("first open applied %v", applied)
	}
	s, applied, err = OpenPostgres(ctx, dsn, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sync string
	if err := s.pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&sync); err != nil || sync != "on" {
		t.Fatalf("synchronous_commit = %q, %v; the durability promise needs on", sync, err)
	}
	var idle string
	if err := s.pool.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&idle); err != nil || idle != idleInTxTimeout {
		t.Fatalf("idle_in_transaction_session_timeout = %q, %v; a paused node must not hold its chats' owner rows", idle, err)
	}
	_ = s.Close()
	if len(applied) != 0 {
		t.Fatalf("a second open applied %v again", applied)
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	ms, err := loadMigrations(fstest.MapFS{
		"migrations/0001_store.sql": {Data: []byte("SELECT 1")},
		"migrations/9001_good.sql":  {Data: []byte("CREATE TABLE added (x int)")},
		"migrations/9002_bad.sql":   {Data: []byte("ALTER TABLE no_such_table ADD COLUMN y int")},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = migrate(ctx, conn, ms)
	if err == nil || !strings.Contains(err.Error(), "apply migration 9002_bad.sql") {
		t.Fatalf("a failing migration: %v; want it named", err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM schema_migrations WHERE version > 9000`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("versions recorded after the failure: %d, %v", n, err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_name = 'added' AND table_schema = current_schema()`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the migration before the failed one landed: %d, %v", n, err)
	}
}

func TestMigrationNamesMustCarryAVersion(t *testing.T) {
	for _, fsys := range []fstest.MapFS{
		{"migrations/store.sql": {Data: []byte("SELECT 1")}},
		{"migrations/0001_a.sql": {Data: []byte("SELECT 1")}, "migrations/0001_b.sql": {Data: []byte("SELECT 1")}},
	} {
		if _, err := loadMigrations(fsys); err == nil {
			t.Errorf("%v loaded", fsys)
		}
	}
	ms, err := loadMigrations(migrations)
	if err != nil || len(ms) == 0 {
		t.Fatalf("the shipped migrations: %v, %v", ms, err)
	}
}

// TestReadsHoldingEveryConnectionHoldNoWrite: the committer, which every
// tenant's writes wait on, has a connection of its own. It took its
// batches' connections from the readers' pool, so one tenant's slow or many
// reads holding every connection of it stalled every tenant's writes, each
// failing at the batch's timeout, for as long as the reads went on.
func TestReadsHoldingEveryConnectionHoldNoWrite(t *testing.T) {
	ctx := context.Background()
	s, _, err := OpenPostgres(ctx, pgtest.DSN(t), PostgresOptions{BatchTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	holdEveryReader(t, s)
	if err := s.CreateChat(ctx, Chat{ID: "b1", Tenant: "b", CreatedAt: time.Now()}); err != nil {
		t.Fatalf("tenant b's write while every reading connection is held: %v", err)
	}
	if _, err := s.Append(ctx, "b1", chat.Message{Role: chat.RoleUser, Content: "hello"}); err != nil {
		t.Fatalf("tenant b's append while every reading connection is held: %v", err)
	}
}

// openPooled opens the test database dsn with conns reading connections.
func openPooled(t *testing.T, dsn string, conns int, o PostgresOptions) *Postgres {
	t.Helper()
	sep := "&"
	if !strings.Contains(dsn, "://") {
		sep = " "
	}
	s, _, err := OpenPostgres(context.Background(), dsn+sep+fmt.Sprintf("pool_max_conns=%d", conns), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// chatsOfTwoTenants creates chat a1 of tenant a and b1 of tenant b, with a
// message each.
func chatsOfTwoTenants(t *testing.T, s *Postgres) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []Chat{{ID: "a1", Tenant: "a"}, {ID: "b1", Tenant: "b"}} {
		c.CreatedAt = time.Now()
		if err := s.CreateChat(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, c.ID, chat.Message{Role: chat.RoleUser, Content: "hello"}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOneTenantsReadsLeaveAnotherAConnection: the reads of one tenant's
// chat, as many as the pool has connections and each held up in the
// server (here by a lock on the messages table; in use, a long export or
// many chats woken at once), held every reading connection, and another
// tenant's ownership check waited for one of them to end. A tenant now
// holds at most all but one while others read, and a check the hub makes
// for a tenant (ReadsFor) is that tenant's even before this node has seen
// the chat.
func TestOneTenantsReadsLeaveAnotherAConnection(t *testing.T) {
	ctx := context.Background()
	const conns = 4
	dsn := pgtest.DSN(t)
	open := func() *Postgres { return openPooled(t, dsn, conns, PostgresOptions{}) }
	s := open()
	chatsOfTwoTenants(t, s)
	watch := connect(t, dsn)

	// holdReads makes conns reads of chat a1 on s and returns once each is
	// held up in the server on a connection or waits for one in the store
	// (a barrier, not a clock); release lets them end and checks them.
	holdReads := func(t *testing.T, s *Postgres) (release func()) {
		locker, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := locker.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE messages IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		reads := make(chan error, conns)
		for range conns {
			go func() {
				_, err := s.Messages(ctx, "a1", 1, 0)
				reads <- err
			}()
		}
		release = func() {
			_ = tx.Rollback(ctx)
			for range conns {
				if err := <-reads; err != nil {
					t.Errorf("tenant a's read: %v", err)
				}
			}
			_ = locker.Close(ctx)
		}
		for {
			var blocked int
			if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE application_name = current_setting('application_name') AND wait_event_type = 'Lock'`).Scan(&blocked); err != nil {
				release()
				t.Fatal(err)
			}
			if _, waiting := s.reads.Counts(); blocked+waiting == conns {
				return release
			}
			runtime.Gosched()
		}
	}
	check := func(t *testing.T, s *Postgres, ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if tenant, err := s.ChatTenant(ctx, "b1"); err != nil || tenant != "b" {
			t.Fatalf("tenant b's ownership check while a's reads are held up: %q, %v; want b", tenant, err)
		}
	}

	t.Run("chats seen", func(t *testing.T) {
		defer holdReads(t, s)()
		check(t, s, ctx)
	})
	t.Run("chats not seen yet", func(t *testing.T) {
		fresh := open() // knows no chat's tenant: a's reads share the lane of reads of no tenant's
		defer holdReads(t, fresh)()
		check(t, fresh, ReadsFor(ctx, "b"))
	})
}

// TestUnavailableNamesOnlyTheStoresConnection: Postgres out of reach is
// Unavailable; a network error of anything else (a provider, an MCP
// server, wrapped as the hub wraps it) or a server's refusal of the
// request is not.
func TestUnavailableNamesOnlyTheStoresConnection(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for err, want := range map[error]bool{
		fmt.Errorf("append: %w", &pgconn.PgError{Code: "57P01"}):                         true,
		&pgconn.PgError{Code: "08006"}:                                                   true,
		&pgconn.PgError{Code: "40P01"}:                                                   true,
		fmt.Errorf("begin: %w", pgconn.ErrConnClosed):                                    true,
		&pgconn.PgError{Code: "22021"}:                                                   false,
		&pgconn.PgError{Code: "23505"}:                                                   false,
		fmt.Errorf("list models: %w", &url.Error{Op: "Get", URL: "http://x", Err: dial}): false,
		dial:                    false,
		errors.New("not found"): false,
	} {
		if got := Unavailable(err); got != want {
			t.Errorf("Unavailable(%v) = %v, want %v", err, got, want)
		}
	}
	dsn, _ := pgtest.Unreachable(t)
	if _, _, err := OpenPostgres(context.Background(), dsn, PostgresOptions{}); !Unavailable(err) {
		t.Errorf("Unavailable(%v) = false for a server nobody listens for", err)
	}
}
