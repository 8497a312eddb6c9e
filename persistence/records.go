package persistence

import (
	"bytes"
	"sync"
)

// maxRecordBytes bounds the record cache: some ten thousand chats' records
// of a few hundred bytes, or fewer long ones. A full cache drops entries at
// random.
const maxRecordBytes = 8 << 20

// recordCache holds chat records (the values of c/<chat>) as the Badger
// store's writer last committed or read them. Every append reads its
// chat's record for where the log ends and writes it back, and a session
// starting reads its chat's; a hit spares the lookup in each of Badger's
// memtables and tables (issue 20). It stays true because one process owns
// a Badger directory and every write goes through writeTxn (the journal's
// rule): a transaction's writes of records reach the cache once Badger
// committed them, and a read from Badger is the last commit's value, the
// writer being the only one. Only the writer fills it; Store.Chat reads it
// too, hence the lock.
type recordCache struct {
	mu    sync.Mutex
	m     map[string][]byte
	bytes int
}

func newRecordCache() *recordCache { return &recordCache{m: map[string][]byte{}} }

// recordWrite is a record a transaction set to val, or deleted.
type recordWrite struct {
	key string
	val []byte
	del bool
}

func isRecordKey(key []byte) bool { return bytes.HasPrefix(key, []byte("c/")) }

// get returns the cached value of key (shared: not to be modified).
func (c *recordCache) get(key []byte) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	val, ok := c.m[string(key)]
	return val, ok
}

func (c *recordCache) put(key string, val []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.store(key, val)
}

func (c *recordCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.bytes = 0
}

// store and drop are put and a removal, the lock held.
func (c *recordCache) store(key string, val []byte) {
	c.drop(key)
	for k := range c.m {
		if c.bytes+len(val) <= maxRecordBytes {
			break
		}
		c.drop(k)
	}
	c.m[key] = val
	c.bytes += len(val)
}

func (c *recordCache) drop(key string) {
	if old, ok := c.m[key]; ok {
		c.bytes -= len(old)
		delete(c.m, key)
	}
}

// committed takes in a committed transaction's writes of records, in
// order; failed drops their keys, for a commit whose outcome is unknown.
func (c *recordCache) committed(ws []recordWrite) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range ws {
		if w.del {
			c.drop(w.key)
		} else {
			c.store(w.key, w.val)
		}
	}
}

func (c *recordCache) failed(ws []recordWrite) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range ws {
		c.drop(w.key)
	}
}

// record reads the chat record under key as this transaction sees it,
// from the cache when the transaction has not written it. The value is
// shared: callers must not modify it.
func (t *writeTxn) record(key []byte) ([]byte, error) {
	if t.recs == nil {
		return t.readRecord(key)
	}
	for i := len(t.recWrites) - 1; i >= 0; i-- {
		if t.recWrites[i].key == string(key) {
			return t.readRecord(key) // Badger has this transaction's own writes
		}
	}
	if val, ok := t.recs.get(key); ok {
		return val, nil
	}
	val, err := t.readRecord(key)
	if err == nil {
		t.recs.put(string(key), val)
	}
	return val, err
}

func (t *writeTxn) readRecord(key []byte) ([]byte, error) {
	item, err := t.tx.Get(key)
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}
