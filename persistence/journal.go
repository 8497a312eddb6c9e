package persistence

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
)

// The journal is the Badger store's own write-ahead log, and what makes
// its writes durable. Badger's only way to that is DB.Sync, which msyncs
// its memtable's mapped log and its value log (which agentd never writes:
// every value is under the value threshold), and every msync leaves the
// log's pages write-protected, so the next commits fault on them again
// (BENCHMARKS.md, "Twenty-first pass": 1,000 turns took 4,067 msyncs; on
// the journal, 2,035 fdatasyncs, and a turn's own time and CPU fell by a
// median 15%). So the committer frames each commit's writes into the journal before Badger
// commits them, and a sync is one fdatasync of the journal; Badger itself
// is synced only at a checkpoint.
//
// Files: two, journal/a and journal/b in Badger's folder, each zero-filled
// to journalFile when made (an fdatasync of blocks already written costs
// less than one that allocates them). One is current: the one whose
// header holds the higher epoch. A frame is
//
//	u32 length of ops | u32 CRC-32C of (the epoch's salt, ops) | ops
//
// and ops are entries of op byte (set or delete), uvarint key length, key,
// and for a set, uvarint value length and value. The salt is random, made
// with each epoch and kept in the header: a frame left from the file's use
// before fails its CRC, as does a torn one, and bytes a tenant wrote that
// are shaped like a frame cannot be made to pass for one. The journal ends
// at the first frame that does not check.
//
// Recovery (Open): every frame of the current file is applied to Badger
// again, in order. That brings back any commit Badger lost with the machine
// and rewrites the ones it kept with the same values. Badger's state then
// matches the journal's end; the writes replayed are unsynced in Badger, so
// the frames are copied into the other file under a new epoch (synced, then
// its header synced), and the journal goes on there.
//
// Checkpoint: once the current file holds checkpointAfter bytes, a sync
// also syncs Badger and, when Badger's folder has one memtable log left
// (every older memtable, whose log DB.Sync does not reach, is flushed to a
// table, which Badger syncs), starts the other file empty under a new
// epoch: every frame of the old one is durable in Badger by then.
//
// What the journal does not promise: after the machine itself fails,
// commits that were never synced may come back in part, because Badger's
// mapped log can reach the disk ahead of the journal's tail; every synced
// commit comes back whole. A killed process loses nothing the kernel
// holds, as before.
const (
	journalFolder   = "journal"
	journalFile     = 2 << 20 // each file's zero-filled size
	journalHeader   = 4096    // the header's block; frames follow it
	checkpointAfter = journalFile - journalHeader
	checkpointRetry = 256 << 10 // frame bytes before a blocked checkpoint is tried again
	frameHeader     = 8
	maxScratch      = 1 << 20 // a bigger frame's buffer (an import's) is not kept
	opSet           = 1
	opDelete        = 2
)

