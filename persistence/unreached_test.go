package persistence

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit/pgtest"
)

// TestAFailedBatchAsksAnUnreachableServerOnce: the server stops answering
// (a partition: connections cut, new ones never answered) while the
// writes of many claimed chats wait. Their batch fails, and a failed
// write asks the server whether its chat moved (movedOr) on the
// committer's goroutine; once that question goes unanswered, the batch's
// other writes do not ask it again — each asking held every write behind
// it for a connect timeout, n writes for n of them.
func TestAFailedBatchAsksAnUnreachableServerOnce(t *testing.T) {
	const n = 12
	p, s, release := silencedBehindAHeldWrite(t, n)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		s.AppendThen(ctx, fmt.Sprint("c", i), []chat.Message{user("x")}, func(_ []chat.Message, err error) {
			if err == nil {
				t.Errorf("c%d: an append to a server that does not answer succeeded", i)
			}
			wg.Done()
		})
	}
	release()
	wg.Wait()
	// The batch of n writes dials once to begin and once to ask (and the
	// pings' first may dial once, if it came after the silence); a
	// question a write gave n dials.
	if dials := p.Held(); dials >= n/2 {
		t.Fatalf("%d writes failed after %d connection attempts to the silent server; want a few for their batches, not one a write", n, dials)
	}
	p.Cut() // the dials it holds end, so the store's Close waits for none
}

// TestFailedSnapshotSavesAskAnUnreachableServerOnce: as
// TestAFailedBatchAsksAnUnreachableServerOnce, for snapshots (a session's
// fold, on its mailbox). A failed SaveSnapshot asked whether its chat moved
// (movedOr) on its caller's goroutine, all of a batch's at once, so none
// saw another's question unanswered: each dialed the silent server, one
// after another on the writer's connection, and every write of every
// tenant waited behind n connect timeouts. They ask on the committer's
// goroutine now, as appends do: once.
func TestFailedSnapshotSavesAskAnUnreachableServerOnce(t *testing.T) {
	const n = 12
	p, s, release := silencedBehindAHeldWrite(t, n)
	ctx := context.Background()
	saves := make(chan error, n)
	for i := range n {
		go func() { saves <- s.SaveSnapshot(ctx, fmt.Sprint("c", i), Snapshot{Summary: "s"}) }()
	}
	// Every save is queued before the held write lets the batch go.
	for deadline := time.Now().Add(time.Minute); s.w.unfinished.Load() < n+1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d saves queued after a minute", s.w.unfinished.Load()-1, n)
		}
	}
	release()
	for range n {
		if err := <-saves; err == nil {
			t.Error("a snapshot saved to a server that does not answer")
		}
	}
	if dials := p.Held(); dials >= n/2 {
		t.Fatalf("%d snapshot saves failed after %d connection attempts to the silent server; want a few for their batch, not one a save", n, dials)
	}
	p.Cut() // the dials it holds end, so the store's Close waits for none
}

