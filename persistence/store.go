package persistence

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/agentd/agentd/chat"
)

// FormatVersion is written into every value envelope.
const FormatVersion = 1

// ErrNotFound is returned for an unknown chat or record.
var ErrNotFound = errors.New("not found")

// ErrChatMoved is returned for a write of a chat another store (another
// agentd node) claimed after this one did: this store is no longer the
// chat's single writer, and its write did not land.
var ErrChatMoved = errors.New("chat moved: another node claimed it")

// Store is the Badger-backed store. It is safe for concurrent use; each
// chat's log has a single writer (its session actor), which keeps seq
// assignment simple, and every update of every chat goes through one
// group committer (commit.go).
type Store struct {
	db *badger.DB
	// w is the one writer: every update goes through it (see committer).
	w *committer[*writeTxn]
	// j is the journal; nil in memory.
	j *journal
	// tenants caches ChatTenant's answers (see tenants).
	tenants *tenants
	// recs is the writer's record cache, which Chat reads too.
	recs *recordCache
}

// badgerTxns are Badger's update transactions, for the committer, made
// durable by the journal (journal.go); j is nil in memory, where sync has
// nothing to do.
type badgerTxns struct {
	db *badger.DB
	j  *journal
	// recs caches chat records for appends; nil caches none (a test's
	// second writer over the store's database).
	recs *recordCache
}

func (b badgerTxns) begin() (*writeTxn, error) {
	t := &writeTxn{tx: b.db.NewTransaction(true), recs: b.recs}
	if b.j != nil {
		t.frame = b.j.frame()
	}
	return t, nil
}

func (badgerTxns) discard(txn *writeTxn) { txn.tx.Discard() }
func (badgerTxns) tooBig(err error) bool { return errors.Is(err, badger.ErrTxnTooBig) }

// failed: a Badger write's failure says what it is already.
func (badgerTxns) failed(_ *writeTxn, err error) error { return err }
func (b badgerTxns) commit(txn *writeTxn, _ bool) error {
	err := b.commitTxn(txn)
	if b.recs != nil {
		if err != nil {
			b.recs.failed(txn.recWrites)
		} else {
			b.recs.committed(txn.recWrites)
		}
	}
	return err
}

func (b badgerTxns) commitTxn(txn *writeTxn) error {
	if b.j == nil || len(txn.frame) == frameHeader {
		return txn.tx.Commit()
	}
	// The frame first: a commit Badger holds is then always in the
	// journal (a process killed between the two leaves a frame whose
	// replay is the commit that did not happen, never the reverse).
	at, err := b.j.append(txn.frame)
	if err != nil {
		return err
	}
	if err := txn.tx.Commit(); err != nil {
		return errors.Join(err, b.j.unappend(at))
	}
	return nil
}

func (b badgerTxns) sync() error {
	if b.j == nil {
		return b.db.Sync()
	}
	return b.j.sync(b.db)
}

// writeTxn is a Badger update transaction whose writes are framed for the
// journal as they are made. Writes go through Set and Delete only: one
// made on tx directly would not be in the journal, and a crash of the
// machine could lose it.
type writeTxn struct {
	tx    *badger.Txn
	frame []byte // the commit's journal frame; nil in memory
	// recs is the writer's record cache (nil: none), and recWrites the
	// records this transaction wrote, for it once committed.
	recs      *recordCache
	recWrites []recordWrite
}

func (t *writeTxn) Set(key, val []byte) error {
	if err := t.tx.Set(key, val); err != nil {
		return err
	}
	if t.recs != nil && isRecordKey(key) {
		t.recWrites = append(t.recWrites, recordWrite{key: string(key), val: val})
	}
	if t.frame != nil {
		t.frame = appendOp(t.frame, opSet, key, val)
	}
	return nil
}

func (t *writeTxn) Delete(key []byte) error {
	if err := t.tx.Delete(key); err != nil {
		return err
	}
	if t.recs != nil && isRecordKey(key) {
		t.recWrites = append(t.recWrites, recordWrite{key: string(key), del: true})
	}
	if t.frame != nil {
		t.frame = appendOp(t.frame, opDelete, key, nil)
	}
	return nil
}

func (t *writeTxn) Get(key []byte) (*badger.Item, error) { return t.tx.Get(key) }
func (t *writeTxn) NewIterator(o badger.IteratorOptions) *badger.Iterator {
	return t.tx.NewIterator(o)
}

// reader is what the read helpers need of a transaction, a read-only one
// (DB.View) or a writeTxn.
type reader interface {
	Get(key []byte) (*badger.Item, error)
	NewIterator(badger.IteratorOptions) *badger.Iterator
}

// Options tune Open.
type Options struct {
	// InMemory runs Badger without files (tests, benchmarks).
	InMemory bool
	// Logger receives Badger's own log lines; nil silences them.
	Logger badger.Logger
	// ObserveDurable, when set, hears how long each batch of writes that
	// must be durable took to commit and sync (the journal's fdatasync):
	// the disk's share of a durable write's wait. It runs on the store's
	// writer, so it must return at once.
	ObserveDurable func(time.Duration)

	// memTable overrides the memtable size, which bounds one transaction;
	// tests shrink it to reach the batched chat deletion.
	memTable int64
	// vlogFile overrides the value-log file size (Badger's default: 1 GB);
	// a test copying the files shrinks it.
	vlogFile int64
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, o Options) (*Store, error) {
	// Memory: Badger's defaults (five 64 MB memtables, a 256 MB block
	// cache) are sized for a database that owns the machine; a daemon that
	// also hosts thousands of chats keeps them smaller, for a flat footprint.
	if o.memTable == 0 {
		o.memTable = 32 << 20
	}
	// No SyncWrites: the committer syncs a batch that holds a durable
	// write, and lets writes that need no sync of their own go without.
	opts := badger.DefaultOptions(dir).WithSyncWrites(false).WithLogger(o.Logger).
		WithNumVersionsToKeep(1).WithCompactL0OnClose(true).
		WithMemTableSize(o.memTable).WithNumMemtables(3).WithBlockCacheSize(64 << 20)
	if o.vlogFile != 0 {
		opts = opts.WithValueLogFileSize(o.vlogFile)
	}
	if o.InMemory {
		opts = opts.WithInMemory(true).WithDir("").WithValueDir("")
	}
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open badger at %s: %w", dir, err)
	}
	var j *journal
	if !o.InMemory {
		if j, err = recoverJournal(db, dir); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	recs := newRecordCache()
	st := &Store{db: db, j: j, w: newCommitter(badgerTxns{db: db, j: j, recs: recs}, o.ObserveDurable), tenants: newTenants(), recs: recs}
	if err := st.finishDeletes(context.Background()); err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}

