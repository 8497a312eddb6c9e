package persistence

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentd/agentd/testkit/pgtest"
)

// TestAReadThatFailsForItsOwnReasonIsTriedOnce: a read given a dead
// connection tries again on another; one that failed for a reason another
// connection would meet again (a bad statement, no row, its caller gone
// mid-statement) is tried once.
func TestAReadThatFailsForItsOwnReasonIsTriedOnce(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := openPooled(t, dsn, 4, PostgresOptions{PingEvery: time.Hour})
	watch := connect(t, dsn)
	for name, c := range map[string]struct {
		sql  string
		stop bool // the caller goes away once the statement runs
		want func(error) bool
	}{
		"bad statement": {sql: `SELECT no_such_column FROM chats`, want: func(err error) bool {
			pgErr, ok := errors.AsType[*pgconn.PgError](err)
			return ok && pgErr.Code == "42703"
		}},
		"no row":                    {sql: `SELECT 1 WHERE false`, want: func(err error) bool { return errors.Is(err, pgx.ErrNoRows) }},
		"caller gone mid-statement": {sql: `SELECT pg_sleep(60)`, stop: true, want: func(err error) bool { return errors.Is(err, context.Canceled) }},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.stop {
				go cancelOnceSleeping(t, watch, cancel)
			}
			tries := 0
			err := s.read(ctx, "t", func(conn *pgxpool.Conn) error {
				tries++
				var v any
				return conn.QueryRow(ctx, c.sql).Scan(&v)
			})
			if !c.want(err) || tries != 1 {
				t.Fatalf("%d tries, %v; want one, failed for its own reason", tries, err)
			}
		})
	}
}

