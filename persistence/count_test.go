package persistence

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

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

func TestImportTooBigForOneTransactionLeavesNothing(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{memTable: 8 << 20}) // about 1.2 MB a transaction
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	big := make([]chat.Message, 2000)
	for i := range big {
		big[i] = chat.Message{Role: chat.RoleUser, Content: strings.Repeat("x", 1000)}
	}
	if err := s.ImportChat(ctx, Chat{ID: "big", Tenant: "t"}, Snapshot{}, big); !errors.Is(err, ErrTooBig) {
		t.Fatalf("import of a chat bigger than a transaction: %v, want ErrTooBig", err)
	}
	if _, err := s.Chat(ctx, "big"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("half an import is stored: %v", err)
	}
	if ms, err := s.Messages(ctx, "big", 0, 0); err != nil || len(ms) != 0 {
		t.Fatalf("%d messages of a refused import are stored (%v)", len(ms), err)
	}
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