// silencedBehindAHeldWrite opens a store (a connect timeout of 1 s) whose
// chats c0 to c<n-1> are claimed, holds a write in its committer and
// silences the server. The writes a test queues then wait behind the held
// one, so they make one batch however the machine schedules the test:
// queued while batches failed, each could make a batch of its own, and
// dial twice (to begin, to ask). release lets the held write go, and
// checks that it failed.
func silencedBehindAHeldWrite(t *testing.T, n int) (p *pgtest.Silencer, s *Postgres, release func()) {
	t.Helper()
	p, u, _ := pgtest.Silenced(t)
	q := u.Query()
	q.Set("connect_timeout", "1")
	u.RawQuery = q.Encode()
	// The store's pings would dial the silent server too: one, at open.
	s, _, err := OpenPostgres(context.Background(), u.String(), PostgresOptions{PingEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprint("c", i)
		if err := s.CreateChat(ctx, Chat{ID: id, Tenant: "t"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Claim(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	held, let := make(chan struct{}), make(chan struct{})
	blocker := make(chan error, 1)
	s.w.queue(func(*pgTxn) error {
		close(held)
		<-let
		return nil
	}, false, func(_ bool, err error) { blocker <- err })
	<-held
	p.Silence()
	return p, s, func() {
		t.Helper()
		close(let)
		if err := <-blocker; err == nil {
			t.Error("the held write committed on a cut connection")
		}
	}
}

// TestCloseGivesUpOnAFrozenServerWhenItsBoundEnds: the server stops
// answering (a partition) with a batch in flight and writes queued behind
// it. Close waited for them as long as the server took — the batch's
// timeout, then pgx's 15 s a connection — so a daemon told to stop did
// not; now, once Close's context ends, every write not committed fails,
// its caller told, Close says how many it gave up, and what was
// acknowledged before stays stored.
func TestCloseGivesUpOnAFrozenServerWhenItsBoundEnds(t *testing.T) {
	p, u, dsn := pgtest.Silenced(t)
	ctx := context.Background()
	// A batch timeout far past the wait below: the old Close waited it out.
	s, _, err := OpenPostgres(ctx, u.String(), PostgresOptions{BatchTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateChat(ctx, Chat{ID: "c", Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "c", user("acknowledged")); err != nil {
		t.Fatal(err)
	}
	// Its caller is told before the committer counts it out: the count
	// names the pending writes alone once it has.
	for deadline := time.Now().Add(time.Minute); s.w.unfinished.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the acknowledged write still counted unfinished after a minute")
		}
	}
	p.Freeze()
	const n = 8
	failed := make(chan error, n)
	for i := range n {
		s.AppendThen(ctx, "c", []chat.Message{user(fmt.Sprint("pending ", i))}, func(_ []chat.Message, err error) { failed <- err })
	}
	bound, stop := context.WithCancel(ctx)
	closed := make(chan error, 1)
	go func() { closed <- s.CloseContext(bound) }()
	stop()
	select {
	case err := <-closed:
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("gave up on the %d writes still pending", n)) {
			t.Fatalf("Close past its bound with writes pending: %v; want an error saying what it gave up", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not return within a minute of its bound ending, the server frozen")
	}
	for range n {
		if err := <-failed; err == nil {
			t.Fatal("a write the frozen server never committed was reported stored")
		}
	}
	direct := openStore(t, dsn)
	msgs, err := direct.Messages(ctx, "c", 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Content != "acknowledged" {
		t.Fatalf("after Close gave up: %+v; want the one acknowledged message", msgs)
	}
}

// TestReachabilityIsCurrentWithoutAnyoneAsking: the store pinged the
// server only when /healthz asked (Unreached), so after a quiet spell the
// first probe got the answer of the last ping — an outage long over, and
// past the failing threshold at once. Now the store pings on its own: once
// the server is back and has answered a ping (seen on the server: a ping
// begun after another one began, the pings one at a time), Unreached says
// so, though nobody asked meanwhile.
func TestReachabilityIsCurrentWithoutAnyoneAsking(t *testing.T) {
	p, u, dsn := pgtest.Silenced(t)
	q := u.Query()
	q.Set("connect_timeout", "1")
	u.RawQuery = q.Encode()
	s := openStore(t, u.String())

	p.Silence()
	deadline := time.Now().Add(time.Minute)
	for s.Unreached().IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("the server silenced for a minute, and Unreached still says it answers")
		}
		time.Sleep(20 * time.Millisecond)
	}
	direct := connect(t, dsn)
	back := serverNow(t, direct)
	p.Resume()
	// Nobody calls Unreached now, until two pings reached the server.
	awaitPings(t, direct, back, deadline.Add(time.Minute), "the server back, and nobody asking; want the store's own pings")
	if since := s.Unreached(); !since.IsZero() {
		t.Fatalf("the server answered a ping, and Unreached says it has not since %v", since)
	}
}

// TestAPingIsAnsweredWhileReadsHoldEveryConnection: two tenants' reads,
// held up in the server by a lock, take both of the readers' connections.
// The store's pings took a reader's connection too, so they waited for
// one, never reached the server, and /healthz called a busy server out of
// reach (failing, past store.failing_after, so a probe restarted the
// node). The pings have a connection of their own: they reach the server
// and Unreached says it answers.
func TestAPingIsAnsweredWhileReadsHoldEveryConnection(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s := openPooled(t, dsn, 2, PostgresOptions{PingEvery: 20 * time.Millisecond})
	chatsOfTwoTenants(t, s)
	watch, locker := connect(t, dsn), connect(t, dsn)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE messages IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	reads := make(chan error, 2)
	for _, id := range []string{"a1", "b1"} {
		go func() {
			_, err := s.Messages(ctx, id, 1, 0)
			reads <- err
		}()
	}
	defer func() {
		_ = tx.Rollback(ctx)
		for range 2 {
			if err := <-reads; err != nil {
				t.Errorf("a held read: %v", err)
			}
		}
	}()

	deadline := time.Now().Add(time.Minute)
	var since time.Time
	for {
		var blocked int
		if err := watch.QueryRow(ctx, `SELECT count(*), now() FROM pg_stat_activity
			WHERE application_name = current_setting('application_name') AND wait_event_type = 'Lock'`).Scan(&blocked, &since); err != nil {
			t.Fatal(err)
		}
		if blocked == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the two reads held up by the lock after a minute", blocked)
		}
		time.Sleep(10 * time.Millisecond)
	}
	awaitPings(t, watch, since, deadline, "while reads held every reader's connection; want them on a connection of their own")
	if out := s.Unreached(); !out.IsZero() {
		t.Fatalf("the server answering pings, its reading connections busy: Unreached says out since %v", out)
	}
}

// serverNow is the server's clock, read on conn.
func serverNow(t *testing.T, conn *pgx.Conn) time.Time {
	t.Helper()
	var now time.Time
	if err := conn.QueryRow(context.Background(), `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// awaitPings returns once two of the store's pings (pgx's "-- ping", on a
// connection named as conn is) began on the server after since, so that
// one was answered wholly after it (the store pings one at a time); it
// fails the test, saying why, at deadline.
func awaitPings(t *testing.T, conn *pgx.Conn, since, deadline time.Time, why string) {
	t.Helper()
	began := map[time.Time]bool{}
	for len(began) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pings reached the server after %v, %s", len(began), since, why)
		}
		var at time.Time
		if err := conn.QueryRow(context.Background(), `SELECT coalesce(max(query_start), 'epoch') FROM pg_stat_activity
			WHERE application_name = current_setting('application_name') AND query = '-- ping' AND query_start > $1`, since).Scan(&at); err != nil {
			t.Fatal(err)
		}
		if at.After(since) {
			began[at] = true
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCloseCountsAFailedWriteWhoseCallerIsNotToldYet: the server froze
// under a claimed chat's write; its batch failed at its timeout, and the
// write, before its caller hears, asks the server whether the chat moved
// (movedOr), which the frozen server holds. A Close giving up then said
// it gave up on 0 writes: the count dropped as the batch failed, before
// the caller was told. It counts the writes whose callers wait still.
func TestCloseCountsAFailedWriteWhoseCallerIsNotToldYet(t *testing.T) {
	p, u, _ := pgtest.Silenced(t)
	ctx := context.Background()
	s, _, err := OpenPostgres(ctx, u.String(), PostgresOptions{BatchTimeout: 300 * time.Millisecond, PingEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateChat(ctx, Chat{ID: "c", Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Claim(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	p.Freeze()
	told := make(chan error, 1)
	s.AppendThen(ctx, "c", []chat.Message{user("pending")}, func(_ []chat.Message, err error) { told <- err })
	// The frozen server is sent the batch's BEGIN on the writer's
	// connection; once the batch failed at its timeout, that connection's
	// close dials to cancel it, and the write's question dials a new
	// writer's connection (the store pings it no more); the frozen
	// server holds both dials.
	deadline := time.Now().Add(time.Minute)
	for p.SentOnConns() < 1 || p.Held() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after a write to the frozen server, it was sent something on %d connections and held %d dials; want the writer's, then its cancel request and the question's", p.SentOnConns(), p.Held())
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-told:
		t.Fatalf("the write's caller was told %v before the chat's owner was asked; the test wants it waiting", err)
	default:
	}
	bound, stop := context.WithCancel(ctx)
	stop()
	err = s.CloseContext(bound)
	if err == nil || !strings.Contains(err.Error(), "gave up on the 1 write still pending") {
		t.Fatalf("Close past its bound, one write's caller not told yet: %v; want it to count that write", err)
	}
	if err := <-told; err == nil {
		t.Fatal("a write the frozen server never committed was reported stored")
	}
}

// TestAWriteAfterACutConnectionWaitsNotForItsClose: the writer's
// connection is cut (a network blip) while the server takes new ones.
// pgx closes a cut connection after sending the server a cancel request,
// waiting up to 15 s for it to be answered, and the writer's pool, with
// room for that one connection, held every tenant's writes until the
// close ended. A write commits on a new connection now while the old
// one's cancel request is still held unanswered.
func TestAWriteAfterACutConnectionWaitsNotForItsClose(t *testing.T) {
	p, u, dsn := pgtest.Silenced(t)
	s := writtenBeforeACut(t, p, u.String())
	p.Cut()
	appendAfterCut(t, s, "after")
	awaitHeldCancels(t, p, 1, time.Now().Add(time.Minute))
	storedLast(t, dsn, 2, "after")
	p.Cut() // the held cancel requests end, so Close waits for none
}

// TestAPingAfterACutWaitsNotForItsClose: the pings' connection is cut (a
// network blip) while the server takes new ones. Their pool had room for
// that one connection, which pgx closes after waiting up to 15 s for its
// cancel request, so the pings waited that long, and Unreached said the
// server, back, was out of reach. Pings reach the server on a new
// connection now while the old one's cancel request is still held.
func TestAPingAfterACutWaitsNotForItsClose(t *testing.T) {
	p, u, dsn := pgtest.Silenced(t)
	s := openPooled(t, u.String(), 16, PostgresOptions{PingEvery: 20 * time.Millisecond})
	direct := connect(t, dsn)
	open := serverNow(t, direct)
	deadline := time.Now().Add(time.Minute)
	awaitPings(t, direct, open, deadline, "the store open; want its pings to have a connection before the cut")
	p.HoldingCancels()
	p.Cut()
	// The pings' the only connection in use: its close sends the one
	// cancel request; a ping after it is on a new connection.
	for held, _ := p.HeldCancels(); held == 0; held, _ = p.HeldCancels() {
		if time.Now().After(deadline) {
			t.Fatal("a minute after the cut, the pings' cut connection sent no cancel request; the test wants its close under way")
		}
		time.Sleep(10 * time.Millisecond)
	}
	awaitPings(t, direct, serverNow(t, direct), deadline, "after the cut, the server taking new connections")
	if held, ended := p.HeldCancels(); ended > 0 {
		t.Fatalf("pings reached the server after the cut once %d of %d cancel requests of cut connections ended; want them on a new connection while those are held", ended, held)
	}
	if out := s.Unreached(); !out.IsZero() {
		t.Fatalf("the server answering pings after the cut, Unreached says out since %v", out)
	}
	p.Cut() // the held cancel requests end, so Close waits for none
}

// TestAWriteAfterTwoCutsWaitsNotForTheirCloses: the writer's connection
// is cut (a network blip), a write goes through on a new one, and that one
// is cut too, while the first is still closing. The writer's pool had
// room for two connections, both closing now, each for up to 15 s while
// its cancel request goes unanswered, and every tenant's writes waited
// for the older close. A write commits on a third connection now while
// both cancel requests are still held unanswered.
func TestAWriteAfterTwoCutsWaitsNotForTheirCloses(t *testing.T) {
	p, u, dsn := pgtest.Silenced(t)
	s := writtenBeforeACut(t, p, u.String())
	deadline := time.Now().Add(time.Minute)
	for cut := 1; cut <= 2; cut++ {
		p.Blip()
		began := time.Now()
		appendAfterCut(t, s, fmt.Sprint("after cut ", cut))
		t.Logf("cut %d: a write committed %v after it", cut, time.Since(began))
		awaitHeldCancels(t, p, cut, deadline)
	}
	storedLast(t, dsn, 3, "after cut 2")
	p.Cut() // the held cancel requests end, so Close waits for none
}

// TestAReadAfterEveryReaderConnectionIsCutWaitsNotForTheirCloses: all 16
// of the readers' connections are cut at once (a network blip) while the
// server takes new ones. Each kept its place in the pool while pgx closed
// it, up to 15 s for its cancel request, so every tenant's reads waited
// that long for a connection, the server back. A read is answered on a
// new connection now while all 16 cancel requests are held unanswered;
// and every read after the cut is: one given a cut connection (idle under
// a second, it is not pinged first) tries again on another, where 16
// reads failed before one went through.
func TestAReadAfterEveryReaderConnectionIsCutWaitsNotForTheirCloses(t *testing.T) {
	const conns = 16
	p, u, _ := pgtest.Silenced(t)
	q := u.Query()
	q.Set("pool_min_conns", fmt.Sprint(conns))
	u.RawQuery = q.Encode()
	s := openPooled(t, u.String(), conns, PostgresOptions{PingEvery: time.Hour})
	ctx := context.Background()
	if err := s.CreateChat(ctx, Chat{ID: "c", Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for s.pool.Stat().IdleConns() < conns {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the readers' %d connections open after a minute; the test wants them all to cut", s.pool.Stat().IdleConns(), conns)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.HoldingCancels()
	p.Cut()
	// As many reads at once as the pool has connections, each of which may
	// be given cut ones: none fails.
	began, reads := time.Now(), make(chan error, conns)
	for range conns {
		go func() {
			_, err := s.LastSeq(ctx, "c")
			reads <- err
		}()
	}
	for range conns {
		if err := <-reads; err != nil {
			t.Errorf("a read after the cut, the server taking new connections: %v", err)
		}
	}
	t.Logf("%d reads answered %v after every reader's connection was cut", conns, time.Since(began))
	awaitHeldCancels(t, p, conns, deadline)
	p.Cut() // the held cancel requests end, so Close waits for none
}

// appendAfterCut appends text to chat c once its connection was cut: the
// first write may find the cut (its connection, idle under a second, not
// writtenBeforeACut opens a store at dsn (p's proxy; pings an hour apart)
// whose chat c holds one message, "before", and has p hold the cancel
// requests of the connections it cuts from then on.
func writtenBeforeACut(t *testing.T, p *pgtest.Silencer, dsn string) *Postgres {
	t.Helper()
	ctx := context.Background()
	s, _, err := OpenPostgres(ctx, dsn, PostgresOptions{PingEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.CreateChat(ctx, Chat{ID: "c", Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "c", user("before")); err != nil {
		t.Fatal(err)
	}
	p.HoldingCancels()
	return s
}

// storedLast checks, on a new store at dsn, that chat c holds n messages,
// the last one saying last.
func storedLast(t *testing.T, dsn string, n int, last string) {
	t.Helper()
	msgs, err := openStore(t, dsn).Messages(context.Background(), "c", 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != n || msgs[n-1].Content != last {
		t.Fatalf("after the cuts: %+v; want the message before them and one after each, %q last", msgs, last)
	}
}

// pinged first) and fail; the next one begins anew.
func appendAfterCut(t *testing.T, s *Postgres, text string) {
	t.Helper()
	if _, err := s.Append(context.Background(), "c", user(text)); err != nil {
		if _, err := s.Append(context.Background(), "c", user(text)); err != nil {
			t.Fatalf("a write after the cut, the server taking new connections: %v", err)
		}
	}
}

// awaitHeldCancels returns once p holds n cancel requests of cut
// connections, none ended: called after a write or read that followed the
// cuts, it fails the test when that one waited for a cut connection's
// close, or when the cut connections were not closing (so it proves
// nothing).
func awaitHeldCancels(t *testing.T, p *pgtest.Silencer, n int, deadline time.Time) {
	t.Helper()
	for {
		held, ended := p.HeldCancels()
		if ended > 0 {
			t.Fatalf("answered once %d of %d cancel requests of cut connections ended; want it answered while they are held", ended, held)
		}
		if held >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d cut connections sent a cancel request; the test wants %d closes under way", held, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
