package persistence

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentd/agentd/chat"
)

// smallFiles keeps a copied store small: the copy writes out the value
// log's preallocated size.
var smallFiles = Options{vlogFile: 1 << 20}

// killed copies the files of the open store in dir, as a killed process
// leaves them (what it wrote is in the kernel's page cache), and returns
// the copy's folder. It first waits for Badger to flush the memtables it
// replayed at Open (one memtable log left): a copy taken meanwhile could
// hold a MANIFEST naming a table the copy missed, which no kill leaves.
func killed(t *testing.T, dir string) string {
	t.Helper()
	for range 3000 {
		mems, err := filepath.Glob(filepath.Join(dir, "*.mem"))
		if err != nil {
			t.Fatal(err)
		}
		if len(mems) <= 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := filepath.Join(t.TempDir(), "killed")
	if err := os.CopyFS(out, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return out
}

func openBadger(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, smallFiles)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// contents returns chat id's messages' contents, in order.
func contents(t *testing.T, s *Store, id string) []string {
	t.Helper()
	msgs, err := s.Messages(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Fatalf("message %d has seq %d", i, m.Seq)
		}
		out = append(out, m.Content)
	}
	return out
}

func say(t *testing.T, s *Store, id string, words ...string) {
	t.Helper()
	for _, w := range words {
		if _, err := s.Append(context.Background(), id, chat.Message{Role: chat.RoleUser, Content: w}); err != nil {
			t.Fatal(err)
		}
	}
}

// chatSaying opens a store in a new folder with chat "a" holding words,
// and returns the folder and the store.
func chatSaying(t *testing.T, words ...string) (string, *Store) {
	t.Helper()
	dir := t.TempDir()
	s := openBadger(t, dir)
	if err := s.CreateChat(context.Background(), Chat{ID: "a", Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	say(t, s, "a", words...)
	return dir, s
}

// TestCommitsBadgerLostComeBackFromTheJournal: Badger's files as they were
// after the first message, beside the journal as it is after three (what
// a machine that failed before Badger's log reached the disk leaves), open
// with all three messages and the snapshot saved with the last, and the
// log goes on from there.
func TestCommitsBadgerLostComeBackFromTheJournal(t *testing.T) {
	ctx := context.Background()
	dir, s := chatSaying(t, "one")
	early := killed(t, dir)
	say(t, s, "a", "two")
	if _, err := appendWithSnapshot(ctx, s, "a", func(last int64) Snapshot { return Snapshot{Summary: "so far", LastSeqSent: last} }, nil,
		chat.Message{Role: chat.RoleAssistant, Content: "three"}); err != nil {
		t.Fatal(err)
	}
	withJournalOf(t, early, killed(t, dir))

	s2 := openBadger(t, early)
	if got := contents(t, s2, "a"); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("log after recovery: %q", got)
	}
	if snap, ok, err := s2.LoadSnapshot(ctx, "a"); err != nil || !ok || snap.Summary != "so far" || snap.LastSeqSent != 3 {
		t.Fatalf("snapshot after recovery: %+v, %v, %v", snap, ok, err)
	}
	say(t, s2, "a", "four")
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if frames := journalFrames(t, early); frames != 0 {
		t.Fatalf("a closed store left %d frames to replay", frames)
	}
	if got := contents(t, openBadger(t, early), "a"); !slices.Equal(got, []string{"one", "two", "three", "four"}) {
		t.Fatalf("log after a clean reopen: %q", got)
	}
}

// withJournalOf puts the journal of the store copied to late beside the
// Badger files copied to early: what a machine that failed leaves when
// Badger's log had reached the disk as of early, the journal as of late.
func withJournalOf(t *testing.T, early, late string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(early, journalFolder)); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(early, journalFolder), os.DirFS(filepath.Join(late, journalFolder))); err != nil {
		t.Fatal(err)
	}
}

// journalFrames counts the frames Open would replay in dir.
func journalFrames(t *testing.T, dir string) int {
	t.Helper()
	j, frames, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.closeFiles(); err != nil {
		t.Fatal(err)
	}
	return len(frames)
}