// Close commits the writes already submitted, then flushes and closes the
// database; later writes fail with ErrClosed.
func (s *Store) Close() error {
	s.w.close()
	s.recs.clear() // Chat then fails on the closed database, as before the cache
	err := s.db.Close()
	if s.j != nil {
		err = errors.Join(err, s.j.close(err == nil))
	}
	return err
}

// Failure is why the store refuses every write, or nil: a sync failed, and
// nothing can be made durable until agentd restarts (see the journal).
func (s *Store) Failure() error {
	if s.j == nil {
		return nil
	}
	return s.j.failure()
}

// Sizes reports Badger's LSM and value-log sizes in bytes.
func (s *Store) Sizes() (lsm, vlog int64) { return s.db.Size() }

type envelope struct {
	V int             `json:"v"`
	D json.RawMessage `json:"d"`
}

// envelopeHead is how encode starts every value; decode takes a value that
// starts so without a second decoding pass.
const envelopeHead = `{"v":`

// v1 is encoding/json's rules, for its successor's engine (the one
// encoding/json itself runs on under GOEXPERIMENT=jsonv2): the same bytes
// out and the same values in, in less time and far fewer allocations than
// encoding/json's reflection (every turn encodes a snapshot, a chat record
// and its messages, and decodes the record).
var v1 = jsonv1.DefaultOptionsV1()

// encode wraps v in its envelope. It writes the envelope's few bytes itself:
// json.Marshal of an envelope would scan and copy the encoded value once
// more to compact a RawMessage that is compact already. The bytes are the
// same as json.Marshal(envelope{…}) (TestEnvelopeIsJSONs, FuzzEncodeIsJSONs).
// It encodes into a pooled buffer and allocates only the value it returns:
// json.Marshal's own copy, then the envelope's, were two of a turn's
// every record.
func encode(v any) ([]byte, error) {
	buf := encodeBufs.Get().(*bytes.Buffer)
	defer putEncodeBuf(buf)
	buf.WriteString(envelopeHead)
	buf.Write(strconv.AppendInt(buf.AvailableBuffer(), FormatVersion, 10))
	buf.WriteString(`,"d":`)
	if err := jsonv2.MarshalWrite(buf, v, v1); err != nil {
		return nil, err
	}
	buf.WriteByte('}')
	return bytes.Clone(buf.Bytes()), nil
}

// encodeBufs are encode's buffers; putEncodeBuf keeps those of an ordinary
// record's size, so one huge value does not stay pinned in the pool.
var encodeBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledEncodeBuf = 64 << 10

func putEncodeBuf(buf *bytes.Buffer) {
	if buf.Cap() > maxPooledEncodeBuf {
		return
	}
	buf.Reset()
	encodeBufs.Put(buf)
}

// RecordPut is one generic record for PutRecords.
type RecordPut struct {
	Kind, ID string
	V        any
}

// encodeRecords encodes each record's value, before a write begins.
func encodeRecords(recs []RecordPut) ([][]byte, error) {
	vals := make([][]byte, len(recs))
	for i, r := range recs {
		val, err := encode(r.V)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", r.Kind, r.ID, err)
		}
		vals[i] = val
	}
	return vals, nil
}

func decode(b []byte, v any) error {
	if d, ok := splitEnvelope(b); ok {
		if err := jsonv2.Unmarshal(d, v, v1); err == nil {
			return nil
		}
		// Not what it looked like: the full decoding says why.
	}
	return decodeEnvelope(b, v)
}

// decodeEnvelope is decode the long way, for any spelling of an envelope.
func decodeEnvelope(b []byte, v any) error {
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return fmt.Errorf("decode envelope: %w", err)
	}
	// A newer writer's record decodes too: unknown fields are ignored.
	if err := json.Unmarshal(e.D, v); err != nil {
		return fmt.Errorf("decode v%d record: %w", e.V, err)
	}
	return nil
}

// splitEnvelope cuts the data out of an envelope as encode writes it,
// {"v":N,"d":…}, so decode reads the data once rather than twice
// (once to find where it ends, once to decode it). ok is false for any
// other spelling (Postgres's jsonb, a hand-made value), which decode then
// reads the slow way; a data part that is not one JSON value fails
// json.Unmarshal and goes the slow way too.
func splitEnvelope(b []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(envelopeHead))
	if !ok {
		return nil, false
	}
	// The version: a JSON number that fits an int (no leading zero).
	i := 0
	for i < len(rest) && i < 9 && rest[i] >= '0' && rest[i] <= '9' && (i > 0 || rest[i] != '0') {
		i++
	}
	d, ok := bytes.CutPrefix(rest[i:], []byte(`,"d":`))
	if i == 0 || !ok || len(d) < 2 || d[len(d)-1] != '}' {
		return nil, false
	}
	return d[:len(d)-1], true
}

func chatKey(id string) []byte           { return []byte("c/" + id) }
func tenantKey(tenant, id string) []byte { return []byte("t/" + tenant + "/" + id) }
func snapKey(id string) []byte           { return []byte("s/" + id) }
func snapTurnKey(id string) []byte       { return []byte("u/" + id) }
func requestPrefix(id string) []byte     { return []byte("r/" + id + "/") }
func msgPrefix(id string) []byte         { return []byte("m/" + id + "/") }
func windowKey(p, m string) []byte       { return []byte("w/" + p + "/" + m) }
func recordKey(kind, id string) []byte   { return []byte("k/" + kind + "/" + id) }
func deletingKey(id string) []byte       { return []byte("d/" + id) }

func requestKey(id string, n int64) []byte { return seqKey("r/", id, n) }
func msgKey(id string, seq int64) []byte   { return seqKey("m/", id, seq) }

