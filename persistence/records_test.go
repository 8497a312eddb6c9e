package persistence

import (
	"context"
	"errors"
	"testing"

	"github.com/agentd/agentd/chat"
)

// TestAppendsReadTheCommittedRecord: the writer's record cache, which
// appends and Chat read, only ever answers what Badger committed. After a
// write that set a chat's record and then failed, a patch of the record,
// the chat's deletion and its creation anew, and its deletion again (an
// append then finds no record), the next append reads the record as
// committed (its title, where the log ends), and so does Chat, which fails
// once the store is closed.
func TestAppendsReadTheCommittedRecord(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	closed := false
	defer func() {
		if !closed {
			_ = s.Close()
		}
	}()
	appendOne := func(content string, wantSeq int64) {
		t.Helper()
		got, err := s.Append(ctx, "a", chat.Message{Role: chat.RoleAssistant, Content: content})
		if err != nil || len(got) != 1 || got[0].Seq != wantSeq {
			t.Fatalf("append %q: %+v (%v), want seq %d", content, got, err, wantSeq)
		}
	}
	wantRecord := func(title string, last int64) {
		t.Helper()
		c, err := s.Chat(ctx, "a")
		if err != nil || c.Title != title || c.LastSeq != last {
			t.Fatalf("record %+v (%v), want title %q and last seq %d", c, err, title, last)
		}
	}
	if err := s.CreateChat(ctx, Chat{ID: "a", Tenant: "t", Title: "First"}); err != nil {
		t.Fatal(err)
	}
	appendOne("one", 1)
	appendOne("two", 2) // the record is the cache's now
	refused := errors.New("refused")
	err := s.update(ctx, func(txn *writeTxn) error {
		val, err := encode(Chat{ID: "a", Tenant: "t", Title: "Dropped", LastSeq: 40})
		if err != nil {
			return err
		}
		if err := txn.Set(chatKey("a"), val); err != nil {
			return err
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("the failing write: %v", err)
	}
	wantRecord("First", 2)
	appendOne("three", 3)
	wantRecord("First", 3)
	if err := s.UpdateChat(ctx, Chat{ID: "a", Tenant: "t", Title: "Renamed"}); err != nil {
		t.Fatal(err)
	}
	appendOne("four", 4)
	wantRecord("Renamed", 4)
	if err := s.DeleteChat(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateChat(ctx, Chat{ID: "a", Tenant: "t", Title: "Again"}); err != nil {
		t.Fatal(err)
	}
	appendOne("anew", 1)
	wantRecord("Again", 1)
	if err := s.DeleteChat(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	appendOne("after its deletion", 1) // a log without a record
	if _, err := s.Chat(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleted chat's record: %v", err)
	}
	if err := s.CreateChat(ctx, Chat{ID: "b", Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	closed = true
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Chat(ctx, "b"); err == nil {
		t.Fatal("a closed store read a chat")
	}
}
