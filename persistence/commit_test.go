package persistence

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/chat"
)

// rig reaches one backend's writer: put and get set and read the record
// test/<id> inside a transaction T of the writer w.
type rig[T any] struct {
	w   *committer[T]
	s   store
	put func(txn T, id string, v any) error
	get func(txn T, id string, v any) error
}

func badgerRig(s *Store) rig[*writeTxn] {
	return rig[*writeTxn]{w: s.w, s: s,
		put: func(txn *writeTxn, id string, v any) error {
			val, err := encode(v)
			if err != nil {
				return err
			}
			return txn.Set(recordKey("test", id), val)
		},
		get: func(txn *writeTxn, id string, v any) error { return getTxn(txn, recordKey("test", id), v) },
	}
}

func pgRig(s *Postgres) rig[*pgTxn] {
	return rig[*pgTxn]{w: s.w, s: s,
		put: func(t *pgTxn, id string, v any) error {
			val, err := encode(v)
			if err != nil {
				return err
			}
			_, err = t.tx.Exec(t.ctx, `INSERT INTO records (kind, id, data) VALUES ('test', $1, $2)
				ON CONFLICT (kind, id) DO UPDATE SET data = excluded.data`, id, val)
			return err
		},
		get: func(t *pgTxn, id string, v any) error {
			var b []byte
			err := t.tx.QueryRow(t.ctx, `SELECT data FROM records WHERE kind = 'test' AND id = $1`, id).Scan(&b)
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNotFound
			}
			if err != nil {
				return err
			}
			return decode(b, v)
		},
	}
}

// eachWriter runs the writer test of each backend (see eachBackend).
func eachWriter(t *testing.T, onBadger func(*testing.T, rig[*writeTxn], func(*testing.T) store), onPostgres func(*testing.T, rig[*pgTxn], func(*testing.T) store)) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		switch s := open(t).(type) {
		case *Store:
			onBadger(t, badgerRig(s), open)
		case *Postgres:
			onPostgres(t, pgRig(s), open)
		}
	})
}

// hold submits a write that blocks the writer until the returned release
// is called, so the writes queued meanwhile form the next batch.
func hold[T any](t *testing.T, r rig[T]) (release func(), done <-chan error) {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- r.w.do(func(txn T) error {
			select {
			case <-entered:
			default:
				close(entered)
				<-gate
			}
			return r.put(txn, "hold", "{}")
		})
	}()
	<-entered
	return func() { close(gate) }, errc
}

// queue submits fn from a goroutine and returns once it waits in the
// writer's queue (it cannot have run: the writer is held).
func queue[T any](t *testing.T, w *committer[T], fn func(txn T) error) <-chan error {
	t.Helper()
	before := len(w.in)
	errc := make(chan error, 1)
	go func() { errc <- w.do(fn) }()
	for len(w.in) == before {
		runtime.Gosched()
	}
	return errc
}

// appendOrder appends id to the comma list in the record test/order.
func appendOrder[T any](r rig[T], id string) func(txn T) error {
	return func(txn T) error {
		var got string
		if err := r.get(txn, "order", &got); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if got != "" {
			got += ","
		}
		return r.put(txn, "order", got+id)
	}
}

func TestABatchRunsItsWritesInTheOrderTheyCame(t *testing.T) {
	eachWriter(t, batchRunsInOrder[*writeTxn], batchRunsInOrder[*pgTxn])
}

func batchRunsInOrder[T any](t *testing.T, r rig[T], _ func(*testing.T) store) {
	defer r.s.Close()
	release, held := hold(t, r)
	var waits []<-chan error
	for i := range 10 {
		waits = append(waits, queue(t, r.w, appendOrder(r, fmt.Sprint(i))))
	}
	release()
	for _, w := range append(waits, held) {
		if err := <-w; err != nil {
			t.Fatal(err)
		}
	}
	var got string
	if err := r.s.Record(context.Background(), "test", "order", &got); err != nil {
		t.Fatal(err)
	}
	if got != "0,1,2,3,4,5,6,7,8,9" {
		t.Fatalf("order = %q", got)
	}
}

