package persistence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned for a write submitted after Close.
var ErrClosed = errors.New("store closed")

// maxBatch bounds how many writes share one transaction and one sync.
const maxBatch = 256

// idleSync is how long the writer, idle with unsynced commits, waits for
// another write before it syncs them. A running turn's unsynced writes
// come in runs — the model's tool calls, then the results of a tool that
// answered at once — and a sync begun between two of them held the second
// for the whole sync, with the session's mailbox waiting on it (a tool
// round's three writes took three syncs in a row: BENCHMARKS.md,
// "Twenty-third pass"). A write that comes meanwhile commits at once, and
// one that must be durable syncs them all.
const idleSync = 2 * time.Millisecond

// txns is what the committer needs of a database (Badger's or Postgres's
// transactions, T): begin one, commit or drop it, sync, tell a write
// that does not fit beside the others (tooBig) from one that failed, and
// name a write's or a commit's failure in a transaction (failed: Postgres
// says a lost connection's Unavailable).
// commit makes a transaction readable, ordered before every later one;
// sync then makes every commit so far durable (Badger's journal and
// Postgres's WAL are each one log, written in commit order). durable
// tells a database whose commit is its sync (Postgres) that this one must
// be: its sync has nothing left to do.
type txns[T any] interface {
	begin() (T, error)
	commit(txn T, durable bool) error
	sync() error
	discard(T)
	tooBig(err error) bool
	failed(txn T, err error) error
}

// write is one caller's part of a batch: fn runs inside the shared
// transaction and may run more than once (a batch is rebuilt without a
// write that failed), so it must set, not accumulate, what it reports.
// unsynced: the write need not be durable on its own (see doUnsynced).
// then hears the outcome once, on the committer's goroutine; committed
// says the write is readable in the log even when err says its sync
// failed.
type write[T any] struct {
	fn        func(txn T) error
	then      func(committed bool, err error)
	unsynced  bool
	committed bool
}

// finish reports the write's outcome.
func (w *write[T]) finish(err error) { w.then(w.committed, err) }

// committer is group commit: one goroutine takes every write of every chat
// and commits those waiting together in one transaction, so one sync covers
// them all. It does not linger for company: a lone write commits at
// once (no added latency), and under load the writes that arrive during a
// sync make up the next batch, up to maxBatch. Being the only writer, it
// also means the database never sees two update transactions conflict.
type committer[T any] struct {
	db txns[T]
	in chan write[T]
	// unsynced: a commit since the last sync, only touched by run.
	unsynced bool
	// observe, when set, hears how long each batch that holds a durable
	// write took from its commit to the end of its sync: what the disk
	// (or Postgres's COMMIT) adds to every write that waits to be durable.
	observe func(time.Duration)
	// idleSync is the wait before an idle sync (the constant; a test
	// lengthens it).
	idleSync time.Duration

	mu     sync.RWMutex // guards closed against a send on a closed in
	closed bool
	wg     sync.WaitGroup
	// unfinished counts the writes queued whose callers are not yet told
	// their outcome: what a Close that gives up leaves failing.
	unfinished atomic.Int64
}

func newCommitter[T any](db txns[T], observe func(time.Duration)) *committer[T] {
	c := &committer[T]{db: db, in: make(chan write[T], maxBatch), observe: observe, idleSync: idleSync}
	c.wg.Add(1)
	go c.run()
	return c
}

// do runs fn in the next batch and returns once that batch is synced (or
// failed). Once queued, a write is waited for whatever the caller's
// context says: returning early would leave it unknown whether it landed.
func (c *committer[T]) do(fn func(txn T) error) error { return c.wait(fn, false) }

// doUnsynced is do for a write that need not survive a crash of the
// machine on its own: it returns once committed (readable, in order),
// without waiting for a sync. It is synced once the committer has had
// nothing to do for idleSync, or else with the next batch that holds a
// synced write, whichever comes first.
func (c *committer[T]) doUnsynced(fn func(txn T) error) error { return c.wait(fn, true) }

// wait queues fn and waits for its outcome.
func (c *committer[T]) wait(fn func(txn T) error, unsynced bool) error {
	_, err := waitFor(func(then func(bool, error)) { c.queue(fn, unsynced, then) })
	return err
}

// queue runs fn in the next batch without waiting, for a caller that must
// not hold its goroutine for the sync (a session's mailbox): then hears
// the outcome once — as do returns it, with whether the write was
// committed — on the committer's goroutine, so it must not block; on a
// closed committer it hears ErrClosed at once.
func (c *committer[T]) queue(fn func(txn T) error, unsynced bool, then func(committed bool, err error)) {
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		then(false, ErrClosed)
		return
	}
	c.unfinished.Add(1)
	c.in <- write[T]{fn: fn, then: then, unsynced: unsynced}
	c.mu.RUnlock()
}

// queueResult queues fn on c (see queue) for a caller whose write yields
// res: then hears res, or the zero value when the write was not committed,
// with wrap(err) when anything failed. An ended ctx fails it at once.
func queueResult[T, R any](ctx context.Context, c *committer[T], fn func(txn T) error, unsynced bool, res R,
	wrap func(error) error, then func(R, error)) {
	var zero R
	if err := ctx.Err(); err != nil {
		then(zero, err)
		return
	}
	c.queue(fn, unsynced, func(committed bool, err error) {
		if !committed {
			res = zero
		}
		if err != nil {
			err = wrap(err)
		}
		then(res, err)
	})
}

