package persistence

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkSyncParts splits what one durable Badger write costs on this
// disk (ns/op each): a 1 KB commit alone; the commit and DB.Sync, which
// msyncs the memtable's log and then the value log; the commit framed into
// the store's journal and its sync, as the store's writer makes one
// durable (its checkpoints included); an msync of the value
// log's mapping with nothing written to it, which is what DB.Sync adds for
// agentd's values (all under Badger's value threshold, so the value log is
// never written); and a 4 KB write with fdatasync on a plain file: over
// and over the same block, or appended as a log appends (as agentd-bench's
// probe does too, growing its file).
func BenchmarkSyncParts(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	db := s.db
	val := make([]byte, 1<<10)
	var seq uint64
	commit := func(b *testing.B) {
		seq++
		txn := db.NewTransaction(true)
		defer txn.Discard()
		if err := txn.Set(fmt.Appendf(nil, "k%d", seq), val); err != nil {
			b.Fatal(err)
		}
		if err := txn.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("commit", func(b *testing.B) {
		for b.Loop() {
			commit(b)
		}
	})
	b.Run("commit+DB.Sync", func(b *testing.B) {
		for b.Loop() {
			commit(b)
			if err := db.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("commit+journal", func(b *testing.B) {
		bt := badgerTxns{db: db, j: s.j}
		for b.Loop() {
			seq++
			txn, err := bt.begin()
			if err == nil {
				err = txn.Set(fmt.Appendf(nil, "k%d", seq), val)
			}
			if err == nil {
				err = bt.commit(txn, true)
			}
			if err == nil {
				err = bt.sync()
			}
			if err != nil {
				b.Fatal(err)
			}
			bt.discard(txn)
		}
	})
	b.Run("clean-vlog-msync", func(b *testing.B) {
		vlogs, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
		if err != nil || len(vlogs) != 1 {
			b.Fatalf("value logs %v: %v", vlogs, err)
		}
		data := mapShared(b, vlogs[0])
		for b.Loop() {
			if err := unix.Msync(data, unix.MS_SYNC); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A log appends to blocks it has not written yet: in a sparse file (as
	// Badger's memtable logs are, truncated to size at creation) each such
	// sync also commits the blocks' allocation; in a zero-filled one (as
	// Postgres writes its WAL segments) it does not. A 4 KB file is the
	// same block over and over.
	for _, file := range []struct {
		name string
		size int64
		fill bool
	}{{"same-block", 4 << 10, false}, {"appended-sparse", 256 << 20, false}, {"appended-zero-filled", 256 << 20, true}} {
		b.Run("fdatasync-4KB-"+file.name, func(b *testing.B) {
			f := logFile(b, file.size, file.fill)
			page := make([]byte, 4<<10)
			var off int64
			for b.Loop() {
				if _, err := f.WriteAt(page, off); err != nil {
					b.Fatal(err)
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
				off = (off + int64(len(page))) % file.size
			}
		})
	}
}

// logFile is a file of size bytes, sparse or written with zeros and
// synced, closed when the benchmark ends.
func logFile(b *testing.B, size int64, fill bool) *os.File {
	f, err := os.Create(filepath.Join(b.TempDir(), "log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	if err := f.Truncate(size); err != nil {
		b.Fatal(err)
	}
	if fill {
		zeros := make([]byte, 1<<20)
		for off := int64(0); off < size; off += int64(len(zeros)) {
			if _, err := f.WriteAt(zeros, off); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	return f
}

// mapShared maps the whole of path shared, as Badger maps its logs, until
// the benchmark ends.
func mapShared(b *testing.B, path string) []byte {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = unix.Munmap(data) })
	return data
}