// seqKey is kind, id, a slash and n, 8 bytes big-endian, built in one
// allocation: a turn writes a message key for each of its messages.
func seqKey(kind, id string, n int64) []byte {
	k := make([]byte, 0, len(kind)+len(id)+1+8)
	k = append(append(append(k, kind...), id...), '/')
	return binary.BigEndian.AppendUint64(k, uint64(n))
}

// Chat is a chat's metadata.
type Chat struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	Title     string    `json:"title,omitempty"`
	Model     string    `json:"model"`
	CreatedAt time.Time `json:"created_at"`
	// NoAutoRemember: what the learner finds waits for an OK.
	NoAutoRemember bool `json:"no_auto_remember,omitempty"`
	// Shared: a chat with other people in it; the learner skips it.
	Shared bool `json:"shared,omitempty"`
	// Instructions are the application's system prompt; each change is a
	// new InstructionsVersion and applies from the next turn.
	Instructions        string        `json:"instructions,omitempty"`
	InstructionsVersion int           `json:"instructions_version,omitempty"`
	Settings            chat.Settings `json:"settings,omitzero"`
	// Toolsets name the tenant's toolsets the chat uses; Tools are its own
	// client-executed tools.
	Toolsets []string        `json:"toolsets,omitempty"`
	Tools    []chat.ToolSpec `json:"tools,omitempty"`
	// LastSeq is the seq of the log's last message, kept by every append
	// so a listing reads no log. A chat stored before it was kept has 0
	// here until its next append (listings then read its log's last key).
	LastSeq int64 `json:"last_seq,omitempty"`
}