// waitFor starts an operation that reports once through then, and
// returns that report.
func waitFor[R any](start func(then func(R, error))) (R, error) {
	type outcome struct {
		res R
		err error
	}
	done := make(chan outcome, 1)
	start(func(res R, err error) { done <- outcome{res, err} })
	o := <-done
	return o.res, o.err
}

// close stops taking writes and returns once every queued one is committed.
func (c *committer[T]) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.in)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *committer[T]) run() {
	defer c.wg.Done()
	batch := make([]write[T], 0, maxBatch)
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	for {
		w, ok := c.next(idle)
		if !ok {
			break
		}
		batch = append(batch[:0], w)
	drain:
		for len(batch) < maxBatch {
			select {
			case w, ok := <-c.in:
				if !ok {
					break drain
				}
				batch = append(batch, w)
			default:
				break drain
			}
		}
		c.commit(batch)
	}
	if c.unsynced {
		_ = c.sync() // closing: what was committed is synced before Close returns
	}
}

// next waits for the next write; ok is false once the committer is closed
// and drained. With unsynced commits it waits idleSync at most, then syncs
// them rather than leave them for the next synced write (a failure is left
// for that one's sync to meet and report), and waits on.
func (c *committer[T]) next(idle *time.Timer) (w write[T], ok bool) {
	if c.unsynced {
		idle.Reset(c.idleSync)
		select {
		case w, ok = <-c.in:
			idle.Stop()
			return w, ok
		case <-idle.C:
			_ = c.sync()
		}
	}
	w, ok = <-c.in
	return w, ok
}

// sync syncs every commit so far.
func (c *committer[T]) sync() error {
	if err := c.db.sync(); err != nil {
		return err
	}
	c.unsynced = false
	return nil
}

// commit commits batch in as few transactions as fit, in order. A write
// whose fn fails gets its error and the rest go on without it; a write
// that does not fit beside the others starts the next transaction; a
// failed commit fails every write it carried.
func (c *committer[T]) commit(batch []write[T]) {
	for len(batch) > 0 {
		n, failed, err := c.fill(batch)
		if failed {
			c.finish(&batch[n], err)
			batch = append(batch[:n:n], batch[n+1:]...)
			continue
		}
		for i := range batch[:n] {
			c.finish(&batch[i], err)
		}
		batch = batch[n:]
	}
}

// finish reports w's outcome; w is unfinished until its caller is told,
// which may wait on the server (Postgres asks whether a failed write's
// chat moved).
func (c *committer[T]) finish(w *write[T], err error) {
	w.finish(err)
	c.unfinished.Add(-1)
}

// batchError is the failure of a whole batch (its begin, commit or sync),
// which every write it carried hears: the same value, so a store can tell
// the writes of one failed batch (Postgres asks the server once whether
// their chats moved, not once a write).
type batchError struct{ err error }

func (e *batchError) Error() string { return e.err.Error() }
func (e *batchError) Unwrap() error { return e.err }

// fill runs the writes of batch in one transaction until one fails or the
// transaction is full, and commits the n before it, then syncs (covering
// what was committed unsynced before) when any of them needs it,
// marking each write committed in between. failed reports that
// batch[n] failed with err and nothing was committed (the transaction is
// dropped, so none of its partial writes lands); else err is the commit's,
// a sync's, or the failure to begin one, which fails the whole batch.
func (c *committer[T]) fill(batch []write[T]) (n int, failed bool, err error) {
	txn, err := c.db.begin()
	if err != nil {
		return len(batch), false, &batchError{fmt.Errorf("begin a transaction: %w", err)}
	}
	defer func() { c.db.discard(txn) }()
	for n < len(batch) {
		err := batch[n].fn(txn)
		if c.db.tooBig(err) && n > 0 {
			// Rerun in a fresh transaction: drop this one and commit the
			// writes before it alone.
			c.db.discard(txn)
			if txn, err = c.db.begin(); err != nil {
				return n, false, &batchError{fmt.Errorf("begin a transaction: %w", err)}
			}
			for _, w := range batch[:n] {
				if err := w.fn(txn); err != nil {
					return 0, true, c.db.failed(txn, err)
				}
			}
			break
		}
		if err != nil {
			return n, true, c.db.failed(txn, err)
		}
		n++
	}
	durable := slices.ContainsFunc(batch[:n], func(w write[T]) bool { return !w.unsynced })
	start := time.Now()
	if err := c.db.commit(txn, durable); err != nil {
		return n, false, &batchError{fmt.Errorf("commit %d writes: %w", n, c.db.failed(txn, err))}
	}
	c.unsynced = true
	for i := range batch[:n] {
		batch[i].committed = true
	}
	if durable {
		if err := c.sync(); err != nil {
			return n, false, &batchError{fmt.Errorf("sync %d writes: %w", n, err)}
		}
		if c.observe != nil {
			c.observe(time.Since(start))
		}
	}
	return n, false, nil
}
