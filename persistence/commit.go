package persistence

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ErrClosed is returned for a write submitted after Close.
var ErrClosed = errors.New("store closed")

// maxBatch bounds how many writes share one transaction and one sync.
const maxBatch = 256

// txns is what the committer needs of a database (Badger's or Postgres's
// transactions, T): begin one, commit or drop it, and tell a write that
// does not fit beside the others (tooBig) from one that failed. commit
// syncs when sync says so; a commit that does not is still ordered
// before every later one, so the next synced commit covers it.
type txns[T any] interface {
	begin() (T, error)
	commit(txn T, sync bool) error
	discard(T)
	tooBig(err error) bool
}

// write is one caller's part of a batch: fn runs inside the shared
// transaction and may run more than once (a batch is rebuilt without a
// write that failed), so it must set, not accumulate, what it reports.
// unsynced: the write need not be durable on its own (see doUnsynced).
type write[T any] struct {
	fn       func(txn T) error
	done     chan error
	unsynced bool
}

// committer is group commit: one goroutine takes every write of every chat
// and commits those waiting together in one transaction, so one sync covers
// them all. It does not linger for company: a lone write commits at
// once (no added latency), and under load the writes that arrive during a
// sync make up the next batch, up to maxBatch. Being the only writer, it
// also means the database never sees two update transactions conflict.
type committer[T any] struct {
	db txns[T]
	in chan write[T]

	mu     sync.RWMutex // guards closed against a send on a closed in
	closed bool
	wg     sync.WaitGroup
}

func newCommitter[T any](db txns[T]) *committer[T] {
	c := &committer[T]{db: db, in: make(chan write[T], maxBatch)}
	c.wg.Add(1)
	go c.run()
	return c
}

// do runs fn in the next batch and returns once that batch is synced (or
// failed). Once queued, a write is waited for whatever the caller's
// context says: returning early would leave it unknown whether it landed.
func (c *committer[T]) do(fn func(txn T) error) error { return c.submit(write[T]{fn: fn}) }

// doUnsynced is do for a write that need not survive a crash of the
// machine on its own: it returns once committed (readable, in order), and
// is synced by the next write that needs a sync, whose sync covers it. A
// batch of such writes alone costs no sync.
func (c *committer[T]) doUnsynced(fn func(txn T) error) error {
	return c.submit(write[T]{fn: fn, unsynced: true})
}

func (c *committer[T]) submit(w write[T]) error {
	w.done = make(chan error, 1)
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return ErrClosed
	}
	c.in <- w
	c.mu.RUnlock()
	return <-w.done
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
	for w := range c.in {
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
}

// commit commits batch in as few transactions as fit, in order. A write
// whose fn fails gets its error and the rest go on without it; a write
// that does not fit beside the others starts the next transaction; a
// failed commit fails every write it carried.
func (c *committer[T]) commit(batch []write[T]) {
	for len(batch) > 0 {
		n, failed, err := c.fill(batch)
		if failed {
			batch[n].done <- err
			batch = append(batch[:n:n], batch[n+1:]...)
			continue
		}
		for _, w := range batch[:n] {
			w.done <- err
		}
		batch = batch[n:]
	}
}

// fill runs the writes of batch in one transaction until one fails or the
// transaction is full, and commits the n before it, with a sync when any
// of them needs one. failed reports that
// batch[n] failed with err and nothing was committed (the transaction is
// dropped, so none of its partial writes lands); else err is the commit's,
// or the failure to begin one, which fails the whole batch.
func (c *committer[T]) fill(batch []write[T]) (n int, failed bool, err error) {
	txn, err := c.db.begin()
	if err != nil {
		return len(batch), false, fmt.Errorf("begin a transaction: %w", err)
	}
	defer func() { c.db.discard(txn) }()
	for n < len(batch) {
		err := batch[n].fn(txn)
		if c.db.tooBig(err) && n > 0 {
			// Rerun in a fresh transaction: drop this one and commit the
			// writes before it alone.
			c.db.discard(txn)
			if txn, err = c.db.begin(); err != nil {
				return n, false, fmt.Errorf("begin a transaction: %w", err)
			}
			for _, w := range batch[:n] {
				if err := w.fn(txn); err != nil {
					return 0, true, err
				}
			}
			break
		}
		if err != nil {
			return n, true, err
		}
		n++
	}
	durable := slices.ContainsFunc(batch[:n], func(w write[T]) bool { return !w.unsynced })
	if err := c.db.commit(txn, durable); err != nil {
		return n, false, fmt.Errorf("commit %d writes: %w", n, err)
	}
	return n, false, nil
}
