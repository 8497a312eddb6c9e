package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit/pgtest"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// store is what the tests ask of either backend.
type store interface {
	CreateChat(ctx context.Context, c Chat) error
	UpdateChat(ctx context.Context, c Chat) error
	Chat(ctx context.Context, id string) (Chat, error)
	ChatTenant(ctx context.Context, id string) (string, error)
	CountChats(ctx context.Context, tenant string) (int, error)
	Chats(ctx context.Context, tenant string) ([]Chat, error)
	ChatsPage(ctx context.Context, tenant, after string, limit int) ([]Chat, bool, error)
	DeleteChat(ctx context.Context, id string, records ...RecordKey) error
	Append(ctx context.Context, chatID string, msgs ...chat.Message) ([]chat.Message, error)
	AppendThen(ctx context.Context, chatID string, msgs []chat.Message, then func([]chat.Message, error))
	AppendWithSnapshotThen(ctx context.Context, chatID string, snap func(lastSeq int64) Snapshot, acts []Activity, msgs []chat.Message, then func([]chat.Message, error))
	Messages(ctx context.Context, chatID string, from, to int64) ([]chat.Message, error)
	MessagesWithin(ctx context.Context, chatID string, from, to int64, maxBytes int) ([]chat.Message, error)
	LastSeq(ctx context.Context, chatID string) (int64, error)
	AppendActivity(ctx context.Context, chatID string, a Activity) (Activity, error)
	ActivityPage(ctx context.Context, chatID string, after int64, limit int) ([]Activity, bool, error)
	SaveSnapshot(ctx context.Context, chatID string, snap Snapshot, acts ...Activity) error
	LoadSnapshot(ctx context.Context, chatID string) (Snapshot, bool, error)
	LearnWindow(ctx context.Context, provider, model string, window int) (int, error)
	LearnedWindows(ctx context.Context) (map[string]int, error)
	PutRecord(ctx context.Context, kind, id string, v any) error
	PutRecords(ctx context.Context, recs ...RecordPut) error
	DeleteRecord(ctx context.Context, kind, id string) error
	Record(ctx context.Context, kind, id string, v any) error
	Records(ctx context.Context, kind string, fn func(id string, decode func(v any) error) error) error
	RecordsPrefix(ctx context.Context, kind, prefix string, fn func(id string, decode func(v any) error) error) error
	KeyedMessage(ctx context.Context, chatID, key string) (chat.Message, bool, error)
	ImportChat(ctx context.Context, c Chat, snap Snapshot, msgs []chat.Message, recs ...RecordPut) error
	Close() error
}

// appendWithSnapshot waits for s's AppendWithSnapshotThen.
func appendWithSnapshot(ctx context.Context, s store, chatID string, snap func(lastSeq int64) Snapshot, acts []Activity, msgs ...chat.Message) ([]chat.Message, error) {
	return waitFor(func(then func([]chat.Message, error)) { s.AppendWithSnapshotThen(ctx, chatID, snap, acts, msgs, then) })
}

// saveTurn saves snap as a turn's answer does, in the write of an answer
// with content, and returns it as stored (its LastSeqSent the answer's).
func saveTurn(t *testing.T, s store, chatID string, snap Snapshot, content string) Snapshot {
	t.Helper()
	if _, err := appendWithSnapshot(context.Background(), s, chatID, func(last int64) Snapshot {
		snap.LastSeqSent = last
		return snap
	}, nil, chat.Message{Role: chat.RoleAssistant, Content: content}); err != nil {
		t.Fatal(err)
	}
	snap.Stored()
	return snap
}

