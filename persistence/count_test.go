package persistence

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentd/agentd/chat"
)

// reopen closes s and opens the store in dir again, as a restart does.
func reopen(t *testing.T, s *Store, dir string) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAppendKeepsTheRecordsCountAndTitle(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	defer s.Close()
	for _, c := range []Chat{{ID: "a", Tenant: "t"}, {ID: "b", Tenant: "t", Title: "Given"}, {ID: "c", Tenant: "t"}} {
		if err := s.CreateChat(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Append(ctx, "a", chat.Message{Role: chat.RoleUser, Origin: chat.OriginApp, Content: "injected"},
		chat.Message{Role: chat.RoleUser, Content: "\n  Plan my   trip\nto Lisbon"}, chat.Message{Role: chat.RoleAssistant, Content: "Sure"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "a", chat.Message{Role: chat.RoleUser, Content: "Another thing"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "b", chat.Message{Role: chat.RoleUser, Content: "Not the title"}); err != nil {
		t.Fatal(err)
	}
	// A patch written from an older copy of the record keeps the count.
	if err := s.UpdateChat(ctx, Chat{ID: "b", Tenant: "t", Title: "Renamed"}); err != nil {
		t.Fatal(err)
	}
	cs, _, err := s.ChatsPage(ctx, "t", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Chat{}
	for _, c := range cs {
		got[c.ID] = c
	}
	for id, want := range map[string]Chat{"a": {Title: "Plan my trip", LastSeq: 4}, "b": {Title: "Renamed", LastSeq: 1}, "c": {}} {
		if got[id].Title != want.Title || got[id].LastSeq != want.LastSeq {
			t.Errorf("chat %s: title %q, last seq %d; want %q, %d", id, got[id].Title, got[id].LastSeq, want.Title, want.LastSeq)
		}
	}
}

func TestImportChatLandsWholeOrNotAtAll(t *testing.T) {
	ctx := context.Background()
	s, dir := openTemp(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	msgs := []chat.Message{{Seq: 7, Role: chat.RoleUser, Content: "hi", CreatedAt: at}, {Seq: 9, Role: chat.RoleAssistant, Content: "hello", CreatedAt: at}}
	c := Chat{ID: "imp", Tenant: "t", Title: "Imported"}
	imported := Snapshot{Summary: "before", FirstKeptSeq: 2}
	imported.LogRequest(chat.RequestLog{Estimate: 5, Kind: "turn"}, 50)
	if err := s.ImportChat(ctx, c, imported, msgs); err != nil {
		t.Fatal(err)
	}
	if err := s.ImportChat(ctx, c, Snapshot{}, nil); err == nil {
		t.Fatal("importing over an existing id succeeded")
	}
	s = reopen(t, s, dir)
	defer s.Close()
	got, err := s.Messages(ctx, "imp", 0, 0)
	if err != nil || len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 2 || !got[0].CreatedAt.Equal(at) || got[1].Content != "hello" {
		t.Fatalf("messages after reopen = %+v, %v", got, err)
	}
	snap, ok, err := s.LoadSnapshot(ctx, "imp")
	if err != nil || !ok || snap.Summary != "before" || snap.FirstKeptSeq != 2 || len(snap.Requests) != 1 || snap.Requests[0].Estimate != 5 {
		t.Fatalf("snapshot = %+v %v %v", snap, ok, err)
	}
	if n, err := s.CountChats(ctx, "t"); err != nil || n != 1 {
		t.Fatalf("tenant t has %d chats (%v), want 1", n, err)
	}
	if stored, err := s.Chat(ctx, "imp"); err != nil || stored.LastSeq != 2 || stored.Title != "Imported" {
		t.Fatalf("record = %+v, %v", stored, err)
	}
}

// bigImport is a chat of n messages of 1000 bytes, each under an
// idempotency key, and its records: several transactions' worth in a
// store opened with an 8 MB memtable (about 1.2 MB a transaction).
func bigImport(n int) (Chat, []chat.Message, []RecordPut) {
	msgs := make([]chat.Message, n)
	for i := range msgs {
		msgs[i] = chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("%04d", i) + strings.Repeat("x", 996), IdempotencyKey: fmt.Sprintf("key-%d", i)}
	}
	return Chat{ID: "big", Tenant: "t"}, msgs, []RecordPut{{Kind: "oai/big", ID: "conversation", V: map[string]string{"a": "b"}}}
}

// TestAnImportTooBigForOneTransactionLandsWholeInBatches: a chat bigger
// than one transaction is stored in batches and read back whole, after a
// restart too. It was refused with ErrTooBig.
func TestAnImportTooBigForOneTransactionLandsWholeInBatches(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{memTable: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c, big, recs := bigImport(6000)
	if err := s.ImportChat(ctx, c, Snapshot{FirstKeptSeq: 1}, big, recs...); err != nil {
		t.Fatalf("import of a chat bigger than a transaction: %v", err)
	}
	if err := s.ImportChat(ctx, c, Snapshot{}, big[:1]); err == nil {
		t.Fatal("importing over an existing id succeeded")
	}
	s = reopen(t, s, dir)
	defer s.Close()
	ms, err := s.Messages(ctx, "big", 0, 0)
	if err != nil || len(ms) != len(big) {
		t.Fatalf("%d of %d messages stored (%v)", len(ms), len(big), err)
	}
	for i, m := range ms {
		if m.Seq != int64(i+1) || m.Content != big[i].Content {
			t.Fatalf("message %d: seq %d %.8q; want seq %d %.8q", i, m.Seq, m.Content, i+1, big[i].Content)
		}
	}
	if m, ok, err := s.KeyedMessage(ctx, "big", "key-5999"); err != nil || !ok || m.Seq != 6000 {
		t.Fatalf("the last message's key finds %+v %v (%v)", m, ok, err)
	}
	if stored, err := s.Chat(ctx, "big"); err != nil || stored.LastSeq != int64(len(big)) {
		t.Fatalf("record = %+v, %v", stored, err)
	}
	if n, err := s.CountChats(ctx, "t"); err != nil || n != 1 {
		t.Fatalf("tenant t has %d chats (%v), want 1", n, err)
	}
	var rec map[string]string
	if err := s.Record(ctx, "oai/big", "conversation", &rec); err != nil || rec["a"] != "b" {
		t.Fatalf("the chat's record: %v %v", rec, err)
	}
}

// crashAt is a context whose Err closes its store at the n-th call: the
// store checks it before each write (Store.update), so the writes before
// are on disk and none after, as a crash there leaves them.
type crashAt struct {
	context.Context
	s     *Store
	n     int
	calls int
}

func (c *crashAt) Err() error {
	c.calls++
	if c.calls < c.n {
		return nil
	}
	if c.calls == c.n {
		_ = c.s.Close()
	}
	return context.Canceled
}

// TestAnImportCutBetweenItsBatchesLeavesNothing: a chat imported in
// batches whose import stops after some of them (the process gone) is in
// no read, and the restart removes what it wrote: the store holds what it
// held before, key for key.
func TestAnImportCutBetweenItsBatchesLeavesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{memTable: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ImportChat(ctx, Chat{ID: "other", Tenant: "t"}, Snapshot{FirstKeptSeq: 1}, []chat.Message{{Role: chat.RoleUser, Content: "kept"}}); err != nil {
		t.Fatal(err)
	}
	before := allKeys(t, s)
	c, big, recs := bigImport(6000)
	// Calls: the one transaction tried, the tombstone, two batches; the
	// third batch finds the store gone.
	cut := &crashAt{Context: ctx, s: s, n: 5}
	if err := s.ImportChat(cut, c, Snapshot{FirstKeptSeq: 1}, big, recs...); err == nil {
		t.Fatal("an import cut off succeeded")
	}
	if cut.calls < 5 {
		t.Fatalf("the import wrote %d times; want it cut between its batches", cut.calls)
	}
	s, err = Open(dir, Options{memTable: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Chat(ctx, "big"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the cut import's chat: %v", err)
	}
	if n, err := s.CountChats(ctx, "t"); err != nil || n != 1 {
		t.Fatalf("tenant t has %d chats (%v), want 1", n, err)
	}
	if after := allKeys(t, s); !reflect.DeepEqual(before, after) {
		t.Fatalf("the store held %d keys before the cut import and %d after its restart", len(before), len(after))
	}
}

// allKeys is every key of s with its value.
func allKeys(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out[string(it.Item().KeyCopy(nil))] = string(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAppendGoesOnFromTheLogsEnd: an append continues the log whether the
// chat's record says where it ends, says nothing (a record stored before
// LastSeq was kept), or is missing; a new record never claims a log.
func TestAppendGoesOnFromTheLogsEnd(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	defer s.Close()
	if err := s.CreateChat(ctx, Chat{ID: "a", Tenant: "t", LastSeq: 40}); err != nil {
		t.Fatal(err)
	}
	msg := func(text string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: text} }
	if _, err := s.Append(ctx, "a", msg("one"), msg("two")); err != nil {
		t.Fatal(err)
	}
	// The record as an older agentd left it: no LastSeq.
	old, err := encode(Chat{ID: "a", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.update(ctx, func(txn *writeTxn) error { return txn.Set(chatKey("a"), old) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "a", msg("three")); err != nil {
		t.Fatal(err)
	}
	if _, err := appendWithSnapshot(ctx, s, "a", func(int64) Snapshot { return Snapshot{} }, nil, msg("four")); err != nil {
		t.Fatal(err)
	}
	// A log without a record.
	if _, err := s.Append(ctx, "orphan", msg("one")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "orphan", msg("two")); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][]string{"a": {"one", "two", "three", "four"}, "orphan": {"one", "two"}} {
		msgs, err := s.Messages(ctx, id, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, m := range msgs {
			if m.Seq != int64(i+1) {
				t.Errorf("chat %s: message %d has seq %d", id, i, m.Seq)
			}
			got = append(got, m.Content)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("chat %s: log %v, want %v", id, got, want)
		}
	}
	if c, err := s.Chat(ctx, "a"); err != nil || c.LastSeq != 4 {
		t.Fatalf("record of a: last seq %d (%v), want 4", c.LastSeq, err)
	}
}

// TestAppendsKeepTheRestOfTheRecord: appends that move only the record's
// LastSeq (answers, a titled chat's words) leave every other field of it
// as it was.
func TestAppendsKeepTheRestOfTheRecord(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	defer s.Close()
	temp := 0.5
	want := Chat{ID: "a", Tenant: "t", Title: "Given", Model: "m", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		Instructions: "Be <brief> & kind", InstructionsVersion: 2, Settings: chat.Settings{Temperature: &temp},
		Toolsets: []string{"web"}, Tools: []chat.ToolSpec{{Name: "f", Parameters: []byte(`{"type":"object"}`)}}}
	if err := s.CreateChat(ctx, want); err != nil {
		t.Fatal(err)
	}
	for i, m := range []chat.Message{{Role: chat.RoleUser, Origin: chat.OriginPerson, Content: "hi"}, {Role: chat.RoleAssistant, Content: "hello"}} {
		if _, err := appendWithSnapshot(ctx, s, "a", func(int64) Snapshot { return Snapshot{} }, nil, m); err != nil {
			t.Fatal(err)
		}
		want.LastSeq = int64(i + 1)
		got, err := s.Chat(ctx, "a")
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("after %d appends the record is %+v (%v); want %+v", i+1, got, err, want)
		}
	}
}

// TestAnImportsTenantRecordsLandWithItAndAreListedByTenant: the records an
// import carries may be of a kind no chat owns (the hub's marker of a new
// chat, kind "newchat", id "<tenant>/<chat>"): they land with the chat or
// not at all (an import over an existing id writes none), survive a
// restart, and are listed by tenant or all at once. The hub deletes at
// start the chats whose marker is left; on Badger and on Postgres alike.
func TestAnImportsTenantRecordsLandWithItAndAreListedByTenant(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		marker := func(tenant, id string) RecordPut {
			return RecordPut{Kind: "newchat", ID: tenant + "/" + id, V: map[string]string{"at": "now"}}
		}
		msgs := []chat.Message{{Role: chat.RoleUser, Content: "earlier"}}
		if err := s.ImportChat(ctx, Chat{ID: "c1", Tenant: "t"}, Snapshot{FirstKeptSeq: 1}, msgs, marker("t", "c1")); err != nil {
			t.Fatal(err)
		}
		if err := s.ImportChat(ctx, Chat{ID: "c2", Tenant: "u"}, Snapshot{FirstKeptSeq: 1}, nil, marker("u", "c2")); err != nil {
			t.Fatal(err)
		}
		if err := s.ImportChat(ctx, Chat{ID: "c1", Tenant: "t"}, Snapshot{FirstKeptSeq: 1}, nil, marker("t", "dup")); err == nil {
			t.Fatal("importing over an existing id succeeded")
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(t)
		defer s.Close()
		list := func(prefix string) []string {
			var ids []string
			if err := s.RecordsPrefix(ctx, "newchat", prefix, func(id string, _ func(any) error) error {
				ids = append(ids, id)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return ids
		}
		if got := list("t/"); !reflect.DeepEqual(got, []string{"t/c1"}) {
			t.Errorf("tenant t's markers = %v, want [t/c1] (a failed import writes none)", got)
		}
		if got := list(""); !reflect.DeepEqual(got, []string{"t/c1", "u/c2"}) {
			t.Errorf("every marker = %v, want [t/c1 u/c2]", got)
		}
		if err := s.DeleteRecord(ctx, "newchat", "t/c1"); err != nil {
			t.Fatal(err)
		}
		if got := list("t/"); len(got) != 0 {
			t.Errorf("tenant t's markers after the delete = %v, want none", got)
		}
		if n, err := s.CountChats(ctx, "t"); err != nil || n != 1 {
			t.Errorf("tenant t has %d chats (%v) once its marker went; want its chat kept", n, err)
		}
	})
}