// cancelOnceSleeping calls cancel once a connection of the test's sleeps
// in the server (pg_sleep).
func cancelOnceSleeping(t *testing.T, watch *pgx.Conn, cancel context.CancelFunc) {
	defer cancel()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); runtime.Gosched() {
		var n int
		if err := watch.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = current_setting('application_name') AND wait_event = 'PgSleep'`).Scan(&n); err != nil {
			t.Error(err)
			return
		}
		if n > 0 {
			return
		}
	}
	t.Error("no statement slept in the server within a minute")
}

// TestAReadGivenOnlyDeadConnectionsIsUnavailableAfterBoundedTries: the
// readers' connections are cut and the server stays out of reach (a
// partition). A read tries each cut connection, then a new one whose dial
// fails at the connect timeout, and ends there, at most one try a
// connection and one more, Unavailable (503, to send again): the cut's bare
// end of stream (io.ErrUnexpectedEOF), which the read returned as it was,
// was not, and the request was answered 500. A read whose every try loses
// its connection mid-answer ends after one try a connection and one more,
// Unavailable too. And a pool that hands acquire only closed connections
// (each new one ended as soon as made) fails after as many and one more,
// with pgconn.ErrConnClosed, Unavailable, fn never run.
func TestAReadGivenOnlyDeadConnectionsIsUnavailableAfterBoundedTries(t *testing.T) {
	const conns = 4
	t.Run("cut, the server out of reach", func(t *testing.T) {
		p, u, _ := pgtest.Silenced(t)
		q := u.Query()
		q.Set("pool_min_conns", fmt.Sprint(conns))
		q.Set("connect_timeout", "1")
		u.RawQuery = q.Encode()
		s := openPooled(t, u.String(), conns, PostgresOptions{PingEvery: time.Hour})
		ctx := context.Background()
		for deadline := time.Now().Add(time.Minute); s.pool.Stat().IdleConns() < conns; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of the readers' %d connections open after a minute; the test wants them all to cut", s.pool.Stat().IdleConns(), conns)
			}
		}
		// Each just used: not pinged before the read is given it.
		for _, c := range s.pool.AcquireAllIdle(ctx) {
			c.Release()
		}
		p.Silence()
		tries := 0
		err := s.read(ctx, "t", func(c *pgxpool.Conn) error {
			tries++
			var n int
			return c.QueryRow(ctx, `SELECT 1`).Scan(&n)
		})
		if err == nil || !Unavailable(err) || tries > conns+1 {
			t.Fatalf("a read after the cut, the server out of reach: %d tries, %v; want at most %d, Unavailable", tries, err, conns+1)
		}
		p.Cut() // the held dials end, so the store's Close waits for none
	})
	t.Run("every connection lost mid-answer", func(t *testing.T) {
		p, u, _ := pgtest.Silenced(t)
		s := openPooled(t, u.String(), conns, PostgresOptions{PingEvery: time.Hour})
		ctx := context.Background()
		cuts := p.CutMidAnswers(conns + 1)
		tries := 0
		err := s.read(ctx, "t", func(c *pgxpool.Conn) error {
			tries++
			var long string
			return c.QueryRow(ctx, `SELECT repeat('x', 100000)`).Scan(&long)
		})
		if err == nil || !Unavailable(err) || tries != conns+1 || cuts() != conns+1 {
			t.Fatalf("a read whose every try loses its connection: %d tries, %d cut, %v; want %d, Unavailable", tries, cuts(), err, conns+1)
		}
	})
	t.Run("every connection closed when given", func(t *testing.T) {
		s := openPooled(t, pgtest.DSN(t), conns, PostgresOptions{PingEvery: time.Hour})
		cfg := s.pool.Config()
		var made atomic.Int32
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			made.Add(1)
			return c.Close(ctx)
		}
		dead, err := newPgPool(context.Background(), cfg, s.conns)
		if err != nil {
			t.Fatal(err)
		}
		s.pool.Close()
		s.pool = dead
		tries := 0
		err = s.read(context.Background(), "t", func(*pgxpool.Conn) error { tries++; return nil })
		if !errors.Is(err, pgconn.ErrConnClosed) || !Unavailable(err) || tries != 0 {
			t.Fatalf("a read given only closed connections: %v, fn run %d times; want pgconn.ErrConnClosed, Unavailable, fn not run", err, tries)
		}
		if n := made.Load(); n != conns+1 {
			t.Fatalf("the read was given %d connections; want one a place in the pool and one more, %d", n, conns+1)
		}
	})
}

// TestAReadWhoseCallerLeavesMidPingKeepsTheConnection: a reading
// connection idle for over a second is pinged before use; a caller gone
// (its request cancelled) while the server had not answered yet ended the
// ping with it, and pgx closed the connection, healthy, so the next read
// dialed a new one. The ping is the store's now, bounded on its own: the
// caller's cancel leaves the ping's context live (seen at once, as a
// context derived from the caller's ends with it), the caller's read
// ends, and the connection answers its ping and stays. The connection
// counts as idle after a nanosecond, not a second slept.
func TestAReadWhoseCallerLeavesMidPingKeepsTheConnection(t *testing.T) {
	p, u, _ := pgtest.Silenced(t)
	pings := make(chan context.Context, 1)
	s := openPooled(t, u.String(), 2, PostgresOptions{PingEvery: time.Hour, idleFor: time.Nanosecond,
		idlePing: func(c *pgx.Conn, ctx context.Context) error {
			select {
			case pings <- ctx:
			default:
			}
			return c.Ping(ctx)
		}})
	ctx := context.Background()
	if _, err := s.LastSeq(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if n := s.pool.Stat().TotalConns(); n != 1 {
		t.Fatalf("%d reading connections after one read; the test wants the one", n)
	}
	select { // a ping of the first read's, if any
	case <-pings:
	default:
	}
	dialed := p.Accepted()
	resume := p.Stall()
	defer func() {
		if resume != nil {
			resume()
		}
	}()
	rctx, cancel := context.WithCancel(ctx)
	read := make(chan error, 1)
	go func() {
		_, err := s.LastSeq(rctx, "c")
		read <- err
	}()
	var ping context.Context
	select {
	case ping = <-pings:
	case <-time.After(time.Minute):
		t.Fatal("the read's idle connection was not pinged within a minute")
	}
	// The ping is sent, its answer held: the read's statement waits for it.
	for deadline := time.Now().Add(time.Minute); p.AskedWhileStalled() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the read sent nothing to the server within a minute; the test wants its ping held")
		}
	}
	cancel()
	if err := ping.Err(); err != nil {
		t.Fatalf("the caller's cancel ended its read's ping (%v): pgx closes the connection the ping was on", err)
	}
	resume()
	resume = nil
	if err := <-read; !errors.Is(err, context.Canceled) {
		t.Fatalf("the read whose caller left: %v; want context.Canceled", err)
	}
	if _, err := s.LastSeq(ctx, "c"); err != nil {
		t.Fatalf("a read after: %v", err)
	}
	if n := p.Accepted() - dialed; n != 0 {
		t.Fatalf("the reads after the caller left dialed %d new connections; want the pinged one kept", n)
	}
}

// TestAReadCutMidAnswerTriedAgainHoldsEachRowOnce: a read that lists rows
// is cut midway through the server's answer (a blip), after some rows
// came, and tries again on another connection; one of the rows the cut
// try was sent is deleted before the next try. The list holds each row of
// the try that answered once: not those of the cut try a second time
// (RecordsPrefix), nor the row deleted since (LearnedWindows, a map, where
// a row read twice shows only once, so the deleted one is what shows that
// the cut try's rows stayed).
func TestAReadCutMidAnswerTriedAgainHoldsEachRowOnce(t *testing.T) {
	const n = 200
	name := func(i int) string { return fmt.Sprintf("p/%03d-%s", i, strings.Repeat("x", 100)) }
	for what, c := range map[string]struct {
		fill   func(ctx context.Context, s *Postgres) error
		delete string // the SQL that deletes the row name(0) names
		list   func(ctx context.Context, s *Postgres) ([]string, error)
	}{
		"records": {
			fill: func(ctx context.Context, s *Postgres) error {
				var recs []RecordPut
				for i := range n {
					recs = append(recs, RecordPut{Kind: "k", ID: name(i), V: "v"})
				}
				return s.PutRecords(ctx, recs...)
			},
			delete: `DELETE FROM records WHERE kind = 'k' AND id = $1`,
			list: func(ctx context.Context, s *Postgres) (ids []string, err error) {
				err = s.RecordsPrefix(ctx, "k", "p/", func(id string, _ func(any) error) error {
					ids = append(ids, id)
					return nil
				})
				return ids, err
			},
		},
		"learned windows": {
			fill: func(ctx context.Context, s *Postgres) error {
				for i := range n {
					if _, err := s.LearnWindow(ctx, "fake", name(i), 1000); err != nil {
						return err
					}
				}
				return nil
			},
			delete: `DELETE FROM learned_windows WHERE provider = 'fake' AND model = $1`,
			list: func(ctx context.Context, s *Postgres) ([]string, error) {
				ws, err := s.LearnedWindows(ctx)
				return slices.Sorted(maps.Keys(ws)), err
			},
		},
	} {
		t.Run(what, func(t *testing.T) {
			p, u, direct := pgtest.Silenced(t)
			s := openPooled(t, u.String(), 2, PostgresOptions{PingEvery: time.Hour})
			ctx := context.Background()
			if err := c.fill(ctx, s); err != nil {
				t.Fatal(err)
			}
			admin := connect(t, direct)
			p.WhenCut(func() {
				if _, err := admin.Exec(ctx, c.delete, name(0)); err != nil {
					t.Errorf("delete a row the cut try was sent: %v", err)
				}
			})
			cuts := p.CutMidAnswers(1)
			got, err := c.list(ctx, s)
			if err != nil {
				t.Fatalf("a listing cut midway, the server taking new connections: %v", err)
			}
			if cuts() != 1 {
				t.Fatal("no answer was cut: the test proves nothing")
			}
			var want []string
			for i := 1; i < n; i++ {
				want = append(want, name(i))
			}
			if what == "learned windows" {
				for i := range want {
					want[i] = "fake/" + want[i]
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("the listing after a cut holds %d rows, %d of them the row deleted since; want each of the %d of the try that answered once",
					len(got), len(got)-len(slices.DeleteFunc(slices.Clone(got), func(s string) bool { return strings.HasSuffix(s, name(0)) })), len(want))
			}
		})
	}
}