// eachBackend runs f on Badger and on Postgres (skipped, saying so, unless
// AGENTD_TEST_PG_DSN is set). Every open of one run reopens the same data.
func eachBackend(t *testing.T, f func(t *testing.T, open func(t *testing.T) store)) {
	t.Run("badger", func(t *testing.T) {
		dir := t.TempDir()
		f(t, func(t *testing.T) store {
			t.Helper()
			s, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		f(t, func(t *testing.T) store {
			t.Helper()
			s, _, err := OpenPostgres(context.Background(), dsn, PostgresOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
}

func TestAppendAssignsIncreasingSeqsAndSurvivesReopen(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		if err := s.CreateChat(ctx, Chat{ID: "a", Tenant: "t1", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Append(ctx, "a", chat.Message{Role: chat.RoleUser, Content: "one"}, chat.Message{Role: chat.RoleAssistant, Content: "two \x00 with a NUL"})
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Seq != 1 || got[1].Seq != 2 {
			t.Fatalf("seqs = %d,%d, want 1,2", got[0].Seq, got[1].Seq)
		}
		if _, err := s.Append(ctx, "b", chat.Message{Role: chat.RoleUser, Content: "other chat"}); err != nil {
			t.Fatal(err)
		}
		more, _ := appendWithSnapshot(ctx, s, "a", func(last int64) Snapshot { return Snapshot{LastSeqSent: last} }, nil,
			chat.Message{Role: chat.RoleUser, Content: "three"})
		if more[0].Seq != 3 {
			t.Fatalf("third seq = %d, want 3 (chat b must not disturb a's seqs)", more[0].Seq)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2 := open(t)
		defer s2.Close()
		msgs, err := s2.Messages(ctx, "a", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"one", "two \x00 with a NUL", "three"}
		if len(msgs) != len(want) {
			t.Fatalf("got %d messages, want %d", len(msgs), len(want))
		}
		for i, m := range msgs {
			if m.Content != want[i] || m.Seq != int64(i+1) {
				t.Errorf("msg %d = %q seq %d", i, m.Content, m.Seq)
			}
		}
		rng, _ := s2.Messages(ctx, "a", 2, 2)
		if len(rng) != 1 || rng[0].Seq != 2 {
			t.Errorf("range 2..2 = %+v", rng)
		}
		if last, _ := s2.LastSeq(ctx, "a"); last != 3 {
			t.Errorf("last seq = %d", last)
		}
		if snap, ok, err := s2.LoadSnapshot(ctx, "a"); err != nil || !ok || snap.LastSeqSent != 3 {
			t.Errorf("the snapshot saved with the append = %+v, %v, %v; want it built from seq 3", snap, ok, err)
		}
	})
}

func TestCreateChatTwiceFailsAndChatsFilterByTenant(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		defer s.Close()
		if err := s.CreateChat(ctx, Chat{ID: "x", Tenant: "t1", Title: "first"}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateChat(ctx, Chat{ID: "x", Tenant: "t2"}); err == nil {
			t.Fatal("second create of the same id succeeded")
		}
		if c, err := s.Chat(ctx, "x"); err != nil || c.Tenant != "t1" || c.Title != "first" {
			t.Fatalf("the failed create changed the chat: %+v, %v", c, err)
		}
		for _, id := range []string{"y", "Z", "w"} {
			if err := s.CreateChat(ctx, Chat{ID: id, Tenant: "t2"}); err != nil {
				t.Fatal(err)
			}
		}
		cs, _ := s.Chats(ctx, "t1")
		if len(cs) != 1 || cs[0].ID != "x" || cs[0].Tenant != "t1" {
			t.Fatalf("tenant t1 chats = %+v", cs)
		}
		if _, err := s.Chat(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown chat: %v, want ErrNotFound", err)
		}
		if tenant, err := s.ChatTenant(ctx, "x"); err != nil || tenant != "t1" {
			t.Fatalf("the tenant of x: %q, %v", tenant, err)
		}
		if _, err := s.ChatTenant(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the tenant of an unknown chat: %v, want ErrNotFound", err)
		}
		if n, _ := s.CountChats(ctx, "t2"); n != 3 {
			t.Fatalf("t2 counts %d chats, want 3 (a failed create must not count)", n)
		}
		if all, _ := s.Chats(ctx, ""); len(all) != 4 {
			t.Fatalf("all chats = %d", len(all))
		}
		// Pages go in byte order of the ids, as Badger's keys sort.
		var ids []string
		for after, more := "", true; more; {
			page, m, err := s.ChatsPage(ctx, "t2", after, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range page {
				ids = append(ids, c.ID)
			}
			after, more = page[len(page)-1].ID, m
		}
		if strings.Join(ids, ",") != "Z,w,y" {
			t.Fatalf("pages = %v, want Z,w,y", ids)
		}
		if err := s.UpdateChat(ctx, Chat{ID: "x", Tenant: "t1", Title: "renamed"}); err != nil {
			t.Fatal(err)
		}
		if c, _ := s.Chat(ctx, "x"); c.Title != "renamed" {
			t.Fatalf("updated chat = %+v", c)
		}
	})
}

func TestLearnWindowKeepsTheSmaller(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		defer s.Close()
		for _, c := range []struct{ in, want int }{{32000, 32000}, {64000, 32000}, {8192, 8192}} {
			got, err := s.LearnWindow(ctx, "p", "m", c.in)
			if err != nil || got != c.want {
				t.Fatalf("LearnWindow(%d) = %d, %v; want %d", c.in, got, err, c.want)
			}
		}
		ws, _ := s.LearnedWindows(ctx)
		if ws["p/m"] != 8192 || len(ws) != 1 {
			t.Fatalf("learned = %v", ws)
		}
	})
}

func TestRecordsRoundTripInIDOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		defer s.Close()
		for _, id := range []string{"b", "a", "c"} {
			if err := s.PutRecord(ctx, "memory/t1", id, map[string]string{"text": "of " + id}); err != nil {
				t.Fatal(err)
			}
		}
		_ = s.PutRecord(ctx, "memory/t2", "a", map[string]string{"text": "another tenant"})
		if err := s.DeleteRecord(ctx, "memory/t1", "c"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteRecord(ctx, "memory/t1", "never"); err != nil {
			t.Fatalf("deleting a missing record: %v", err)
		}
		var got []string
		err := s.Records(ctx, "memory/t1", func(id string, decode func(any) error) error {
			var v map[string]string
			if err := decode(&v); err != nil {
				return err
			}
			got = append(got, id+"="+v["text"])
			return nil
		})
		if err != nil || strings.Join(got, ",") != "a=of a,b=of b" {
			t.Fatalf("records = %v, %v", got, err)
		}
		var v map[string]string
		if err := s.Record(ctx, "memory/t1", "c", &v); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a deleted record: %v", err)
		}
	})
}

// TestRecordsPrefixReadsOnlyThatPrefix: a tenant's records ("<tenant>/…")
// come back without another tenant's, even one whose name starts with the
// same letters, or another kind's.
func TestRecordsPrefixReadsOnlyThatPrefix(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		defer s.Close()
		for _, r := range []RecordPut{{"toolset", "alice/b", "ab"}, {"toolset", "alice/a", "aa"}, {"toolset", "alice2/a", "a2"},
			{"toolset", "alicd/z", "az"}, {"toolset", "bob/a", "ba"}, {"toolsets", "alice/c", "other kind"}} {
			if err := s.PutRecords(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		read := func(prefix string) []string {
			var got []string
			err := s.RecordsPrefix(ctx, "toolset", prefix, func(id string, decode func(any) error) error {
				var v string
				err := decode(&v)
				got = append(got, id+"="+v)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got, want := read("alice/"), []string{"alice/a=aa", "alice/b=ab"}; !slices.Equal(got, want) {
			t.Errorf("prefix alice/: %q, want %q", got, want)
		}
		if got := read("carol/"); len(got) != 0 {
			t.Errorf("prefix carol/: %q, want none", got)
		}
		if got := read(""); len(got) != 5 {
			t.Errorf("no prefix: %q, want the kind's 5 records", got)
		}
	})
}

// TestPutRecordsStoresAllOrNone: PutRecords writes its records together;
// one that cannot be encoded fails the write with its kind and id, and
// none of the others is stored.
func TestPutRecordsStoresAllOrNone(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		defer s.Close()
		if err := s.PutRecords(ctx, RecordPut{Kind: "run/t1", ID: "r1", V: "the run"}, RecordPut{Kind: "memory/t1", ID: "m1", V: "a fact"}); err != nil {
			t.Fatal(err)
		}
		err := s.PutRecords(ctx, RecordPut{Kind: "run/t1", ID: "r2", V: "another run"}, RecordPut{Kind: "memory/t1", ID: "m2", V: func() {}})
		if err == nil || !strings.Contains(err.Error(), "memory/t1 m2") {
			t.Fatalf("a record that cannot be encoded: %v", err)
		}
		var got []string
		for _, kind := range []string{"run/t1", "memory/t1"} {
			_ = s.Records(ctx, kind, func(id string, decode func(any) error) error {
				var v string
				err := decode(&v)
				got = append(got, kind+" "+id+"="+v)
				return err
			})
		}
		if want := []string{"run/t1 r1=the run", "memory/t1 m1=a fact"}; !slices.Equal(got, want) {
			t.Fatalf("records %q, want %q", got, want)
		}
	})
}

func TestSnapshotReaderIgnoresUnknownFields(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{"v": 7, "d": map[string]any{"summary": "s", "first_kept_seq": 9, "from_the_future": true}})
	snap, err := DecodeSnapshot(raw)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Summary != "s" || snap.FirstKeptSeq != 9 {
		t.Fatalf("decoded %+v", snap)
	}
	if _, err := DecodeSnapshot([]byte("{not json")); err == nil {
		t.Fatal("garbage decoded without error")
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	f.Add([]byte(`{"v":1,"d":{"summary":"x","first_kept_seq":3}}`))
	f.Add([]byte(`{"v":1,"d":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		snap, err := DecodeSnapshot(b)
		if err != nil {
			return
		}
		// Whatever decodes must encode and decode back to the same value.
		again, err := encode(snap)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeSnapshot(again)
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if back.Summary != snap.Summary || back.FirstKeptSeq != snap.FirstKeptSeq {
			t.Fatalf("round trip changed the snapshot")
		}
	})
}

// keysUnder lists the keys whose text starts with any of prefixes.
func keysUnder(t *testing.T, s *Store, prefixes ...string) []string {
	t.Helper()
	var out []string
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := string(it.Item().Key())
			for _, p := range prefixes {
				if strings.HasPrefix(k, p) {
					out = append(out, k)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// chatKeys are the key prefixes of everything stored under chat id.
func chatKeys(tenant, id string) []string {
	return []string{"c/" + id, "t/" + tenant + "/" + id, "s/" + id, "m/" + id + "/", "i/" + id + "/", "d/" + id, "k/mark/" + id}
}

// storedOf names what either backend holds of chat id (with its "mark"
// record): keys on Badger, table rows on Postgres.
func storedOf(t *testing.T, s store, tenant, id string) []string {
	t.Helper()
	pg, ok := s.(*Postgres)
	if !ok {
		return keysUnder(t, s.(*Store), chatKeys(tenant, id)...)
	}
	var out []string
	for _, q := range []string{
		`SELECT 'chats/' || id FROM chats WHERE id = $1`,
		`SELECT 'messages/' || seq FROM messages WHERE chat_id = $1`,
		`SELECT 'snapshots/' || chat_id FROM snapshots WHERE chat_id = $1`,
		`SELECT 'records/' || id FROM records WHERE kind = 'mark' AND id = $1`,
	} {
		rows, err := pg.pool.Query(context.Background(), q, id)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, names...)
	}
	return out
}

func TestDeleteChatRemovesAllOfTheChatAndNothingElse(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		defer s.Close()
		for _, id := range []string{"a", "b"} {
			if err := s.CreateChat(ctx, Chat{ID: id, Tenant: "t1", CreatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Append(ctx, id, chat.Message{Role: chat.RoleUser, Content: "hello " + id, IdempotencyKey: "key-" + id}); err != nil {
				t.Fatal(err)
			}
			if err := s.SaveSnapshot(ctx, id, Snapshot{Summary: "of " + id}); err != nil {
				t.Fatal(err)
			}
			if err := s.PutRecord(ctx, "mark", id, 1); err != nil {
				t.Fatal(err)
			}
		}
		kept := storedOf(t, s, "t1", "b")
		if err := s.DeleteChat(ctx, "a", RecordKey{Kind: "mark", ID: "a"}); err != nil {
			t.Fatal(err)
		}
		if left := storedOf(t, s, "t1", "a"); len(left) != 0 {
			t.Fatalf("left of the deleted chat: %q", left)
		}
		if n, _ := s.CountChats(ctx, "t1"); n != 1 {
			t.Fatalf("the tenant counts %d chats, want 1", n)
		}
		if _, ok, err := s.KeyedMessage(ctx, "a", "key-a"); ok || err != nil {
			t.Fatalf("the deleted chat's key is still found: %v, %v", ok, err)
		}
		if after := storedOf(t, s, "t1", "b"); len(kept) < 4 || !slices.Equal(after, kept) {
			t.Fatalf("the other chat lost data: %q, had %q", after, kept)
		}
		if err := s.DeleteChat(ctx, "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleting again: %v, want ErrNotFound", err)
		}
	})
}

func TestDeleteOfAChatTooBigForOneTransactionFinishesAfterACrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	small := Options{memTable: 8 << 20} // one transaction takes about 14,000 keys
	s, err := Open(dir, small)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"big", "crashed"} {
		if err := s.CreateChat(ctx, Chat{ID: id, Tenant: "t1", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		for range 40 {
			batch := make([]chat.Message, 500)
			for i := range batch {
				batch[i] = chat.Message{Role: chat.RoleUser, Content: "a message of some length"}
			}
			if _, err := s.Append(ctx, id, batch...); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The premise: the log does not fit one transaction.
	err = s.db.Update(func(txn *badger.Txn) error {
		whole, err := deleteRest(&writeTxn{tx: txn}, "big")
		if err == nil && whole {
			return errors.New("20,000 messages fit one transaction; the test needs more")
		}
		return errors.New("discard")
	})
	if err == nil || err.Error() != "discard" {
		t.Fatal(err)
	}

	if err := s.DeleteChat(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	if left := keysUnder(t, s, chatKeys("t1", "big")...); len(left) != 0 {
		t.Fatalf("%d keys left of the deleted chat, e.g. %q", len(left), left[0])
	}

	// A crash after the first transaction leaves the tombstone and the log.
	err = s.db.Update(func(txn *badger.Txn) error {
		for _, k := range [][]byte{chatKey("crashed"), tenantKey("t1", "crashed")} {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return txn.Set(deletingKey("crashed"), nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, small)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if left := keysUnder(t, s, chatKeys("t1", "crashed")...); len(left) != 0 {
		t.Fatalf("%d keys left of the chat whose deletion a crash cut, e.g. %q", len(left), left[0])
	}
}

// TestAStoreKilledAfterUnsyncedAppendsOpensWithThem: the files of an open
// store, copied after appends that were never synced, are what a killed
// process leaves behind (its commits are in the kernel's page cache). They
// open, with the unsynced messages in the log, and the log goes on.
func TestAStoreKilledAfterUnsyncedAppendsOpensWithThem(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openBadger(t, dir)
	if err := s.CreateChat(ctx, Chat{ID: "a", Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "a", chat.Message{Role: chat.RoleUser, Content: "run it"}); err != nil {
		t.Fatal(err)
	}
	call := chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "k1", Name: "echo", Arguments: "{}"}}}
	if _, err := s.AppendUnsynced(ctx, "a", call); err != nil {
		t.Fatal(err)
	}
	s2 := openBadger(t, killed(t, dir))
	if _, err := s2.Append(ctx, "a", chat.Message{Role: chat.RoleUser, Content: "again"}); err != nil {
		t.Fatal(err)
	}
	msgs, err := s2.Messages(ctx, "a", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || msgs[1].Seq != 2 || len(msgs[1].ToolCalls) != 1 || msgs[2].Seq != 3 {
		t.Fatalf("log after the kill: %+v", msgs)
	}
}

// TestEnvelopeIsJSONs: encode writes the bytes json.Marshal writes for an
// envelope, and decode reads every spelling of one (Postgres's jsonb puts
// spaces in and the keys in its own order) as the long way does.
func TestEnvelopeIsJSONs(t *testing.T) {
	values := []any{
		Snapshot{Summary: "a <b> & \"c\"\n\u2028", FirstKeptSeq: 3, Requests: []chat.RequestLog{{Estimate: 5}}},
		chat.Message{Role: chat.RoleUser, Content: "héllo", Seq: 9},
		Chat{ID: "c", Title: "t"}, 42, "text", nil,
	}
	for _, v := range values {
		d, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(envelope{V: FormatVersion, D: d})
		got, err := encode(v)
		if err != nil || string(got) != string(want) {
			t.Fatalf("encode(%#v) = %s, %v; json.Marshal gives %s", v, got, err, want)
		}
	}
	for _, b := range []string{
		`{"v":1,"d":{"summary":"s","first_kept_seq":9}}`,
		`{"d": {"summary": "s", "first_kept_seq": 9}, "v": 1}`,
		` {"v":1,"d":{"summary":"s","first_kept_seq":9}} `,
		`{"v":12,"d":{"summary":"s","first_kept_seq":9,"new":[1]}}`,
	} {
		var snap Snapshot
		if err := decode([]byte(b), &snap); err != nil || snap.Summary != "s" || snap.FirstKeptSeq != 9 {
			t.Fatalf("decode(%s) = %+v, %v", b, snap, err)
		}
	}
	for _, b := range []string{
		`{"v":1,"d":{"summary":"s"},"d":{"summary":"t"}`,
		`{"v":1,"d":{"summary":"s"}`,
		`{"v":1,"d":{"summary":1}}`,
		`{"v":,"d":{}}`,
	} {
		var snap Snapshot
		if err := decode([]byte(b), &snap); err == nil {
			t.Fatalf("decode(%s) = %+v, want an error", b, snap)
		}
	}
}

// FuzzEncodeIsJSONs: for any content of the records a turn writes (a
// snapshot, a chat record, a message), encode writes the bytes
// json.Marshal writes for its envelope, or fails where json.Marshal does,
// and decode reads them back to the value encoding/json reads. The one
// spelling that differs: a string that is not UTF-8 has each bad byte
// replaced by U+FFFD by both, which encode writes as itself and
// json.Marshal as \ufffd; encoding/json reads the two the same. A chat
// record's last_seq, rewritten in place by an append, reads and writes as
// encode does. A snapshot encodeSnapshot parts from its request log reads
// back whole from the parts.
func FuzzEncodeIsJSONs(f *testing.F) {
	f.Add("a <b> & \"c\"\n\u2028\x7f", "\xff\xfe\b\f\t\x01", 1.5, int64(1e15), 3, true, []byte(`{"type":"object", "x":"<&>"}`))
	f.Add("", "", 1e21, int64(-1), 0, false, []byte(`null`))
	f.Add("é", "日本", 1e-7, int64(253402300800), 999999999, true, []byte(`[1, 2.50, "\u00e9"]`))
	f.Add("x", "y", 0.0, int64(0), -5, false, []byte(`{"a":`))
	f.Fuzz(func(t *testing.T, s1, s2 string, fl float64, sec int64, n int, b bool, raw []byte) {
		at := time.Unix(sec, int64(n)).UTC()
		if b {
			at = at.In(time.FixedZone("x", n%50000))
		}
		snap := Snapshot{Model: s1, Summary: s2, Digest: s1 + s2, FirstKeptSeq: sec, Factor: fl,
			LastReported: n, LoadedTools: []string{s1, s2}, FoldPaused: at, Untrusted: b,
			Requests: []chat.RequestLog{{At: at, Estimate: n, Reported: -n, Budget: int(sec), Window: n / 3, Kind: s1}, {Kind: s2}, {At: at}}[:uint(n)%4]}
		if b {
			snap.Paused = &PausedTurn{TurnID: s2, UserSeq: sec, Calls: []chat.ToolCall{{ID: s1, Arguments: s2}}, Since: at}
			snap.DeclinedTools = []string{}
		}
		c := Chat{ID: s1, Tenant: s2, Title: s1, CreatedAt: at, Shared: b, InstructionsVersion: n,
			Settings: chat.Settings{Temperature: &fl, Stop: []string{s2}},
			Tools:    []chat.ToolSpec{{Name: s1, Parameters: raw}}, LastSeq: sec}
		m := chat.Message{Seq: sec, Role: chat.Role(s1), Content: s2, CreatedAt: at, IsError: b,
			ToolCalls: []chat.ToolCall{{Name: s2}}, Images: []chat.Image{{MediaType: s1, Data: []byte(s2)}},
			Attachments: []chat.Attachment{{Size: sec, Note: s1}}}
		if e, err := encodeSnapshot(snap); err == nil {
			var back, turn Snapshot
			if err := decode(e.whole, &back); err != nil || back.Requests != nil || e.first != 1 || len(e.reqs) != len(snap.Requests) {
				t.Fatalf("encodeSnapshot(%#v): record %s (%v), requests from %d: %q", snap, e.whole, err, e.first, e.reqs)
			}
			if err := decode(e.turn, &turn); err != nil || turn.SummaryFP != back.SummaryFP || back.SummaryFP != summaryFP(&snap) || turn.Summary != "" || turn.Digest != "" {
				t.Fatalf("encodeSnapshot(%#v): turn record %s (%v) beside %s", snap, e.turn, err, e.whole)
			}
			back = joinSummary(back, turn, true)
			back.held = heldSummary{}
			for _, r := range e.reqs {
				var rl chat.RequestLog
				if err := decode(r, &rl); err != nil {
					t.Fatalf("request %s: %v", r, err)
				}
				back.Requests = append(back.Requests, rl)
			}
			want := snap
			want.RequestsLogged = int64(len(snap.Requests))
			var wantV Snapshot // read as back was, once, from one value
			if whole, err := encode(want); err != nil || decode(whole, &wantV) != nil || !reflect.DeepEqual(wantV, back) {
				t.Fatalf("encodeSnapshot(%#v) reads back as %#v", wantV, back)
			}
		} else if _, errSlow := encode(snap); errSlow == nil {
			t.Fatalf("encodeSnapshot(%#v): %v; encode takes it", snap, err)
		}
		if val, err := encode(c); err == nil {
			if titled(val) != (c.Title != "") {
				t.Fatalf("titled(%s) = %v; the record's title is %q", val, titled(val), c.Title)
			}
			last, head, ok := cutLastSeq(val)
			if ok != (c.LastSeq > 0) || last != max(c.LastSeq, 0) {
				t.Fatalf("cutLastSeq(%s) = %d, %v; the record's LastSeq is %d", val, last, ok, c.LastSeq)
			}
			next := c
			next.LastSeq += int64(uint16(n)) + 1
			if want, _ := encode(next); ok && string(withLastSeq(head, next.LastSeq)) != string(want) {
				t.Fatalf("withLastSeq(%s, %d) = %s; encode gives %s", head, next.LastSeq, withLastSeq(head, next.LastSeq), want)
			}
		}
		for _, v := range []any{snap, c, m, &snap, fl, s1, []any{n, b, nil}} {
			got, errGot := encode(v)
			d, errWant := json.Marshal(v)
			if (errGot == nil) != (errWant == nil) {
				t.Fatalf("encode(%#v): %v; json.Marshal: %v", v, errGot, errWant)
			}
			if errGot != nil {
				continue
			}
			want, _ := json.Marshal(envelope{V: FormatVersion, D: d})
			if utf8.ValidString(s1) && utf8.ValidString(s2) && utf8.Valid(raw) && string(got) != string(want) {
				t.Fatalf("encode(%#v) = %s; json.Marshal gives %s", v, got, want)
			}
			var gotV, wantV any
			if json.Unmarshal(got, &gotV) != nil || json.Unmarshal(want, &wantV) != nil || !reflect.DeepEqual(gotV, wantV) {
				t.Fatalf("encode(%#v) = %s, which encoding/json reads unlike json.Marshal's %s", v, got, want)
			}
			fast := reflect.New(reflect.TypeOf(v))
			slow := reflect.New(reflect.TypeOf(v))
			errFast, errSlow := decode(got, fast.Interface()), decodeEnvelope(got, slow.Interface())
			if errFast != nil || errSlow != nil || !reflect.DeepEqual(fast.Interface(), slow.Interface()) {
				t.Fatalf("decode(%s) = %#v, %v; the long way %#v, %v", got, fast.Elem(), errFast, slow.Elem(), errSlow)
			}
		}
	})
}

// TestMayTitleReadsTheHead: whether a person's words may title a chat is
// read from the record's head, even where a title's spelling is inside
// another field, and without decoding the record (which every turn of a
// titled chat did, for its one field).
func TestMayTitleReadsTheHead(t *testing.T) {
	person := []chat.Message{{Role: chat.RoleUser, Origin: chat.OriginPerson, Content: "hi"}}
	trap := `,"title":"x"`
	for _, c := range []Chat{
		{ID: "c", Tenant: "t", Title: "Costs"},
		{ID: "c", Tenant: "t"},
		{ID: `a\"b` + trap, Tenant: `\` + trap, Instructions: trap, LastSeq: 7},
		{ID: "c", Tenant: "t", Instructions: trap, Tools: []chat.ToolSpec{{Name: "f", Parameters: []byte(`{"title":"x"}`)}}},
		{ID: `"`, Tenant: "", Title: `"`},
	} {
		val, err := encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := mayTitle(val, person), c.Title == ""; got != want {
			t.Errorf("mayTitle(%s) = %v, want %v", val, got, want)
		}
		if mayTitle(val, []chat.Message{{Role: chat.RoleAssistant, Content: "hi"}}) {
			t.Errorf("mayTitle(%s) of an answer: true", val)
		}
	}
	for _, val := range []string{`{"d":{"title":"x"},"v":1}`, `{"v":1,"d":{"id":"c","tenant":"t","title":`, `{"v":1,"d":{"id":"c`} {
		if !mayTitle([]byte(val), person) {
			t.Errorf("mayTitle(%s): false; another spelling goes the long way", val)
		}
	}
	val, err := encode(Chat{ID: "c", Tenant: "t", Title: "Costs", Instructions: strings.Repeat("Answer briefly. ", 40), LastSeq: 9})
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { mayTitle(val, person) }); n != 0 {
		t.Errorf("mayTitle of a titled chat allocates %v times, want 0", n)
	}
}

// TestEncodeAllocatesItsValueOnly: encode's one allocation is the value it
// returns (it was json.Marshal's copy, then the envelope's), given a
// pointer (a value is copied to be addressable).
func TestEncodeAllocatesItsValueOnly(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector drops pooled buffers")
	}
	m := &chat.Message{Seq: 3, Role: chat.RoleAssistant, Content: strings.Repeat("The report says this. ", 20), CreatedAt: time.Now().UTC()}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := encode(m); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("encode of a message allocates %v times, want 1", n)
	}
}

// FuzzEnvelopeShortcut: whatever bytes a store holds, decode's shortcut
// decides as the long way does, and to the same value.
func FuzzEnvelopeShortcut(f *testing.F) {
	f.Add([]byte(`{"v":1,"d":{"summary":"x","first_kept_seq":3}}`))
	f.Add([]byte(`{"v":1,"d":{"summary":"x"},"d":{"summary":"y"}}`))
	f.Add([]byte(`{"v":1,"d":null}`))
	f.Add([]byte(`{"v":1,"d":{"summary":"x"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, slow Snapshot
		errFast, errSlow := decode(b, &fast), decodeEnvelope(b, &slow)
		if (errFast == nil) != (errSlow == nil) {
			t.Fatalf("decode: %v; the long way: %v", errFast, errSlow)
		}
		if errFast == nil && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("decode gives %+v; the long way %+v", fast, slow)
		}
	})
}

// TestAPageOfMessagesStopsAtItsBytes: MessagesWithin reads a range up to
// a byte bound: never empty (a first message larger than the bound comes
// alone), nothing after the message that reaches the bound, and pages read
// on from the seq after each page's last make up the whole log.
func TestAPageOfMessagesStopsAtItsBytes(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		defer s.Close()
		if err := s.CreateChat(ctx, Chat{ID: "p", Tenant: "t1", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		var msgs []chat.Message
		for i := range 30 {
			size := 100
			if i%7 == 3 {
				size = 5000
			}
			msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: strings.Repeat(string(rune('a'+i%26)), size)})
		}
		if _, err := s.Append(ctx, "p", msgs...); err != nil {
			t.Fatal(err)
		}
		all, err := s.MessagesWithin(ctx, "p", 1, 0, 0)
		if err != nil || len(all) != len(msgs) {
			t.Fatalf("unbounded: %d messages (%v)", len(all), err)
		}
		const bound = 450
		var paged []chat.Message
		for from := int64(1); from <= int64(len(msgs)); {
			page, err := s.MessagesWithin(ctx, "p", from, 0, bound)
			if err != nil || len(page) == 0 || page[0].Seq != from {
				t.Fatalf("page from %d: %d messages (%v)", from, len(page), err)
			}
			before := 0
			for i, m := range page {
				if i > 0 && before >= bound {
					t.Fatalf("page from %d goes on past %d bytes: %d messages", from, before, len(page))
				}
				before += len(m.Content)
			}
			if len(page) == len(msgs) {
				t.Fatalf("page from %d holds the whole log", from)
			}
			paged = append(paged, page...)
			from = page[len(page)-1].Seq + 1
		}
		if len(paged) != len(all) {
			t.Fatalf("the pages hold %d messages, the log %d", len(paged), len(all))
		}
		for i := range all {
			if paged[i].Seq != all[i].Seq || paged[i].Content != all[i].Content {
				t.Fatalf("message %d paged as seq %d, stored as seq %d", i, paged[i].Seq, all[i].Seq)
			}
		}
		big, err := s.MessagesWithin(ctx, "p", 4, 10, 1)
		if err != nil || len(big) != 1 || big[0].Seq != 4 || len(big[0].Content) != 5000 {
			t.Fatalf("a bound under the first message: %d messages (%v)", len(big), err)
		}
		if rng, err := s.MessagesWithin(ctx, "p", 5, 6, 1<<20); err != nil || len(rng) != 2 || rng[1].Seq != 6 {
			t.Fatalf("a range within the bound: %d messages (%v)", len(rng), err)
		}
	})
}

// TestAnIDPostgresCannotHoldNamesNothing: an id of bytes Postgres's text
// refuses (a NUL, bytes that are not UTF-8, a lone surrogate's) — a
// request's path may carry any — reads as not found on both backends, as
// an unknown id does, never as the server's error.
func TestAnIDPostgresCannotHoldNamesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		s := open(t)
		defer s.Close()
		ctx := context.Background()
		if err := s.CreateChat(ctx, Chat{ID: "c", Tenant: "t"}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"c\x00", "c\xff", "\xed\xa0\x80"} {
			if _, err := s.ChatTenant(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("ChatTenant(%q): %v, want not found", id, err)
			}
			if _, err := s.Chat(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Chat(%q): %v, want not found", id, err)
			}
			if err := s.DeleteChat(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("DeleteChat(%q): %v, want not found", id, err)
			}
			if err := s.Record(ctx, "memory", "t/"+id, new(int)); !errors.Is(err, ErrNotFound) {
				t.Errorf("Record(%q): %v, want not found", id, err)
			}
			if err := s.DeleteRecord(ctx, "memory", "t/"+id); err != nil {
				t.Errorf("DeleteRecord(%q): %v, want nothing to delete", id, err)
			}
			if err := s.RecordsPrefix(ctx, "memory", "t/"+id, func(string, func(any) error) error {
				t.Errorf("RecordsPrefix(%q) found a record", id)
				return nil
			}); err != nil {
				t.Errorf("RecordsPrefix(%q): %v", id, err)
			}
			if _, ok, err := s.KeyedMessage(ctx, "c", id); ok || err != nil {
				t.Errorf("KeyedMessage(%q): %v, %v; want none", id, ok, err)
			}
		}
	})
}

// TestTextPostgresRefusesElsewhereRoundTrips: what a tenant may send that
// Postgres's text and jsonb refuse — a NUL, a JSON lone surrogate's escape
// in a tool schema — and long text, in a message, a tool call and result,
// an attachment's name, a tool schema, a summary and a record, read back
// from both backends as written.
func TestTextPostgresRefusesElsewhereRoundTrips(t *testing.T) {
	const odd = "a\x00b \u2028 é 日本 \x7f"
	long := strings.Repeat("long text, ", 100_000)
	schema := json.RawMessage(`{"type":"object","description":"\u0000 \ud800 \udc00 \ud83d\ude00"}`)
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		s := open(t)
		defer s.Close()
		ctx := context.Background()
		c := Chat{ID: "c", Tenant: "t", Title: odd, Tools: []chat.ToolSpec{{Name: "f", Description: odd, Parameters: schema}}}
		if err := s.CreateChat(ctx, c); err != nil {
			t.Fatal(err)
		}
		msgs := []chat.Message{
			{Role: chat.RoleUser, Content: odd + long, Attachments: []chat.Attachment{{ID: "h", Name: odd, Note: odd}}},
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call", Name: "f", Arguments: `{"x":"` + odd + `"}`}}},
			{Role: chat.RoleTool, ToolCallID: "call", ToolName: "f", Content: odd},
		}
		if _, err := s.Append(ctx, "c", msgs...); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveSnapshot(ctx, "c", Snapshot{Summary: odd + long, FirstKeptSeq: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutRecord(ctx, "memory", "t/m", map[string]string{"text": odd}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s = open(t)
		got, err := s.Chat(ctx, "c")
		if err != nil || got.Title != odd || got.Tools[0].Description != odd || string(got.Tools[0].Parameters) != string(schema) {
			t.Fatalf("chat = %q %q %s, %v; want %q and the schema %s as written", got.Title, got.Tools[0].Description, got.Tools[0].Parameters, err, odd, schema)
		}
		back, err := s.Messages(ctx, "c", 1, 0)
		if err != nil || len(back) != 3 {
			t.Fatalf("log = %d messages, %v", len(back), err)
		}
		for i := range back {
			back[i].Seq, back[i].CreatedAt = 0, msgs[i].CreatedAt
		}
		if !reflect.DeepEqual(back, msgs) {
			t.Fatalf("log reads back otherwise than written")
		}
		snap, ok, err := s.LoadSnapshot(ctx, "c")
		if err != nil || !ok || snap.Summary != odd+long {
			t.Fatalf("snapshot's summary: %d bytes, %v, %v; want %d bytes as written", len(snap.Summary), ok, err, len(odd+long))
		}
		var rec map[string]string
		if err := s.Record(ctx, "memory", "t/m", &rec); err != nil || rec["text"] != odd {
			t.Fatalf("record = %q, %v; want %q", rec["text"], err, odd)
		}
	})
}
