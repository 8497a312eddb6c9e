// Package pgtest gives a test its own empty Postgres schema on the server
// AGENTD_TEST_PG_DSN names (testkit/pg/pg.sh starts one), and skips the
// test, saying so, when the variable is unset. Silenced puts a Silencer
// between a test and that server, to cut or hold what passes (a COMMIT's
// answer cut in its middle, a partition), for the store's tests and the
// daemon's alike.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/configs"
)

// EachStore runs f on a daemon configuration cfg for each store: Badger,
// and Postgres in a fresh schema when AGENTD_TEST_PG_DSN names a server
// (skipped, saying so, otherwise). It sets the environment, so f's test
// must not be parallel.
func EachStore(t *testing.T, cfg configs.Config, f func(t *testing.T, cfg configs.Config)) {
	t.Run("badger", func(t *testing.T) { f(t, cfg) })
	t.Run("postgres", func(t *testing.T) {
		t.Setenv("AGENTD_PG_DSN", DSN(t))
		cfg := cfg
		cfg.Store = configs.Store{Kind: configs.StorePostgres, DSNEnv: "AGENTD_PG_DSN"}
		f(t, cfg)
	})
}

// Env names the variable that holds the test server's DSN.
const Env = "AGENTD_TEST_PG_DSN"

// DSN creates a fresh schema for t and returns a DSN whose search_path is
// that schema, so each test starts on an empty database of its own; the
// schema is dropped when t ends (after the cleanups t registers later,
// such as closing the store). Its connections carry the schema's name as
// their application_name, so a test that cuts connections cuts its own
// alone, not those of tests running beside it in other packages.
func DSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(Env)
	if base == "" {
		t.Skipf("%s is unset: the Postgres backend is not tested (testkit/pg/pg.sh start DIR prints a DSN)", Env)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "test_" + hex.EncodeToString(b[:])
	exec(t, base, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { exec(t, base, "DROP SCHEMA "+schema+" CASCADE") })
	return inSchema(t, base, schema)
}

// inSchema returns dsn with its search_path and application_name set to
// schema, in the DSN's own form (URL or key=value).
func inSchema(t testing.TB, dsn, schema string) string {
	t.Helper()
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " search_path=" + schema + " application_name=" + schema
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse %s: %v", Env, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func exec(t testing.TB, dsn, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to %s: %v", Env, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Unreachable returns a DSN of a loopback port nobody listens on (bound,
// then released) and that port's address, for tests of a server that
// does not answer; it needs no server.
func Unreachable(t testing.TB) (dsn, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	_ = l.Close()
	return "postgres://agentd@" + addr + "/agentd?sslmode=disable&connect_timeout=5", addr
}
