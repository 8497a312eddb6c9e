package persistence

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentd/agentd/chat"
)

// hold submits a write that blocks the writer until the returned release
// is called, so the writes queued meanwhile form the next batch.
func hold(t *testing.T, s *Store) (release func(), done <-chan error) {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- s.update(context.Background(), func(txn *badger.Txn) error {
			select {
			case <-entered:
			default:
				close(entered)
				<-gate
			}
			return txn.Set([]byte("k/test/hold"), []byte("{}"))
		})
	}()
	<-entered
	return func() { close(gate) }, errc
}

// queue submits fn from a goroutine and returns once it waits in the
// writer's queue (it cannot have run: the writer is held).
func queue(t *testing.T, s *Store, fn func(txn *badger.Txn) error) <-chan error {
	t.Helper()
	before := len(s.w.in)
	errc := make(chan error, 1)
	go func() { errc <- s.update(context.Background(), fn) }()
	for len(s.w.in) == before {
		runtime.Gosched()
	}
	return errc
}

// appendOrder appends id to the comma list at key "k/test/order".
func appendOrder(id string) func(txn *badger.Txn) error {
	return func(txn *badger.Txn) error {
		var got string
		if err := getTxn(txn, recordKey("test", "order"), &got); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if got != "" {
			got += ","
		}
		val, err := encode(got + id)
		if err != nil {
			return err
		}
		return txn.Set(recordKey("test", "order"), val)
	}
}

func TestABatchRunsItsWritesInTheOrderTheyCame(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	release, held := hold(t, s)
	var waits []<-chan error
	for i := range 10 {
		waits = append(waits, queue(t, s, appendOrder(fmt.Sprint(i))))
	}
	release()
	for _, w := range append(waits, held) {
		if err := <-w; err != nil {
			t.Fatal(err)
		}
	}
	var got string
	if err := s.Record(context.Background(), "test", "order", &got); err != nil {
		t.Fatal(err)
	}
	if got != "0,1,2,3,4,5,6,7,8,9" {
		t.Fatalf("order = %q", got)
	}
}

func TestConcurrentChatsEachKeepTheirLogInOrder(t *testing.T) {
	s, dir := openTemp(t)
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
	s = reopen(t, s, dir)
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
}

func TestAWriteThatFailsFailsAloneAndLandsNothing(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	release, held := hold(t, s)
	a := queue(t, s, appendOrder("a"))
	bad := queue(t, s, func(txn *badger.Txn) error {
		if err := txn.Set(recordKey("test", "half"), []byte("{}")); err != nil {
			return err
		}
		return errors.New("refused")
	})
	b := queue(t, s, appendOrder("b"))
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
	if err := s.Record(context.Background(), "test", "order", &got); err != nil || got != "a,b" {
		t.Fatalf("order = %q, %v", got, err)
	}
	if err := s.Record(context.Background(), "test", "half", new(any)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("half of the failed write landed: %v", err)
	}
}

func TestAFailedCommitFailsEveryWriteOfItsBatch(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	release, held := hold(t, s)
	// The batch's first write reads x, then waits while x changes beneath
	// it: Badger refuses the commit as a conflict.
	read, gate := make(chan struct{}), make(chan struct{})
	first := queue(t, s, func(txn *badger.Txn) error {
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
		rest = append(rest, queue(t, s, appendOrder(fmt.Sprint(i))))
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
	s, dir := openTemp(t)
	release, held := hold(t, s)
	var waits []<-chan error
	for i := range 5 {
		waits = append(waits, queue(t, s, appendOrder(fmt.Sprint(i))))
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	release()
	for _, w := range append(waits, held) {
		if err := <-w; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(context.Background(), "c", chat.Message{Content: "late"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a write after Close got %v", err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
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
	release, held := hold(t, s)
	batch := make([]chat.Message, 6000)
	for i := range batch {
		batch[i] = chat.Message{Role: chat.RoleUser, Content: "a message of some length"}
	}
	var waits []<-chan error
	for i := range 4 {
		waits = append(waits, queue(t, s, func(txn *badger.Txn) error {
			for j := range batch {
				if err := txn.Set(msgKey(fmt.Sprint("big-", i), int64(j+1)), []byte("{}")); err != nil {
					return err
				}
			}
			return appendOrder(fmt.Sprint(i))(txn)
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