// CreateChat stores a new chat; it fails if the id exists.
func (s *Store) CreateChat(ctx context.Context, c Chat) error {
	c.LastSeq = 0 // a new chat has no log yet; appends count from the log
	val, err := encode(c)
	if err != nil {
		return err
	}
	_, _, gen := s.tenants.get(c.ID)
	err = s.update(ctx, func(txn *writeTxn) error {
		if _, err := txn.Get(chatKey(c.ID)); err == nil {
			return fmt.Errorf("create chat %s: already exists", c.ID)
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		if err := txn.Set(tenantKey(c.Tenant, c.ID), nil); err != nil {
			return err
		}
		return txn.Set(chatKey(c.ID), val)
	})
	if err == nil {
		// The first turn's ownership check needs no read.
		s.tenants.put(c.ID, c.Tenant, gen)
	}
	return err
}

// ErrTooBig: what was given does not fit in one transaction.
var ErrTooBig = errors.New("too big for one transaction")

// ImportChat stores a new chat with its whole log, snapshot and recs (its
// surface records) so that it lands whole or not at all, even across a
// crash; it returns once synced. Seqs are renumbered from 1. It fails if
// the id exists. A chat that fits in one transaction (a memtable's worth)
// goes in that one; a bigger one goes in batches (importInBatches), and
// fails with ErrTooBig only when one message does not fit in a
// transaction.
func (s *Store) ImportChat(ctx context.Context, c Chat, snap Snapshot, msgs []chat.Message, recs ...RecordPut) error {
	out := make([]chat.Message, len(msgs))
	copy(out, msgs)
	c.LastSeq = int64(len(out))
	snap.held = heldSummary{} // a new chat: the store holds none of it
	sval, err := encodeSnapshot(snap)
	if err != nil {
		return fmt.Errorf("import chat %s: %w", c.ID, err)
	}
	rvals, err := encodeRecords(recs)
	if err != nil {
		return fmt.Errorf("import chat %s: %w", c.ID, err)
	}
	err = s.update(ctx, func(txn *writeTxn) error {
		if _, err := txn.Get(chatKey(c.ID)); err == nil {
			return fmt.Errorf("chat %s already exists", c.ID)
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		if err := writeLog(txn, c.ID, 0, out); err != nil {
			return err
		}
		if err := putSnapshot(txn, c.ID, sval); err != nil {
			return err
		}
		for i, r := range recs {
			if err := txn.Set(recordKey(r.Kind, r.ID), rvals[i]); err != nil {
				return err
			}
		}
		val, err := encode(c)
		if err != nil {
			return err
		}
		if err := txn.Set(chatKey(c.ID), val); err != nil {
			return err
		}
		return txn.Set(tenantKey(c.Tenant, c.ID), nil)
	})
	if errors.Is(err, badger.ErrTxnTooBig) {
		err = s.importInBatches(ctx, c, sval, recs, rvals, out)
	}
	if err != nil {
		return fmt.Errorf("import chat %s: %w", c.ID, err)
	}
	return nil
}

// importInBatches stores a chat too big for one transaction in the order a
// deletion removes one (DeleteChat): a tombstone first, which Open reads as
// a deletion to finish, then the log in batches, then, in one last small
// transaction, the snapshot, the records, the chat and its tenant's index
// entry, with the tombstone removed. Until that last write the chat is in
// no read and its id is taken; a crash before it leaves a tombstoned log
// that Open deletes, and a failure here deletes it at once.
func (s *Store) importInBatches(ctx context.Context, c Chat, sval storedSnapshot, recs []RecordPut, rvals [][]byte, out []chat.Message) (err error) {
	vals, err := stamp(out, 0)
	if err != nil {
		return err
	}
	cval, err := encode(c)
	if err != nil {
		return err
	}
	err = s.update(ctx, func(txn *writeTxn) error {
		for _, k := range [][]byte{chatKey(c.ID), deletingKey(c.ID)} {
			if _, err := txn.Get(k); err == nil {
				return fmt.Errorf("chat %s already exists", c.ID)
			} else if !errors.Is(err, badger.ErrKeyNotFound) {
				return err
			}
		}
		return txn.Set(deletingKey(c.ID), nil)
	})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if derr := s.finishDelete(context.WithoutCancel(ctx), c.ID); derr != nil {
				err = errors.Join(err, derr)
			}
		}
	}()
	for next := 0; next < len(out); {
		from := next
		err := s.update(ctx, func(txn *writeTxn) error {
			for next = from; next < len(out); next++ {
				// A message whose index entry did not fit is written again,
				// whole, by the next batch.
				err := txn.Set(msgKey(c.ID, out[next].Seq), vals[next])
				if err == nil {
					err = indexKey(txn, c.ID, &out[next])
				}
				if errors.Is(err, badger.ErrTxnTooBig) && next > from {
					return nil
				} else if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return tooBig(fmt.Errorf("messages from seq %d: %w", from+1, err))
		}
	}
	return s.update(ctx, func(txn *writeTxn) error {
		if err := putSnapshot(txn, c.ID, sval); err != nil {
			return err
		}
		for i, r := range recs {
			if err := txn.Set(recordKey(r.Kind, r.ID), rvals[i]); err != nil {
				return err
			}
		}
		if err := txn.Set(chatKey(c.ID), cval); err != nil {
			return err
		}
		if err := txn.Set(tenantKey(c.Tenant, c.ID), nil); err != nil {
			return err
		}
		return txn.Delete(deletingKey(c.ID))
	})
}

// UpdateChat overwrites a chat's metadata but its LastSeq, which only
// appends move.
func (s *Store) UpdateChat(ctx context.Context, c Chat) error {
	defer s.tenants.evict(c.ID)
	return s.update(ctx, func(txn *writeTxn) error {
		var stored Chat
		if err := getTxn(txn, chatKey(c.ID), &stored); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		c.LastSeq = stored.LastSeq
		val, err := encode(c)
		if err != nil {
			return err
		}
		return txn.Set(chatKey(c.ID), val)
	})
}

// ChatTenant reads only the tenant of a chat: what a request's check that
// the chat is the caller's needs, every turn, without decoding the rest of
// the record (its instructions, its tools). Known from the chat's creation
// or its first read, it is cached until the chat is deleted (see tenants).
func (s *Store) ChatTenant(ctx context.Context, id string) (string, error) {
	tenant, ok, gen := s.tenants.get(id)
	if ok {
		return tenant, nil
	}
	var c struct {
		Tenant string `json:"tenant"`
	}
	if err := s.get(chatKey(id), &c); err != nil {
		return "", fmt.Errorf("chat %s: %w", id, err)
	}
	s.tenants.put(id, c.Tenant, gen)
	return c.Tenant, nil
}

// Chat reads one chat's metadata, from the writer's record cache when the
// record is there.
func (s *Store) Chat(ctx context.Context, id string) (Chat, error) {
	var c Chat
	key := chatKey(id)
	var err error
	if val, ok := s.recs.get(key); ok {
		err = decode(val, &c)
	} else {
		err = s.get(key, &c)
	}
	if err != nil {
		return c, fmt.Errorf("chat %s: %w", id, err)
	}
	return c, nil
}

// CountChats counts a tenant's chats from the tenant index, reading no
// chat record.
func (s *Store) CountChats(ctx context.Context, tenant string) (int, error) {
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: tenantKey(tenant, "")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	return n, err
}

// Chats lists the chats of a tenant ("" lists all), oldest first.
func (s *Store) Chats(ctx context.Context, tenant string) ([]Chat, error) {
	var out []Chat
	err := s.db.View(func(txn *badger.Txn) error {
		if tenant != "" {
			return chatsOf(txn, tenant, &out)
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("c/"), PrefetchValues: true, PrefetchSize: 100})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var c Chat
			if err := it.Item().Value(func(v []byte) error { return decode(v, &c) }); err != nil {
				return err
			}
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	sortChats(out)
	return out, nil
}

// ChatsPage lists up to limit of a tenant's chats in id order, starting
// after the id after ("" from the first), and whether more follow. It reads
// only the chats it returns, so a page costs the same however many a tenant
// has.
func (s *Store) ChatsPage(ctx context.Context, tenant, after string, limit int) ([]Chat, bool, error) {
	var out []Chat
	more := false
	err := s.db.View(func(txn *badger.Txn) error {
		prefix := tenantKey(tenant, "")
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(tenantKey(tenant, after)); it.Valid(); it.Next() {
			id := string(it.Item().Key()[len(prefix):])
			if id == after {
				continue
			}
			if len(out) == limit {
				more = true
				return nil
			}
			var c Chat
			if err := getTxn(txn, chatKey(id), &c); err != nil {
				return err
			}
			if err := fillLastSeq(txn, &c, c.ID); err != nil {
				return err
			}
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("list chats of %s: %w", tenant, err)
	}
	return out, more, nil
}

// chatsOf reads a tenant's chats through the tenant index.
func chatsOf(txn reader, tenant string, out *[]Chat) error {
	prefix := tenantKey(tenant, "")
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		var c Chat
		if err := getTxn(txn, chatKey(string(it.Item().Key()[len(prefix):])), &c); err != nil {
			return err
		}
		if err := fillLastSeq(txn, &c, c.ID); err != nil {
			return err
		}
		*out = append(*out, c)
	}
	return nil
}

// fillLastSeq sets the LastSeq of chat id's record when it has none: an
// empty chat, or one stored before LastSeq was kept. A log starts at seq 1
// and loses messages only with its chat, so a log without seq 1 is empty:
// a point read tells a new chat's, where the log's last key would take an
// iterator, which in an update transaction sorts all the batch's writes
// (the first append of every new chat).
func fillLastSeq(txn reader, c *Chat, id string) error {
	if c.LastSeq != 0 {
		return nil
	}
	switch _, err := txn.Get(msgKey(id, 1)); {
	case errors.Is(err, badger.ErrKeyNotFound):
		return nil
	case err != nil:
		return err
	}
	var err error
	c.LastSeq, err = lastSeq(txn, id)
	return err
}

// RecordKey names one generic record, as PutRecord was given it.
type RecordKey struct{ Kind, ID string }

// DeleteChat removes a chat: its metadata, its tenant index entry, its
// snapshot and its request log, every message of its log (and its index
// of idempotency keys) and item of its activity, and the given records of other packages that belong to it. ErrNotFound if there is no such chat.
//
// A chat whose keys fit in one Badger transaction (a memtable's worth:
// with the defaults, some hundred thousand messages) goes in that one
// transaction. A bigger one goes in a crash-safe order: one transaction
// removes everything but the messages and writes a tombstone, so the chat
// is gone from every read at once; then the messages go in batches; then
// the tombstone. Open finishes a deletion a crash interrupted.
func (s *Store) DeleteChat(ctx context.Context, id string, records ...RecordKey) error {
	var whole bool
	err := s.update(ctx, func(txn *writeTxn) error {
		var c Chat
		if err := getTxn(txn, chatKey(id), &c); err != nil {
			return err
		}
		keys := [][]byte{chatKey(id), tenantKey(c.Tenant, id), snapKey(id), snapTurnKey(id)}
		for _, r := range records {
			keys = append(keys, recordKey(r.Kind, r.ID))
		}
		for _, k := range keys {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		// The tombstone goes in before the messages fill the transaction.
		if err := txn.Set(deletingKey(id), nil); err != nil {
			return err
		}
		var err error
		whole, err = deleteRest(txn, id)
		return err
	})
	// The chat is gone from every read now (or stays whole, and reading
	// its tenant again costs one read).
	s.tenants.evict(id)
	if err != nil {
		return fmt.Errorf("delete chat %s: %w", id, err)
	}
	if whole {
		return nil
	}
	return s.finishDelete(ctx, id)
}

// deleteRest deletes as many of a tombstoned chat's messages (and its
// activity, request log and index of keys) as txn takes and, once none is left, the
// tombstone; whole reports that it got there.
func deleteRest(txn *writeTxn, id string) (whole bool, err error) {
	var keys [][]byte
	for _, prefix := range [][]byte{requestPrefix(id), activityPrefix(id), keyPrefix(id), msgPrefix(id)} {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		it.Close()
	}
	for _, k := range append(keys, deletingKey(id)) {
		if err := txn.Delete(k); errors.Is(err, badger.ErrTxnTooBig) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
	return true, nil
}

// finishDelete deletes what a tombstoned chat has left, a batch a
// transaction, then its tombstone.
func (s *Store) finishDelete(ctx context.Context, id string) error {
	for whole := false; !whole; {
		err := s.update(ctx, func(txn *writeTxn) error {
			var err error
			whole, err = deleteRest(txn, id)
			return err
		})
		if err != nil {
			return fmt.Errorf("delete chat %s: messages: %w", id, err)
		}
	}
	return nil
}

// finishDeletes finishes every deletion a crash interrupted.
func (s *Store) finishDeletes(ctx context.Context) error {
	var ids []string
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: deletingKey("")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			ids = append(ids, string(it.Item().Key()[len(deletingKey("")):]))
		}
		return nil
	})
	for _, id := range ids {
		if err == nil {
			err = s.finishDelete(ctx, id)
		}
	}
	return err
}

// Append stores messages at the end of a chat's log, assigning each the
// next seq, and returns them with their seqs. It returns once the write is
// synced to disk.
func (s *Store) Append(ctx context.Context, chatID string, msgs ...chat.Message) ([]chat.Message, error) {
	return waitFor(func(then func([]chat.Message, error)) { s.appendMsgs(ctx, chatID, msgs, false, then) })
}

// AppendUnsynced is Append for messages that need not survive a crash of
// the machine on their own (a running turn's tool calls and results): it
// returns once they are committed, with their seqs, without waiting for
// a sync; they are durable once the writer has idled 2 ms, or with the
// next durable write (see committer.doUnsynced).
func (s *Store) AppendUnsynced(ctx context.Context, chatID string, msgs ...chat.Message) ([]chat.Message, error) {
	return waitFor(func(then func([]chat.Message, error)) { s.appendMsgs(ctx, chatID, msgs, true, then) })
}

// AppendThen is Append for a caller that must not wait (a session's
// mailbox): then hears the messages with their seqs once they are
// durable, or the error. stored comes with an error too when the messages
// were committed (readable in the log) but their sync failed. then runs on
// the store's writer, so it must not block.
func (s *Store) AppendThen(ctx context.Context, chatID string, msgs []chat.Message, then func(stored []chat.Message, err error)) {
	s.appendMsgs(ctx, chatID, msgs, false, then)
}

func (s *Store) appendMsgs(ctx context.Context, chatID string, msgs []chat.Message, unsynced bool, then func([]chat.Message, error)) {
	out := slices.Clone(msgs)
	queueResult(ctx, s.w, func(txn *writeTxn) error {
		_, err := appendTxn(txn, chatID, out)
		return err
	}, unsynced, out, func(err error) error { return fmt.Errorf("append to chat %s: %w", chatID, tooBig(err)) }, then)
}

// tooBig names Badger's ErrTxnTooBig as ErrTooBig, keeping it: callers
// tell a write they must split or refuse from a store that failed.
func tooBig(err error) error {
	if errors.Is(err, badger.ErrTxnTooBig) && !errors.Is(err, ErrTooBig) {
		return fmt.Errorf("%w: %w", ErrTooBig, err)
	}
	return err
}

// AppendWithSnapshotThen appends msgs as AppendThen does and, in the same
// transaction, saves the snapshot snap builds from the seq of the last
// message in the log, so one sync covers both: a turn's answer and the
// state it leaves land together or not at all. acts go to the chat's
// activity log first, as AppendActivity would store them before msgs
// (a fold the turn met on its way). snap runs on the store's writer and
// may run more than once; it must only read what it captured.
func (s *Store) AppendWithSnapshotThen(ctx context.Context, chatID string, snap func(lastSeq int64) Snapshot, acts []Activity, msgs []chat.Message,
	then func(stored []chat.Message, err error)) {
	out := slices.Clone(msgs)
	acts = stampedAll(acts)
	queueResult(ctx, s.w, func(txn *writeTxn) error {
		if err := appendActivities(txn, chatID, acts, appendActivityTxn); err != nil {
			return err
		}
		last, err := appendTxn(txn, chatID, out)
		if err != nil {
			return err
		}
		val, err := encodeSnapshot(snap(last))
		if err != nil {
			return err
		}
		return putSnapshot(txn, chatID, val)
	}, false, out, func(err error) error { return fmt.Errorf("append to chat %s with its snapshot: %w", chatID, err) }, then)
}

// appendTxn writes out at the end of a chat's log, setting their seqs,
// and returns the seq of the log's last message. The chat's record learns
// its new LastSeq in the same transaction and, while it has no title, takes
// one from the person's first words. The record's LastSeq says where the
// log ends (every append and import keeps it), so the log is read only
// when the record has none: an iterator in a transaction holding a whole
// group commit's writes sorts them all, once per append. An append that
// gives no title (a titled chat's, or one without the person's words)
// reads and rewrites only the record's last_seq (cutLastSeq), not the
// whole record.
func appendTxn(txn *writeTxn, chatID string, out []chat.Message) (int64, error) {
	val, err := txn.record(chatKey(chatID))
	if errors.Is(err, badger.ErrKeyNotFound) {
		// A log without a record: tests, or a chat being deleted.
		last, err := lastSeq(txn, chatID)
		if err != nil {
			return 0, err
		}
		return last + int64(len(out)), writeLog(txn, chatID, last, out)
	}
	if err != nil {
		return 0, err
	}
	if last, head, ok := cutLastSeq(val); ok && !mayTitle(val, out) {
		if err := writeLog(txn, chatID, last, out); err != nil {
			return 0, err
		}
		last += int64(len(out))
		return last, txn.Set(chatKey(chatID), withLastSeq(head, last))
	}
	var c Chat
	if err := decode(val, &c); err != nil {
		return 0, err
	}
	if err := fillLastSeq(txn, &c, chatID); err != nil {
		return 0, err
	}
	if err := writeLog(txn, chatID, c.LastSeq, out); err != nil {
		return 0, err
	}
	last := c.LastSeq + int64(len(out))
	noteAppended(&c, last, out)
	if val, err = encode(&c); err != nil {
		return 0, err
	}
	return last, txn.Set(chatKey(chatID), val)
}

// lastSeqTail is how encode ends a chat record with a LastSeq (its last
// field) before the number and the data's and the envelope's braces.
const lastSeqTail = `,"last_seq":`

// cutLastSeq reads the LastSeq of a chat record that ends as encode ends
// one with a LastSeq, and cuts the record before it (head); ok is false for
// any other record (no LastSeq, another spelling), which then goes the
// long way. withLastSeq(head, n) is then the record encode writes for the
// same chat with LastSeq n (FuzzEncodeIsJSONs).
func cutLastSeq(val []byte) (last int64, head []byte, ok bool) {
	if _, ok := splitEnvelope(val); !ok {
		return 0, nil, false
	}
	body, ok := bytes.CutSuffix(val, []byte("}}"))
	i := len(body)
	for ok && i > 0 && body[i-1] >= '0' && body[i-1] <= '9' {
		i--
	}
	digits := body[i:]
	head, tail := bytes.CutSuffix(body[:i], []byte(lastSeqTail))
	if !ok || !tail || len(digits) == 0 || len(digits) > 18 || digits[0] == '0' {
		return 0, nil, false
	}
	last, err := strconv.ParseInt(string(digits), 10, 64)
	return last, head, err == nil
}

// withLastSeq is a record cutLastSeq cut, with LastSeq last.
func withLastSeq(head []byte, last int64) []byte {
	b := make([]byte, 0, len(head)+len(lastSeqTail)+20+2)
	b = strconv.AppendInt(append(append(b, head...), lastSeqTail...), last, 10)
	return append(b, "}}"...)
}

// mayTitle: appending out may give the chat of record val its title (see
// noteAppended), so the record must be read whole. The title is looked
// for only when out holds the person's words, and then without decoding
// the record (every turn of a titled chat asks).
func mayTitle(val []byte, out []chat.Message) bool {
	return slices.ContainsFunc(out, titles) && !titled(val)
}

// titled: the chat record val has a title, read from its head: encode
// writes a Chat's id, tenant and title first (its fields' order), the
// title only when it is not empty. false for any other spelling, which
// then goes the long way.
func titled(val []byte) bool {
	d, ok := splitEnvelope(val)
	if !ok {
		return false
	}
	rest, ok := bytes.CutPrefix(d, []byte(`{"id":`))
	if ok {
		rest, ok = skipString(rest)
	}
	if ok {
		rest, ok = bytes.CutPrefix(rest, []byte(`,"tenant":`))
	}
	if ok {
		rest, ok = skipString(rest)
	}
	return ok && bytes.HasPrefix(rest, []byte(`,"title":"`)) && !bytes.HasPrefix(rest, []byte(`,"title":""`))
}

// skipString returns what follows the JSON string b starts with; ok is
// false when b does not start with a whole one.
func skipString(b []byte) (rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, false
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte: a quote there does not end the string
		case '"':
			return b[i+1:], true
		}
	}
	return nil, false
}

// titles: m is words of the person's, which title an untitled chat.
func titles(m chat.Message) bool { return m.Role == chat.RoleUser && m.Origin == chat.OriginPerson }

// noteAppended is what an append changes in a chat's record (both
// backends): its LastSeq and, while it has none, a title from the person's
// first words.
func noteAppended(c *Chat, last int64, out []chat.Message) {
	c.LastSeq = last
	for _, m := range out {
		if c.Title == "" && titles(m) {
			c.Title = chat.TitleFrom(m.Content)
		}
	}
}

// writeLog writes out after seq last, setting their seqs and times.
func writeLog(txn *writeTxn, chatID string, last int64, out []chat.Message) error {
	vals, err := stamp(out, last)
	if err != nil {
		return err
	}
	for i, val := range vals {
		if err := txn.Set(msgKey(chatID, out[i].Seq), val); err != nil {
			return err
		}
		if err := indexKey(txn, chatID, &out[i]); err != nil {
			return err
		}
	}
	return nil
}

// stamp numbers out from the seq after last (last < 0: leaves the seqs),
// dates those undated, and encodes them (both backends).
func stamp(out []chat.Message, last int64) ([][]byte, error) {
	vals := make([][]byte, len(out))
	for i := range out {
		if last >= 0 {
			out[i].Seq = last + int64(i) + 1
		}
		if out[i].CreatedAt.IsZero() {
			out[i].CreatedAt = time.Now().UTC()
		}
		var err error
		if vals[i], err = encode(&out[i]); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// Messages returns the messages with from <= seq <= to (to 0: to the end).
func (s *Store) Messages(ctx context.Context, chatID string, from, to int64) ([]chat.Message, error) {
	return s.MessagesWithin(ctx, chatID, from, to, 0)
}

// MessagesWithin is Messages stopped once the messages read hold maxBytes
// of stored values (0: no bound): the first message is read whatever its
// size, and none after the one that reaches the bound. A reader of a long
// log pages with it and holds a bounded page, however large its messages
// (tool results are stored up to limits.max_tool_result_bytes each); it
// reads on from the seq after the last one returned.
func (s *Store) MessagesWithin(ctx context.Context, chatID string, from, to int64, maxBytes int) ([]chat.Message, error) {
	var out []chat.Message
	err := s.db.View(func(txn *badger.Txn) error {
		// Prefetching reads values ahead of the loop: a bounded page reads
		// only the values it keeps.
		prefix := msgPrefix(chatID)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: maxBytes <= 0, PrefetchSize: 256})
		defer it.Close()
		held := 0
		for it.Seek(msgKey(chatID, max(from, 0))); it.Valid(); it.Next() {
			item := it.Item()
			seq := int64(binary.BigEndian.Uint64(item.Key()[len(prefix):]))
			if to > 0 && seq > to || maxBytes > 0 && held >= maxBytes {
				break
			}
			held += int(item.ValueSize())
			var m chat.Message
			if err := item.Value(func(v []byte) error { return decode(v, &m) }); err != nil {
				return fmt.Errorf("seq %d: %w", seq, err)
			}
			out = append(out, m)
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read chat %s messages: %w", chatID, err)
	}
	return out, nil
}

// Claim makes this store the chat's writer. Badger's directory is held by
// one process, which is then the only writer of every chat: nothing to
// fence.
func (s *Store) Claim(context.Context, string) error { return nil }

// LastSeq returns the seq of a chat's last message (0 when empty).
func (s *Store) LastSeq(ctx context.Context, chatID string) (int64, error) {
	var seq int64
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		seq, err = lastSeq(txn, chatID)
		return err
	})
	return seq, err
}

func lastSeq(txn reader, chatID string) (int64, error) { return lastKeyID(txn, msgPrefix(chatID)) }

// Snapshot is the session state saved beside a chat's log. Seqs point into
// the log; nothing here copies messages.
type Snapshot struct {
	Model string `json:"model,omitempty"`
	// Summary covers every message with seq < FirstKeptSeq.
	Summary      string `json:"summary,omitempty"`
	SummaryModel string `json:"summary_model,omitempty"`
	// Digest is the bounded deterministic digest of turns folded without a
	// summary (numbers, names, paths, links, requests).
	Digest       string `json:"digest,omitempty"`
	FirstKeptSeq int64  `json:"first_kept_seq"`
	// Factor is the per-chat estimate correction, only ever raised.
	Factor       float64   `json:"factor,omitempty"`
	LastReported int       `json:"last_reported,omitempty"`
	LastEstimate int       `json:"last_estimate,omitempty"`
	LastSeqSent  int64     `json:"last_seq_sent,omitempty"`
	LoadedTools  []string  `json:"loaded_tools,omitempty"`
	FoldFailures int       `json:"fold_failures,omitempty"`
	FoldPaused   time.Time `json:"fold_paused_until,omitzero"`
	ReadUntilSeq int64     `json:"read_until_seq,omitempty"`
	// Untrusted: the chat read outside text; learning waits for an OK.
	Untrusted bool `json:"untrusted,omitempty"`
	// Paused is a turn waiting for the application's tool results.
	Paused *PausedTurn `json:"paused,omitempty"`
	// UncalledTools are loaded tools a message's words named that no call
	// has used yet; they leave LoadedTools at the next fold, and join
	// DeclinedTools, which words load no more (find_tools or a call does).
	UncalledTools []string `json:"uncalled_tools,omitempty"`
	DeclinedTools []string `json:"declined_tools,omitempty"`
	// Requests are the chat's last requests (estimate, reported, budget),
	// newest last, so the context view survives passivation and restarts.
	// They are stored apart, a record each (requestlog.go); "requests" is
	// where a snapshot saved before that holds them.
	Requests []chat.RequestLog `json:"requests,omitempty"`
	// RequestsLogged numbers the newest of Requests: the requests the chat
	// logged so far.
	RequestsLogged int64 `json:"requests_logged,omitempty"`
	// RequestsSaved: the requests numbered up to it are stored as Requests
	// has them, and a save writes the others (LogRequest, ReportRequest,
	// Stored and LoadSnapshot keep it).
	RequestsSaved int64 `json:"-"`
	// SummaryFP is set in the stored records alone: the fingerprint of the
	// summary they go with (summary.go).
	SummaryFP uint64 `json:"summary_fp,omitempty"`
	// held is the summary the store holds (Stored and LoadSnapshot keep
	// it): a save writes the summary only when it changed.
	held heldSummary
}

// PausedTurn is a turn paused on calls the application runs; the calls
// themselves are in the log, this says which turn waits for them.
type PausedTurn struct {
	TurnID  string          `json:"turn_id"`
	UserSeq int64           `json:"user_seq"`
	Calls   []chat.ToolCall `json:"calls"`
	Since   time.Time       `json:"since"`
}

// SaveSnapshot writes a chat's snapshot, durably, and acts to its
// activity log in the same write (a fold's item beside its boundary).
func (s *Store) SaveSnapshot(ctx context.Context, chatID string, snap Snapshot, acts ...Activity) error {
	return s.saveSnapshot(ctx, chatID, snap, acts, s.w.do)
}

// SaveSnapshotUnsynced is SaveSnapshot without a sync of its own: the
// snapshot is read back at once, and the next synced write makes it
// durable, as AppendUnsynced's messages.
func (s *Store) SaveSnapshotUnsynced(ctx context.Context, chatID string, snap Snapshot, acts ...Activity) error {
	return s.saveSnapshot(ctx, chatID, snap, acts, s.w.doUnsynced)
}

func (s *Store) saveSnapshot(ctx context.Context, chatID string, snap Snapshot, acts []Activity, do func(func(*writeTxn) error) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	val, err := encodeSnapshot(snap)
	if err != nil {
		return err
	}
	acts = stampedAll(acts)
	if err := do(func(txn *writeTxn) error {
		if err := appendActivities(txn, chatID, acts, appendActivityTxn); err != nil {
			return err
		}
		return putSnapshot(txn, chatID, val)
	}); err != nil {
		return fmt.Errorf("save snapshot of %s: %w", chatID, err)
	}
	return nil
}

// putSnapshot writes a chat's snapshot records and what changed of its
// request log.
func putSnapshot(txn *writeTxn, chatID string, snap storedSnapshot) error {
	if snap.whole != nil {
		if err := txn.Set(snapKey(chatID), snap.whole); err != nil {
			return err
		}
	}
	if err := txn.Set(snapTurnKey(chatID), snap.turn); err != nil {
		return err
	}
	for i, val := range snap.reqs {
		if err := txn.Set(requestKey(chatID, snap.first+int64(i)), val); err != nil {
			return err
		}
	}
	for n := snap.dropFrom; n < snap.dropTo; n++ {
		if err := txn.Delete(requestKey(chatID, n)); err != nil {
			return err
		}
	}
	return nil
}

// LoadSnapshot reads a chat's snapshot, with its request log; ok is false
// when none was saved.
func (s *Store) LoadSnapshot(ctx context.Context, chatID string) (snap Snapshot, ok bool, err error) {
	err = s.db.View(func(txn *badger.Txn) error {
		var whole, turn Snapshot
		if err := getTxn(txn, snapKey(chatID), &whole); err != nil {
			return err
		}
		terr := getTxn(txn, snapTurnKey(chatID), &turn)
		if terr != nil && !errors.Is(terr, ErrNotFound) {
			return terr
		}
		snap = joinSummary(whole, turn, terr == nil)
		var stored []chat.RequestLog
		if len(snap.Requests) == 0 && snap.RequestsLogged > 0 {
			var err error
			if stored, err = requestsTxn(txn, chatID, snap.RequestsLogged); err != nil {
				return err
			}
		}
		loadedRequests(&snap, stored)
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return Snapshot{}, false, nil
	}
	if err != nil {
		return snap, false, fmt.Errorf("load snapshot of %s: %w", chatID, err)
	}
	return snap, true, nil
}

// requestsTxn reads a chat's stored request log up to the request
// numbered last, oldest first (see storedLog).
func requestsTxn(txn reader, chatID string, last int64) ([]chat.RequestLog, error) {
	var out []chat.RequestLog
	prefix := requestPrefix(chatID)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix}) // the values are small, in the LSM tree
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		if int64(binary.BigEndian.Uint64(it.Item().Key()[len(prefix):])) > last {
			break
		}
		var r chat.RequestLog
		if err := it.Item().Value(func(v []byte) error { return decode(v, &r) }); err != nil {
			return nil, fmt.Errorf("request log: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// DecodeSnapshot decodes a stored snapshot value (exported for fuzzing the
// decoder with arbitrary bytes).
func DecodeSnapshot(b []byte) (Snapshot, error) {
	var snap Snapshot
	err := decode(b, &snap)
	return snap, err
}

// LearnWindow records a window a refusal named for provider/model; the
// smaller of the old and new value is kept. It reports the value kept.
func (s *Store) LearnWindow(ctx context.Context, provider, model string, window int) (int, error) {
	var kept int
	err := s.update(ctx, func(txn *writeTxn) error {
		kept = window
		var old int
		if err := getTxn(txn, windowKey(provider, model), &old); err == nil && old > 0 && old < window {
			kept = old
			return nil
		} else if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		val, err := encode(window)
		if err != nil {
			return err
		}
		return txn.Set(windowKey(provider, model), val)
	})
	if err != nil {
		return 0, fmt.Errorf("learn window of %s/%s: %w", provider, model, err)
	}
	return kept, nil
}

// LearnedWindows returns every learned window keyed "provider/model".
func (s *Store) LearnedWindows(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("w/"), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var w int
			if err := it.Item().Value(func(v []byte) error { return decode(v, &w) }); err != nil {
				return err
			}
			out[strings.TrimPrefix(string(it.Item().Key()), "w/")] = w
		}
		return nil
	})
	return out, err
}