// TestATornJournalTailIsDroppedAndTheJournalGoesOn: a frame cut short at the
// journal's end (a write the machine did not finish, never synced) is not
// replayed; the frames before it are, and the journal goes on in its other
// file, so the torn bytes are never read again: a second crash later opens
// with every message.
func TestATornJournalTailIsDroppedAndTheJournalGoesOn(t *testing.T) {
	dir, s := chatSaying(t, "one", "two")
	frame := sealed(s.j.salt, appendOp(nil, opSet, msgKey("a", 3), []byte("never acknowledged")))
	if _, err := s.j.files[s.j.cur].WriteAt(frame[:len(frame)-3], s.j.off); err != nil {
		t.Fatal(err)
	}
	first := killed(t, dir)

	s2 := openBadger(t, first)
	if got := contents(t, s2, "a"); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("log after the torn frame: %q", got)
	}
	if s2.j.epoch != 2 {
		t.Fatalf("the recovered journal is in epoch %d, want 2 (restarted in the other file)", s2.j.epoch)
	}
	say(t, s2, "a", "three")
	if got := contents(t, openBadger(t, killed(t, first)), "a"); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("log after a second crash: %q", got)
	}
}

// TestACheckpointLeavesLittleToReplay: once a journal file fills, a sync
// syncs Badger and starts the other file, so a crash replays only what
// came after; and what came before is all there.
func TestACheckpointLeavesLittleToReplay(t *testing.T) {
	dir, s := chatSaying(t)
	words := strings.Repeat("a long enough message to fill the journal soon. ", 20)
	n := 0
	for s.j.epoch == 1 {
		if n++; n > 10_000 {
			t.Fatalf("no checkpoint after %d messages of %d bytes", n, len(words))
		}
		say(t, s, "a", fmt.Sprint(n, words))
	}
	crash := killed(t, dir)
	if frames := journalFrames(t, crash); frames >= n/2 {
		t.Fatalf("%d frames to replay after a checkpoint, of %d messages", frames, n)
	}
	got := contents(t, openBadger(t, crash), "a")
	if len(got) != n || !strings.HasPrefix(got[n-1], fmt.Sprint(n, "a long")) {
		t.Fatalf("%d messages after the crash, want %d", len(got), n)
	}
}

// TestACommitBadgerRefusedIsNotReplayed: the journal's frame of a commit
// Badger refused (a conflict here) is taken back, so a crash after it
// does not bring that write back, and the write after it takes its place
// in the journal: Badger's files from before both, with the journal from
// after, open with the second write alone.
func TestACommitBadgerRefusedIsNotReplayed(t *testing.T) {
	dir := t.TempDir()
	s := openBadger(t, dir)
	if err := s.PutRecord(context.Background(), "test", "before", "yes"); err != nil {
		t.Fatal(err)
	}
	early := killed(t, dir)
	read, gate := make(chan struct{}), make(chan struct{})
	refused := make(chan error, 1)
	go func() {
		refused <- s.w.do(func(txn *writeTxn) error {
			if _, err := txn.Get([]byte("x")); err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
				return err
			}
			close(read)
			<-gate
			return txn.Set(recordKey("test", "refused"), []byte(`{"v":1,"d":"no"}`))
		})
	}()
	<-read
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("x"), []byte("2")) }); err != nil {
		t.Fatal(err)
	}
	close(gate)
	if err := <-refused; !errors.Is(err, badger.ErrConflict) {
		t.Fatalf("the write got %v, want Badger's conflict", err)
	}
	if err := s.PutRecord(context.Background(), "test", "after", "yes"); err != nil {
		t.Fatal(err)
	}
	withJournalOf(t, early, killed(t, dir))
	s2 := openBadger(t, early)
	var v string
	if err := s2.Record(context.Background(), "test", "refused", &v); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused write after recovery: %q, %v", v, err)
	}
	if err := s2.Record(context.Background(), "test", "after", &v); err != nil || v != "yes" {
		t.Fatalf("the write after the refused one: %q, %v", v, err)
	}
}