var (
	journalNames = [2]string{"a", "b"}
	journalMagic = [8]byte{'a', 'g', 'e', 'n', 't', 'd', 'j', '1'}
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

// journal is the open journal. Only the committer's goroutine uses it
// (Open and Close before and after that goroutine runs), so it takes no
// lock.
type journal struct {
	badgerDir *os.Root // Badger's folder, for its memtable logs
	files     [2]*os.File
	cur       int
	epoch     uint64
	salt      [8]byte
	off       int64 // where the next frame goes in files[cur]
	nextTry   int64 // the off past which a sync tries a checkpoint
	scratch   []byte
	// failed is the first failure to make something durable. After a
	// failed fdatasync (or msync) Linux may have dropped the pages it could
	// not write and marked them clean, so no later sync can vouch for what
	// came before: every later write is refused until agentd restarts and
	// replays what the disk really holds (PostgreSQL's "fsyncgate" rule).
	// Set once, by the committer; read by Store.Failure from anywhere.
	failed atomic.Pointer[error]
	// datasync is the files' sync (a test fails it on purpose).
	datasync func(*os.File) error
}

// fail records the first failure to make something durable.
func (j *journal) fail(err error) { j.failed.CompareAndSwap(nil, &err) }

// failure is that failure, or nil.
func (j *journal) failure() error {
	if p := j.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// refuse is the error of every write after a failure.
func (j *journal) refuse() error {
	return fmt.Errorf("journal: an earlier sync failed, so no write can be made durable until agentd restarts: %w", j.failure())
}

// recoverJournal opens (or makes) the journal of the Badger database db
// in dir, replays its frames into db, and restarts it with them.
func recoverJournal(db *badger.DB, dir string) (*journal, error) {
	j, frames, err := openJournal(dir)
	if err != nil {
		return nil, err
	}
	if len(frames) > 0 {
		if err = replayFrames(db, frames); err == nil {
			err = j.restart(frames)
		}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("journal: %w", err), j.closeFiles())
	}
	return j, nil
}

// openJournal opens (or makes) the journal in Badger's folder dir and
// returns it with the current file's frames, which the caller replays
// into Badger and then hands to restart.
func openJournal(dir string) (*journal, [][]byte, error) {
	bd, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	j := &journal{badgerDir: bd, nextTry: journalFile, datasync: datasync}
	frames, err := j.open()
	if err != nil {
		j.closeFiles()
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	return j, frames, nil
}

func (j *journal) open() ([][]byte, error) {
	if err := j.badgerDir.Mkdir(journalFolder, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	var epochs [2]uint64
	var salts [2][8]byte
	for i, name := range journalNames {
		f, err := j.badgerDir.OpenFile(journalFolder+"/"+name, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		j.files[i] = f
		if epochs[i], salts[i], err = readHeader(f); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if epochs[0] == 0 && epochs[1] == 0 {
		// New, or made by an Open that failed before its first header
		// was synced, so before any frame: make both afresh.
		return nil, j.create()
	}
	if epochs[1] > epochs[0] {
		j.cur = 1
	}
	j.epoch, j.salt = epochs[j.cur], salts[j.cur]
	data, err := io.ReadAll(io.NewSectionReader(j.files[j.cur], journalHeader, 1<<62))
	if err != nil {
		return nil, err
	}
	frames, end := readFrames(data, j.salt)
	j.off = journalHeader + end
	return frames, nil
}

// create zero-fills both files and makes a the current one, epoch 1.
func (j *journal) create() error {
	zeros := make([]byte, 64<<10)
	for _, f := range j.files {
		for off := int64(0); off < journalFile; off += int64(len(zeros)) {
			if _, err := f.WriteAt(zeros, off); err != nil {
				return err
			}
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	salt, err := newSalt()
	if err != nil {
		return err
	}
	if err := j.writeHeader(0, 1, salt); err != nil {
		return err
	}
	d, err := j.badgerDir.Open(journalFolder)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return err
	}
	j.cur, j.epoch, j.salt, j.off = 0, 1, salt, journalHeader
	return nil
}

// A header is the magic, the epoch, the salt and a CRC-32C of them.
const headerSize = 28

// readHeader returns a file's epoch and salt; epoch 0 when it has no
// valid header.
func readHeader(f *os.File) (epoch uint64, salt [8]byte, err error) {
	var h [headerSize]byte
	if _, err := f.ReadAt(h[:], 0); errors.Is(err, io.EOF) {
		return 0, salt, nil
	} else if err != nil {
		return 0, salt, err
	}
	if [8]byte(h[:8]) != journalMagic || crc32.Checksum(h[:24], castagnoli) != binary.LittleEndian.Uint32(h[24:]) {
		return 0, salt, nil
	}
	return binary.LittleEndian.Uint64(h[8:16]), [8]byte(h[16:24]), nil
}

// writeHeader makes file i current under epoch and salt, durably.
func (j *journal) writeHeader(i int, epoch uint64, salt [8]byte) error {
	var h [headerSize]byte
	copy(h[:8], journalMagic[:])
	binary.LittleEndian.PutUint64(h[8:16], epoch)
	copy(h[16:24], salt[:])
	binary.LittleEndian.PutUint32(h[24:], crc32.Checksum(h[:24], castagnoli))
	if _, err := j.files[i].WriteAt(h[:], 0); err != nil {
		return err
	}
	return j.datasync(j.files[i])
}

// readFrames returns the frames salted with salt at the start of data, and
// where they end: at the first frame that is short or fails its CRC.
func readFrames(data []byte, salt [8]byte) (frames [][]byte, end int64) {
	for len(data) >= frameHeader {
		n := int(binary.LittleEndian.Uint32(data))
		if n == 0 || n > len(data)-frameHeader {
			break
		}
		ops := data[frameHeader : frameHeader+n]
		if frameCRC(salt, ops) != binary.LittleEndian.Uint32(data[4:]) {
			break
		}
		frames = append(frames, ops)
		data = data[frameHeader+n:]
		end += int64(frameHeader + n)
	}
	return frames, end
}

// frameHead is the header of a frame of ops under salt.
func frameHead(salt [8]byte, ops []byte) (h [frameHeader]byte) {
	binary.LittleEndian.PutUint32(h[:], uint32(len(ops)))
	binary.LittleEndian.PutUint32(h[4:], frameCRC(salt, ops))
	return h
}

func frameCRC(salt [8]byte, ops []byte) uint32 {
	return crc32.Update(crc32.Checksum(salt[:], castagnoli), castagnoli, ops)
}

func newSalt() (salt [8]byte, err error) {
	_, err = rand.Read(salt[:])
	return salt, err
}

// frame returns a buffer for a commit's frame: ops are appended to it
// after its header (appendOp).
func (j *journal) frame() []byte {
	b := j.scratch
	j.scratch = nil
	if b == nil {
		b = make([]byte, frameHeader, 4<<10)
	}
	return b[:frameHeader]
}

// append writes the frame b (made by frame) at the journal's end, unsynced,
// and returns where it starts for unappend. b is the journal's again after.
func (j *journal) append(b []byte) (int64, error) {
	if j.failure() != nil {
		return 0, j.refuse()
	}
	defer func() {
		if cap(b) <= maxScratch {
			j.scratch = b[:0]
		}
	}()
	h := frameHead(j.salt, b[frameHeader:])
	copy(b, h[:])
	at := j.off
	if _, err := j.files[j.cur].WriteAt(b, at); err != nil {
		// Part of it may be there: a frame whose length is zero ends the
		// journal where this one began.
		return 0, errors.Join(fmt.Errorf("journal: %w", err), j.unappend(at))
	}
	j.off += int64(len(b))
	return at, nil
}

// unappend takes back the frame appended at at, the journal's last, when
// Badger refused its commit: replay would otherwise apply what failed.
func (j *journal) unappend(at int64) error {
	var zero [frameHeader]byte
	if _, err := j.files[j.cur].WriteAt(zero[:], at); err != nil {
		// The frame may stay: a replay would apply a write that failed.
		j.fail(fmt.Errorf("take back a frame: %w", err))
		return j.refuse()
	}
	j.off = at
	return nil
}

// sync makes every frame appended so far durable, and checkpoints when
// the current file is full enough (see the package's journal comment).
func (j *journal) sync(db *badger.DB) error {
	if j.failure() != nil {
		return j.refuse()
	}
	if err := j.datasync(j.files[j.cur]); err != nil {
		j.fail(err)
		return fmt.Errorf("journal: %w", err)
	}
	if j.off < j.nextTry {
		return nil
	}
	// The frames are durable already, whatever the checkpoint meets: one
	// that must wait for Badger's older memtables is tried again further
	// on; one whose sync fails refuses later writes, as a failed sync of
	// the journal does (the frames would be dropped on Badger's word).
	j.nextTry = j.off + checkpointRetry
	if err := db.Sync(); err != nil {
		j.fail(fmt.Errorf("sync badger at a checkpoint: %w", err))
		return nil
	}
	if n, err := j.memtableLogs(); err != nil || n != 1 {
		return nil
	}
	if err := j.restart(nil); err != nil {
		// The other file's header may have reached the disk though its
		// sync failed: it would win at Open over the frames that follow.
		j.fail(fmt.Errorf("start the journal's other file: %w", err))
	}
	return nil
}

// memtableLogs counts the memtable logs in Badger's folder.
func (j *journal) memtableLogs() (int, error) {
	entries, err := fs.ReadDir(j.badgerDir.FS(), ".")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".mem") {
			n++
		}
	}
	return n, nil
}

// restart writes frames, under a new epoch, into the file that is not
// current, syncs them, and then makes that file current with its header:
// until the header is durable, the old file stays the journal.
func (j *journal) restart(frames [][]byte) error {
	next, epoch := 1-j.cur, j.epoch+1
	salt, err := newSalt()
	if err != nil {
		return err
	}
	off := int64(journalHeader)
	for _, ops := range frames {
		hdr := frameHead(salt, ops)
		if _, err := j.files[next].WriteAt(hdr[:], off); err != nil {
			return err
		}
		if _, err := j.files[next].WriteAt(ops, off+frameHeader); err != nil {
			return err
		}
		off += int64(frameHeader + len(ops))
	}
	if len(frames) > 0 {
		if err := j.datasync(j.files[next]); err != nil {
			return err
		}
	}
	if err := j.writeHeader(next, epoch, salt); err != nil {
		return err
	}
	j.cur, j.epoch, j.salt, j.off = next, epoch, salt, off
	j.nextTry = off + checkpointAfter
	return nil
}

// close checkpoints once Badger closed cleanly (its memtables flushed to
// tables, no memtable log left), so the next Open replays nothing, and
// closes the files. After a failure the frames stay, for Open to replay.
func (j *journal) close(badgerClosed bool) error {
	var err error
	if n, lerr := j.memtableLogs(); badgerClosed && j.failure() == nil && lerr == nil && n == 0 {
		err = j.restart(nil)
	}
	return errors.Join(err, j.closeFiles())
}

func (j *journal) closeFiles() error {
	var errs []error
	for _, f := range j.files {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(append(errs, j.badgerDir.Close())...)
}

// replayFrames applies frames to db in order, one transaction each (a
// frame is one commit's writes, which fit in one).
func replayFrames(db *badger.DB, frames [][]byte) error {
	for i, ops := range frames {
		txn := db.NewTransaction(true)
		err := eachOp(ops, func(op byte, key, val []byte) error {
			if op == opDelete {
				return txn.Delete(key)
			}
			return txn.Set(key, val)
		})
		if err == nil {
			err = txn.Commit()
		}
		txn.Discard()
		if err != nil {
			return fmt.Errorf("replay frame %d of %d: %w", i+1, len(frames), err)
		}
	}
	return nil
}

// eachOp calls fn with each of a frame's ops. The slices are the frame's.
func eachOp(ops []byte, fn func(op byte, key, val []byte) error) error {
	for len(ops) > 0 {
		op := ops[0]
		key, rest, ok := cutBytes(ops[1:])
		if !ok || (op != opSet && op != opDelete) {
			return errors.New("malformed op")
		}
		var val []byte
		if op == opSet {
			if val, rest, ok = cutBytes(rest); !ok {
				return errors.New("malformed op")
			}
		}
		if err := fn(op, key, val); err != nil {
			return err
		}
		ops = rest
	}
	return nil
}

// cutBytes reads a uvarint length and that many bytes.
func cutBytes(b []byte) (field, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

func appendOp(b []byte, op byte, key, val []byte) []byte {
	b = append(b, op)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	if op == opSet {
		b = binary.AppendUvarint(b, uint64(len(val)))
		b = append(b, val...)
	}
	return b
}
