package persistence

import (
	"context"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentd/agentd/chat"
)

// A message sent with an idempotency key (chat.Message.IdempotencyKey)
// carries its key in the log, and each backend indexes the log by key, so
// that a key is found in a chat's whole log, not only among the messages
// its session keeps after a fold (docs/api.md, "Sending again safely").
// The index is the log's: it holds one entry per keyed message (the key
// and the message's seq), written in the append's transaction, and goes
// with the chat. Badger keeps it under i/<chat>/<key> (writeLog writes
// it); Postgres in the messages table's idempotency_key column, which
// appendTx and ImportChat fill, and its partial index messages_by_key
// (migration 0006). Neither has a bound of its own: the log it points
// into is kept whole for as long as the chat is. Messages stored before
// the index (by a build of 2026-12-06, when keys came) are not in it:
// their keys are found while their messages are kept, as then.

func keyPrefix(chatID string) []byte { return []byte("i/" + chatID + "/") }

func keyIndexKey(chatID, key string) []byte { return append(keyPrefix(chatID), key...) }

// indexKey records m's idempotency key, if it has one, in txn: the seq of
// the message the key names (the last one stored with it).
func indexKey(txn *writeTxn, chatID string, m *chat.Message) error {
	if m.IdempotencyKey == "" {
		return nil
	}
	val, err := encode(&m.Seq)
	if err != nil {
		return err
	}
	return txn.Set(keyIndexKey(chatID, m.IdempotencyKey), val)
}

// KeyedMessage reads the message a chat stored with idempotency key key,
// from its whole log (a folded part included); ok is false when the chat
// holds none.
func (s *Store) KeyedMessage(ctx context.Context, chatID, key string) (m chat.Message, ok bool, err error) {
	err = s.db.View(func(txn *badger.Txn) error {
		var seq int64
		if err := getTxn(txn, keyIndexKey(chatID, key), &seq); err != nil {
			return err
		}
		return getTxn(txn, msgKey(chatID, seq), &m)
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return chat.Message{}, false, nil
	case err != nil:
		return chat.Message{}, false, fmt.Errorf("find idempotency key in chat %s: %w", chatID, err)
	}
	return m, m.IdempotencyKey == key, nil
}

// KeyedMessage reads the message a chat stored with idempotency key key,
// from its whole log, through the messages_by_key index; ok is false when
// the chat holds none. (The key is a column of its own, not read out of
// the value: json's operators refuse a value holding \u0000, which a
// message may.)
func (p *Postgres) KeyedMessage(ctx context.Context, chatID, key string) (m chat.Message, ok bool, err error) {
	if !holdable(chatID) || !holdable(key) {
		return chat.Message{}, false, nil
	}
	var seq int64
	var b []byte
	err = p.read(ctx, p.lane(ctx, chatID), func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT seq, data FROM messages
			WHERE chat_id = $1 AND idempotency_key = $2 ORDER BY seq DESC LIMIT 1`, chatID, key).Scan(&seq, &b)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return chat.Message{}, false, nil
	}
	if err == nil {
		err = decode(b, &m)
	}
	if err != nil {
		return chat.Message{}, false, fmt.Errorf("find idempotency key in chat %s: %w", chatID, err)
	}
	m.Seq = seq // the row's, not the value's (see appendTx)
	return m, true, nil
}