// TestAJournalWhoseSyncFailedRefusesWritesUntilRestart: after one failed
// fdatasync nothing can vouch for the pages before it, so the write that
// met it and every later one fail, saying why, and the store reports its
// failure (for /healthz), while reads go on; a restart replays what the
// disk holds and takes writes again.
func TestAJournalWhoseSyncFailedRefusesWritesUntilRestart(t *testing.T) {
	ctx := context.Background()
	dir, s := chatSaying(t, "one")
	works := s.j.datasync
	s.j.datasync = func(*os.File) error { return errors.New("disk gone") }
	if _, err := s.Append(ctx, "a", chat.Message{Role: chat.RoleUser, Content: "two"}); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("the write whose sync failed: %v", err)
	}
	s.j.datasync = works
	_, err := s.Append(ctx, "a", chat.Message{Role: chat.RoleUser, Content: "three"})
	if err == nil || !strings.Contains(err.Error(), "until agentd restarts") || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("a write after the failed sync: %v", err)
	}
	if got := contents(t, s, "a"); len(got) == 0 || got[0] != "one" {
		t.Fatalf("reads after the failed sync: %q", got)
	}
	if err := s.Failure(); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("the store's failure: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openBadger(t, dir)
	if err := s2.Failure(); err != nil {
		t.Fatalf("a restarted store's failure: %v", err)
	}
	say(t, s2, "a", "four")
	if got := contents(t, s2, "a"); got[0] != "one" || got[len(got)-1] != "four" || slices.Contains(got, "three") {
		t.Fatalf("log after the restart: %q", got)
	}
}

// TestAStoreWhoseJournalCannotBeMadeSaysSo: a file where the journal's
// folder goes fails Open with the journal named, and leaves Badger closed
// (a second Open gets past Badger's lock to the same error).
func TestAStoreWhoseJournalCannotBeMadeSaysSo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, journalFolder), []byte("in the way"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := Open(dir, smallFiles); err == nil || !strings.Contains(err.Error(), "journal") {
			t.Fatalf("Open with a file in the journal's place: %v", err)
		}
	}
}

// sealed is the frame of ops under salt, its header first.
func sealed(salt [8]byte, ops []byte) []byte {
	h := frameHead(salt, ops)
	return append(h[:], ops...)
}

// TestReadFramesEndsAtTheFirstFrameThatDoesNotCheck: the journal's reader
// takes frames up to the first that is cut short, altered, salted with
// another epoch's salt, or empty, and none after it.
func TestReadFramesEndsAtTheFirstFrameThatDoesNotCheck(t *testing.T) {
	salt, other := [8]byte{1, 2, 3}, [8]byte{9}
	frame := func(salt [8]byte, key, val string) []byte {
		return sealed(salt, appendOp(nil, opSet, []byte(key), []byte(val)))
	}
	f1, f2 := frame(salt, "k1", "v1"), frame(salt, "k2", "v2")
	altered := slices.Clone(f2)
	altered[len(altered)-1] ^= 1
	join := func(parts ...[]byte) []byte { return slices.Concat(parts...) }
	for _, tc := range []struct {
		name string
		data []byte
		want int
	}{
		{"two whole frames", join(f1, f2), 2},
		{"two, then zeros", join(f1, f2, make([]byte, 64)), 2},
		{"the second cut short", join(f1, f2[:len(f2)-2]), 1},
		{"the second altered", join(f1, altered, f1), 1},
		{"the second of another salt", join(f1, frame(other, "k2", "v2"), f1), 1},
		{"a zero length", join(f1, make([]byte, frameHeader), f1), 1},
		{"a length past the end", join(f1, []byte{0xff, 0xff, 0, 0, 1, 2, 3, 4}), 1},
		{"nothing", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frames, end := readFrames(tc.data, salt)
			if len(frames) != tc.want {
				t.Fatalf("%d frames, want %d", len(frames), tc.want)
			}
			if wantEnd := []int64{0, int64(len(f1)), int64(len(f1) + len(f2))}[tc.want]; end != wantEnd {
				t.Fatalf("end %d, want %d", end, wantEnd)
			}
			for i, ops := range frames {
				var keys []string
				if err := eachOp(ops, func(op byte, key, val []byte) error {
					keys = append(keys, fmt.Sprintf("%d %s=%s", op, key, val))
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprintf("%d k%d=v%d", opSet, i+1, i+1); len(keys) != 1 || keys[0] != want {
					t.Fatalf("frame %d holds %q, want %q", i, keys, want)
				}
			}
		})
	}
}
