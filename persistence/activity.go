package persistence

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Activity is one stored event of a chat: what a person may need after the
// stream that carried it is gone (folds, heals, problems, tools loaded,
// memories learned). Data is the event's data as JSON.
type Activity struct {
	// ID numbers a chat's activity from 1; AppendActivity assigns it.
	ID     int64  `json:"id"`
	Type   string `json:"type"`
	TurnID string `json:"turn_id,omitempty"`
	// AfterSeq is the seq of the chat's last message when it was stored,
	// read in the same transaction: it orders the item among the messages.
	AfterSeq int64           `json:"after_seq"`
	At       time.Time       `json:"at"`
	Data     json.RawMessage `json:"data,omitempty"`
}

func activityPrefix(chatID string) []byte { return []byte("a/" + chatID + "/") }

func activityKey(chatID string, id int64) []byte {
	return binary.BigEndian.AppendUint64(activityPrefix(chatID), uint64(id))
}

// AppendActivity stores a at the end of a chat's activity log, durably,
// and returns it with its ID and AfterSeq set. Any number of writers may
// append: the one group-commit writer orders them.
func (s *Store) AppendActivity(ctx context.Context, chatID string, a Activity) (Activity, error) {
	return s.appendActivity(ctx, chatID, a, s.w.do)
}

// AppendActivityUnsynced is AppendActivity without a sync of its own: the
// next synced write makes it durable, as AppendUnsynced's messages.
func (s *Store) AppendActivityUnsynced(ctx context.Context, chatID string, a Activity) (Activity, error) {
	return s.appendActivity(ctx, chatID, a, s.w.doUnsynced)
}

func (s *Store) appendActivity(ctx context.Context, chatID string, a Activity, do func(func(*writeTxn) error) error) (Activity, error) {
	return appendActivityWith(ctx, chatID, a, do, appendActivityTxn)
}

// appendActivityWith is a store's AppendActivity: a dated and written by
// add in a write of do.
func appendActivityWith[T any](ctx context.Context, chatID string, a Activity, do func(func(T) error) error, add func(T, string, Activity) (Activity, error)) (Activity, error) {
	if err := ctx.Err(); err != nil {
		return Activity{}, err
	}
	a = a.stamped()
	var out Activity
	err := do(func(txn T) (err error) {
		out, err = add(txn, chatID, a)
		return err
	})
	if err != nil {
		return Activity{}, fmt.Errorf("append activity of chat %s: %w", chatID, err)
	}
	return out, nil
}

// stamped is a dated now unless it has a date.
func (a Activity) stamped() Activity {
	if a.At.IsZero() {
		a.At = time.Now().UTC()
	}
	return a
}

// stampedAll is acts, each stamped, in a new slice.
func stampedAll(acts []Activity) []Activity {
	out := make([]Activity, len(acts))
	for i, a := range acts {
		out[i] = a.stamped()
	}
	return out
}

// appendActivities stores acts in order in txn with add, a store's
// activity append (appendActivityTxn, appendActivityTx).
func appendActivities[T any](txn T, chatID string, acts []Activity, add func(T, string, Activity) (Activity, error)) error {
	for _, a := range acts {
		if _, err := add(txn, chatID, a); err != nil {
			return err
		}
	}
	return nil
}

// appendActivityTxn writes a at the end of the chat's activity log in txn
// and returns it with its ID and AfterSeq set.
func appendActivityTxn(txn *writeTxn, chatID string, a Activity) (Activity, error) {
	last, err := lastKeyID(txn, activityPrefix(chatID))
	if err != nil {
		return a, err
	}
	if a.AfterSeq, err = lastSeq(txn, chatID); err != nil {
		return a, err
	}
	a.ID = last + 1
	val, err := encode(a)
	if err != nil {
		return a, err
	}
	return a, txn.Set(activityKey(chatID, a.ID), val)
}

// ActivityPage returns up to limit of a chat's activity items with ID >
// after, oldest first, and whether more follow.
func (s *Store) ActivityPage(ctx context.Context, chatID string, after int64, limit int) ([]Activity, bool, error) {
	var out []Activity
	more := false
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: activityPrefix(chatID), PrefetchValues: true, PrefetchSize: min(limit+1, 256)})
		defer it.Close()
		for it.Seek(activityKey(chatID, max(after, 0)+1)); it.Valid(); it.Next() {
			if len(out) == limit {
				more = true
				return nil
			}
			var a Activity
			if err := it.Item().Value(func(v []byte) error { return decode(v, &a) }); err != nil {
				return err
			}
			out = append(out, a)
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("read activity of chat %s: %w", chatID, err)
	}
	return out, more, nil
}

// lastKeyID is the big-endian number ending the last key under prefix (0
// when there is none).
func lastKeyID(txn reader, prefix []byte) (int64, error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	defer it.Close()
	it.Seek(append(append([]byte{}, prefix...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
	if !it.Valid() {
		return 0, nil
	}
	return int64(binary.BigEndian.Uint64(it.Item().Key()[len(prefix):])), nil
}