// PutRecord stores a generic record (memories, learning runs, marks).
func (s *Store) PutRecord(ctx context.Context, kind, id string, v any) error {
	return s.PutRecords(ctx, RecordPut{Kind: kind, ID: id, V: v})
}

// PutRecords stores generic records in one write, durably: all or none.
func (s *Store) PutRecords(ctx context.Context, recs ...RecordPut) error {
	vals, err := encodeRecords(recs)
	if err != nil {
		return err
	}
	return s.update(ctx, func(txn *writeTxn) error {
		for i, r := range recs {
			if err := txn.Set(recordKey(r.Kind, r.ID), vals[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteRecord removes a generic record; a missing one is no error.
func (s *Store) DeleteRecord(ctx context.Context, kind, id string) error {
	return s.update(ctx, func(txn *writeTxn) error { return txn.Delete(recordKey(kind, id)) })
}

// Record reads one generic record into v.
func (s *Store) Record(ctx context.Context, kind, id string, v any) error {
	if err := s.get(recordKey(kind, id), v); err != nil {
		return fmt.Errorf("%s %s: %w", kind, id, err)
	}
	return nil
}

// Records calls fn for every record of a kind, in key order; fn decodes.
func (s *Store) Records(ctx context.Context, kind string, fn func(id string, decode func(v any) error) error) error {
	return s.RecordsPrefix(ctx, kind, "", fn)
}

// RecordsPrefix is Records for the ids that start with prefix: the
// iteration reads no other record of the kind (one tenant's records when
// the ids are "<tenant>/…").
func (s *Store) RecordsPrefix(ctx context.Context, kind, prefix string, fn func(id string, decode func(v any) error) error) error {
	kindLen := len(recordKey(kind, ""))
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: recordKey(kind, prefix), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			id := string(item.Key()[kindLen:])
			err := fn(id, func(v any) error {
				return item.Value(func(b []byte) error { return decode(b, v) })
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) get(key []byte, v any) error {
	return s.db.View(func(txn *badger.Txn) error { return getTxn(txn, key, v) })
}

func getTxn(txn reader, key []byte, v any) error {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	return item.Value(func(b []byte) error { return decode(b, v) })
}

// update runs fn in the next group commit and returns once it is synced.
// fn may run more than once (see write).
func (s *Store) update(ctx context.Context, fn func(txn *writeTxn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.w.do(fn)
}

func sortChats(cs []Chat) {
	sort.SliceStable(cs, func(i, j int) bool {
		if !cs[i].CreatedAt.Equal(cs[j].CreatedAt) {
			return cs[i].CreatedAt.Before(cs[j].CreatedAt)
		}
		return cs[i].ID < cs[j].ID
	})
}