func TestConcurrentChatsEachKeepTheirLogInOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		s := open(t)
		var wg sync.WaitGroup
		for c := range 8 {
			wg.Go(func() {
				for i := range 40 {
					if _, err := s.Append(context.Background(), fmt.Sprint("chat-", c), chat.Message{Role: chat.RoleUser, Content: fmt.Sprint(i)}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(t)
		defer s.Close()
		for c := range 8 {
			ms, err := s.Messages(context.Background(), fmt.Sprint("chat-", c), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != 40 {
				t.Fatalf("chat-%d has %d messages", c, len(ms))
			}
			for i, m := range ms {
				if m.Seq != int64(i+1) || m.Content != fmt.Sprint(i) {
					t.Fatalf("chat-%d message %d: seq %d content %q", c, i, m.Seq, m.Content)
				}
			}
		}
	})
}

func TestAWriteThatFailsFailsAloneAndLandsNothing(t *testing.T) {
	eachWriter(t, failsAlone[*writeTxn], failsAlone[*pgTxn])
}

func failsAlone[T any](t *testing.T, r rig[T], _ func(*testing.T) store) {
	defer r.s.Close()
	release, held := hold(t, r)
	a := queue(t, r.w, appendOrder(r, "a"))
	bad := queue(t, r.w, func(txn T) error {
		if err := r.put(txn, "half", "{}"); err != nil {
			return err
		}
		return errors.New("refused")
	})
	b := queue(t, r.w, appendOrder(r, "b"))
	release()
	for _, w := range []<-chan error{held, a, b} {
		if err := <-w; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-bad; err == nil || err.Error() != "refused" {
		t.Fatalf("the failing write got %v", err)
	}
	var got string
	if err := r.s.Record(context.Background(), "test", "order", &got); err != nil || got != "a,b" {
		t.Fatalf("order = %q, %v", got, err)
	}
	if err := r.s.Record(context.Background(), "test", "half", new(any)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("half of the failed write landed: %v", err)
	}
}

func TestAFailedCommitFailsEveryWriteOfItsBatch(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	r := badgerRig(s)
	release, held := hold(t, r)
	// The batch's first write reads x, then waits while x changes beneath
	// it: Badger refuses the commit as a conflict.
	read, gate := make(chan struct{}), make(chan struct{})
	first := queue(t, s.w, func(txn *writeTxn) error {
		if _, err := txn.Get([]byte("x")); err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		select {
		case <-read:
		default:
			close(read)
			<-gate
		}
		return txn.Set([]byte("y"), []byte("1"))
	})
	var rest []<-chan error
	for i := range 4 {
		rest = append(rest, queue(t, s.w, appendOrder(r, fmt.Sprint(i))))
	}
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	<-read
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("x"), []byte("2")) }); err != nil {
		t.Fatal(err)
	}
	close(gate)
	for i, w := range append(rest, first) {
		if err := <-w; !errors.Is(err, badger.ErrConflict) {
			t.Fatalf("write %d got %v, want the commit's conflict", i, err)
		}
	}
	if err := s.Record(context.Background(), "test", "order", new(string)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a write of the failed batch landed: %v", err)
	}
}

func TestCloseCommitsWhatWasQueuedAndRefusesLaterWrites(t *testing.T) {
	eachWriter(t, closeCommitsQueued[*writeTxn], closeCommitsQueued[*pgTxn])
}

func closeCommitsQueued[T any](t *testing.T, r rig[T], open func(*testing.T) store) {
	release, held := hold(t, r)
	var waits []<-chan error
	for i := range 5 {
		waits = append(waits, queue(t, r.w, appendOrder(r, fmt.Sprint(i))))
	}
	closed := make(chan error, 1)
	go func() { closed <- r.s.Close() }()
	release()
	for _, w := range append(waits, held) {
		if err := <-w; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := r.s.Append(context.Background(), "c", chat.Message{Content: "late"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a write after Close got %v", err)
	}
	s := open(t)
	defer s.Close()
	var got string
	if err := s.Record(context.Background(), "test", "order", &got); err != nil || !strings.HasPrefix(got, "0,1,2,3,4") {
		t.Fatalf("order after reopen = %q, %v", got, err)
	}
}

func TestWritesTooBigToShareATransactionCommitInTurn(t *testing.T) {
	s, err := Open(t.TempDir(), Options{memTable: 8 << 20}) // about 14,000 keys a transaction
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := badgerRig(s)
	release, held := hold(t, r)
	batch := make([]chat.Message, 6000)
	for i := range batch {
		batch[i] = chat.Message{Role: chat.RoleUser, Content: "a message of some length"}
	}
	var waits []<-chan error
	for i := range 4 {
		waits = append(waits, queue(t, s.w, func(txn *writeTxn) error {
			for j := range batch {
				if err := txn.Set(msgKey(fmt.Sprint("big-", i), int64(j+1)), []byte("{}")); err != nil {
					return err
				}
			}
			return appendOrder(r, fmt.Sprint(i))(txn)
		}))
	}
	release()
	for _, w := range append(waits, held) {
		if err := <-w; err != nil {
			t.Fatal(err)
		}
	}
	var got string
	if err := s.Record(context.Background(), "test", "order", &got); err != nil || got != "0,1,2,3" {
		t.Fatalf("order = %q, %v", got, err)
	}
	for i := range 4 {
		if seq, err := s.LastSeq(context.Background(), fmt.Sprint("big-", i)); err != nil || seq != 6000 {
			t.Fatalf("big-%d ends at %d, %v", i, seq, err)
		}
	}
}

// syncCounter counts a backend's commits that must be durable (that a
// caller waits to see synced).
type syncCounter[T any] struct {
	txns[T]
	syncs atomic.Int32
}

func (c *syncCounter[T]) commit(txn T, durable bool) error {
	if durable {
		c.syncs.Add(1)
	}
	return c.txns.commit(txn, durable)
}

// TestUnsyncedWritesLandWithoutASyncAndTheNextSyncedOneCostsOne: writes
// that need no sync of their own commit in order and readable, none of
// them a durable commit; the next write that needs one costs one. The
// store's observer hears of that one batch only.
func TestUnsyncedWritesLandWithoutASyncAndTheNextSyncedOneCostsOne(t *testing.T) {
	eachTxns(t, unsyncedThenSynced[*writeTxn], unsyncedThenSynced[*pgTxn])
}

// eachTxns runs a writer test of each backend with its transactions, for
// a test that wraps them in a committer of its own.
func eachTxns(t *testing.T, onBadger func(*testing.T, rig[*writeTxn], txns[*writeTxn]), onPostgres func(*testing.T, rig[*pgTxn], txns[*pgTxn])) {
	eachWriter(t, func(t *testing.T, r rig[*writeTxn], _ func(*testing.T) store) {
		onBadger(t, r, badgerTxns{db: r.s.(*Store).db, j: r.s.(*Store).j})
	}, func(t *testing.T, r rig[*pgTxn], _ func(*testing.T) store) {
		onPostgres(t, r, pgTxns{pool: r.s.(*Postgres).pool, timeout: time.Minute, life: r.s.(*Postgres).life})
	})
}

func unsyncedThenSynced[T any](t *testing.T, r rig[T], db txns[T]) {
	c := &syncCounter[T]{txns: db}
	var mu sync.Mutex
	var observed []time.Duration // what the committer told of its durable batches
	w := newCommitter[T](c, func(d time.Duration) { mu.Lock(); observed = append(observed, d); mu.Unlock() })
	defer w.close()
	heard := func() []time.Duration { mu.Lock(); defer mu.Unlock(); return slices.Clone(observed) }
	for _, id := range []string{"u1", "u2", "u3"} {
		if err := w.doUnsynced(appendOrder(r, id)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.syncs.Load(); n != 0 {
		t.Fatalf("%d syncs for three unsynced writes", n)
	}
	if o := heard(); len(o) != 0 {
		t.Fatalf("the observer heard %v for writes nobody waits to be durable", o)
	}
	if err := w.do(appendOrder(r, "d")); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := w.doUnsynced(func(txn T) error { return r.get(txn, "order", &got) }); err != nil {
		t.Fatal(err)
	}
	if n := c.syncs.Load(); n != 1 || got != "u1,u2,u3,d" {
		t.Fatalf("%d syncs, order %q; want 1 and u1,u2,u3,d", n, got)
	}
	if o := heard(); len(o) != 1 || o[0] <= 0 {
		t.Fatalf("the observer heard %v; want one positive time, the durable batch's", o)
	}
}

// syncLog records, in order, the commits and syncs a committer asks of
// a backend.
type syncLog[T any] struct {
	txns[T]
	mu     sync.Mutex
	events []string
}

func (l *syncLog[T]) commit(txn T, durable bool) error {
	l.add("commit")
	return l.txns.commit(txn, durable)
}

func (l *syncLog[T]) sync() error {
	l.add("sync")
	return l.txns.sync()
}

// logged is a committer on db and the log of what it asks of db.
func logged[T any](db txns[T]) (*syncLog[T], *committer[T]) {
	l := &syncLog[T]{txns: db}
	return l, newCommitter[T](l, nil)
}

func (l *syncLog[T]) add(ev string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

// TestMixedWritesEndSyncedWithNoSyncWasted: however synced, unsynced and
// queued writes of many chats mix, every sync follows a commit (none is
// spent on nothing) and the last commit is synced too, though nobody
// waited for it.
func TestMixedWritesEndSyncedWithNoSyncWasted(t *testing.T) {
	eachTxns(t, mixedEndSynced[*writeTxn], mixedEndSynced[*pgTxn])
}

func mixedEndSynced[T any](t *testing.T, r rig[T], db txns[T]) {
	defer r.s.Close()
	l, w := logged(db)
	if err := w.doUnsynced(appendOrder(r, "u")); err != nil {
		t.Fatal(err)
	}
	if err := w.do(appendOrder(r, "d")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	queued := make(chan error, 8*40) // the queued writes' outcomes, heard on the writer
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				id := fmt.Sprintf("g%d-%d", g, i)
				var err error
				switch (g + i) % 3 {
				case 0:
					err = w.doUnsynced(appendOrder(r, id))
				case 1:
					err = w.do(appendOrder(r, id))
				default:
					w.queue(appendOrder(r, id), false, func(committed bool, err error) {
						if err == nil && !committed {
							err = errors.New(id + ": no error, not committed")
						}
						queued <- err
					})
				}
				if err != nil {
					t.Error(id, err)
				}
			}
		})
	}
	wg.Wait()
	w.close()
	close(queued)
	for err := range queued {
		if err != nil {
			t.Error(err)
		}
	}
	if len(l.events) < 2 {
		t.Fatalf("events %v", l.events)
	}
	for i, ev := range l.events {
		if ev == "sync" && (i == 0 || l.events[i-1] == "sync") {
			t.Fatalf("event %d of %d is a sync with no commit before it: %v", i, len(l.events), l.events[max(0, i-4):i+1])
		}
	}
	if last := l.events[len(l.events)-1]; last != "sync" {
		t.Fatalf("the last commit was left unsynced: %v", l.events[len(l.events)-2:])
	}
	var got string
	if err := r.s.Record(context.Background(), "test", "order", &got); err != nil || strings.Count(got, ",") != 2+8*40-1 {
		t.Fatalf("order holds %d writes, %v", strings.Count(got, ",")+1, err)
	}
}

// TestAnUnsyncedWriteIsSyncedWhenTheWriterIsIdle: doUnsynced returns
// before its sync, and with nothing else queued the writer syncs it at
// once rather than leaving it for the next write.
func TestAnUnsyncedWriteIsSyncedWhenTheWriterIsIdle(t *testing.T) {
	eachTxns(t, unsyncedSyncedWhenIdle[*writeTxn], unsyncedSyncedWhenIdle[*pgTxn])
}

func unsyncedSyncedWhenIdle[T any](t *testing.T, r rig[T], db txns[T]) {
	defer r.s.Close()
	g := &gatedSync[T]{txns: db, entered: make(chan struct{}, 1), release: make(chan struct{})}
	w := newCommitter[T](g, nil)
	defer w.close()
	defer close(g.release)
	if err := w.doUnsynced(appendOrder(r, "u")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.entered:
	case <-time.After(time.Minute): // a guard against hanging, not a measure
		t.Fatal("the idle writer did not sync the unsynced write")
	}
}

// TestUnsyncedWritesInARowShareTheNextSync: a write that comes while the
// idle writer waits to sync unsynced commits commits at once, without a
// sync first; the next durable write's one sync covers them all, and the
// committer syncs what is left unsynced when it closes. (The wait is
// lengthened past the test, so the idle sync never comes first.)
func TestUnsyncedWritesInARowShareTheNextSync(t *testing.T) {
	eachTxns(t, unsyncedInARow[*writeTxn], unsyncedInARow[*pgTxn])
}

func unsyncedInARow[T any](t *testing.T, r rig[T], db txns[T]) {
	defer r.s.Close()
	l, w := logged(db)
	w.idleSync = time.Hour // before any write: run reads it only once a commit is unsynced
	for _, id := range []string{"calls", "results"} {
		if err := w.doUnsynced(appendOrder(r, id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.do(appendOrder(r, "answer")); err != nil {
		t.Fatal(err)
	}
	if err := w.doUnsynced(appendOrder(r, "activity")); err != nil {
		t.Fatal(err)
	}
	w.close() // its goroutine has ended: the log is this test's to read
	if got, want := strings.Join(l.events, ","), "commit,commit,commit,sync,commit,sync"; got != want {
		t.Fatalf("the backend saw %s; want %s", got, want)
	}
}

// brokenSync fails a backend's syncs while broken is set.
type brokenSync[T any] struct {
	txns[T]
	broken atomic.Bool
}

func (b *brokenSync[T]) sync() error {
	if b.broken.Load() {
		return errors.New("disk gone")
	}
	return b.txns.sync()
}

// TestAWriteWhoseSyncFailsSaysSoAndTheNextSyncCoversIt: while the backend
// refuses syncs, a write that must be durable fails and says why (it is
// committed, readable, just not known to be durable); once the backend
// syncs again, the next write's sync covers everything before it, in
// order. (Badger's journal itself refuses to go on after a real failure:
// TestAJournalWhoseSyncFailedRefusesWritesUntilRestart.)
func TestAWriteWhoseSyncFailsSaysSoAndTheNextSyncCoversIt(t *testing.T) {
	eachTxns(t, syncFailsThenCovers[*writeTxn], syncFailsThenCovers[*pgTxn])
}

func syncFailsThenCovers[T any](t *testing.T, r rig[T], db txns[T]) {
	defer r.s.Close()
	b := &brokenSync[T]{txns: db}
	w := newCommitter[T](b, nil)
	defer w.close()
	b.broken.Store(true)
	if err := w.doUnsynced(appendOrder(r, "u")); err != nil {
		t.Fatal(err)
	}
	if err := w.do(appendOrder(r, "d")); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("a write whose sync failed: %v", err)
	}
	b.broken.Store(false)
	if err := w.do(appendOrder(r, "e")); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := r.s.Record(context.Background(), "test", "order", &got); err != nil || got != "u,d,e" {
		t.Fatalf("order %q, %v; want u,d,e", got, err)
	}
}

// gatedSync holds a backend's syncs: each waits for release, then fails
// with fail if set. A sync says it began on entered while entered has room:
// after a failed one the writer syncs again each idleSync, and a tell no
// one reads must not hold it (and the test's close) for ever.
type gatedSync[T any] struct {
	txns[T]
	entered chan struct{}
	release chan struct{}
	fail    error
}

func (g *gatedSync[T]) sync() error {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
	if g.fail != nil {
		return g.fail
	}
	return g.txns.sync()
}

// TestAQueuedWriteIsHeardOnlyAfterItsSync: queue returns at once; its
// write is committed (readable) while the sync is held, and then hears of
// it only after the sync, committed, with the sync's outcome.
func TestAQueuedWriteIsHeardOnlyAfterItsSync(t *testing.T) {
	eachTxns(t, queuedAfterSync[*writeTxn], queuedAfterSync[*pgTxn])
}

type outcome struct {
	committed bool
	err       error
}

func queuedAfterSync[T any](t *testing.T, r rig[T], db txns[T]) {
	defer r.s.Close()
	for _, fail := range []error{nil, errors.New("disk gone")} {
		g := &gatedSync[T]{txns: db, entered: make(chan struct{}, 1), release: make(chan struct{}), fail: fail}
		w := newCommitter[T](g, nil)
		heard := make(chan outcome, 2)
		w.queue(appendOrder(r, fmt.Sprint(fail)), false, func(committed bool, err error) { heard <- outcome{committed, err} })
		<-g.entered
		var got string
		if err := r.s.Record(context.Background(), "test", "order", &got); err != nil || !strings.HasSuffix(got, fmt.Sprint(fail)) {
			t.Fatalf("before the sync the record is %q, %v", got, err)
		}
		select {
		case o := <-heard:
			t.Fatalf("then heard %+v while the sync was held", o)
		default:
		}
		close(g.release)
		if o := <-heard; !o.committed || !errors.Is(o.err, fail) {
			t.Fatalf("then heard %+v, want committed with %v", o, fail)
		}
		// Not a measure: a few idle intervals, so that after the failed
		// sync the writer syncs again before it closes (a gate that held
		// the second sync hung here).
		time.Sleep(5 * w.idleSync)
		w.close()
		if len(heard) != 0 {
			t.Fatalf("then heard twice: %+v", <-heard)
		}
	}
}

// TestAQueuedWriteThatFailsIsHeardUncommitted: a queued write whose
// function fails is not committed, and then hears so with its error; on a
// closed committer then hears ErrClosed at once.
func TestAQueuedWriteThatFailsIsHeardUncommitted(t *testing.T) {
	eachWriter(t, queuedFails[*writeTxn], queuedFails[*pgTxn])
}

func queuedFails[T any](t *testing.T, r rig[T], _ func(*testing.T) store) {
	defer r.s.Close()
	bad := errors.New("refused")
	heard := make(chan outcome, 1)
	r.w.queue(func(txn T) error {
		if err := r.put(txn, "half", "{}"); err != nil {
			return err
		}
		return bad
	}, false, func(committed bool, err error) { heard <- outcome{committed, err} })
	if o := <-heard; o.committed || !errors.Is(o.err, bad) {
		t.Fatalf("a failed write: then heard %+v, want not committed with %v", o, bad)
	}
	var v any
	if err := r.s.Record(context.Background(), "test", "half", &v); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a failed queued write left its record: %v", err)
	}
	r.w.close()
	r.w.queue(func(T) error { return nil }, false, func(committed bool, err error) { heard <- outcome{committed, err} })
	select {
	case o := <-heard:
		if o.committed || !errors.Is(o.err, ErrClosed) {
			t.Fatalf("on a closed committer then heard %+v", o)
		}
	default:
		t.Fatal("on a closed committer then was not called at once")
	}
}

// TestUnsyncedSnapshotsAndActivityTakeNoSync: a snapshot (with a fold's
// item in the same write) and an activity saved unsynced are read back at
// once without a sync of their own; the next durable write costs one and
// covers them.
func TestUnsyncedSnapshotsAndActivityTakeNoSync(t *testing.T) {
	eachTxns(t, func(t *testing.T, r rig[*writeTxn], db txns[*writeTxn]) {
		st := r.s.(*Store)
		c := &syncCounter[*writeTxn]{txns: db}
		st.w.close()
		st.w = newCommitter[*writeTxn](c, nil)
		unsyncedSnapshotAndActivity(t, st, &c.syncs)
	}, func(t *testing.T, r rig[*pgTxn], db txns[*pgTxn]) {
		st := r.s.(*Postgres)
		c := &syncCounter[*pgTxn]{txns: db}
		st.w.close()
		st.w = newCommitter[*pgTxn](c, nil)
		unsyncedSnapshotAndActivity(t, st, &c.syncs)
	})
}

type unsyncedSaver interface {
	store
	SaveSnapshotUnsynced(ctx context.Context, chatID string, snap Snapshot, acts ...Activity) error
	AppendActivityUnsynced(ctx context.Context, chatID string, a Activity) (Activity, error)
}

func unsyncedSnapshotAndActivity(t *testing.T, s unsyncedSaver, syncs *atomic.Int32) {
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateChat(ctx, Chat{ID: "u", Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "u", chat.Message{Role: chat.RoleUser, Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	before := syncs.Load()
	if err := s.SaveSnapshotUnsynced(ctx, "u", Snapshot{FirstKeptSeq: 2, Summary: "folded"}, Activity{Type: chat.EventCompacted, Data: []byte(`{"first_kept_seq":2}`)}); err != nil {
		t.Fatal(err)
	}
	a, err := s.AppendActivityUnsynced(ctx, "u", Activity{Type: chat.EventToolsLoaded})
	if err != nil || a.ID != 2 || a.AfterSeq != 1 {
		t.Fatalf("activity %+v, %v", a, err)
	}
	if n := syncs.Load() - before; n != 0 {
		t.Fatalf("%d syncs for an unsynced snapshot and activity", n)
	}
	snap, ok, err := s.LoadSnapshot(ctx, "u")
	if err != nil || !ok || snap.FirstKeptSeq != 2 || snap.Summary != "folded" {
		t.Fatalf("snapshot read back: %+v %v %v", snap, ok, err)
	}
	page, _, err := s.ActivityPage(ctx, "u", 0, 10)
	if err != nil || len(page) != 2 || page[0].Type != chat.EventCompacted || page[0].AfterSeq != 1 || string(page[0].Data) != `{"first_kept_seq":2}` || page[1].Type != chat.EventToolsLoaded {
		t.Fatalf("activity read back: %+v, %v", page, err)
	}
	if _, err := s.Append(ctx, "u", chat.Message{Role: chat.RoleAssistant, Content: "ok"}); err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load() - before; n != 1 {
		t.Fatalf("%d syncs for the durable append after them, want 1", n)
	}
}
