package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentd/agentd/chat"
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

// reopen closes s and opens its directory again, as a restart does; the
// reopened store closes when the test ends.
func reopen(t *testing.T, s *Store, dir string) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	return s2
}

func TestAppendAssignsIncreasingSeqsAndSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	s, dir := openTemp(t)
	if err := s.CreateChat(ctx, Chat{ID: "a", Tenant: "t1", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Append(ctx, "a", chat.Message{Role: chat.RoleUser, Content: "one"}, chat.Message{Role: chat.RoleAssistant, Content: "two"})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Seq != 1 || got[1].Seq != 2 {
		t.Fatalf("seqs = %d,%d, want 1,2", got[0].Seq, got[1].Seq)
	}
	if _, err := s.Append(ctx, "b", chat.Message{Role: chat.RoleUser, Content: "other chat"}); err != nil {
		t.Fatal(err)
	}
	more, _ := s.Append(ctx, "a", chat.Message{Role: chat.RoleUser, Content: "three"})
	if more[0].Seq != 3 {
		t.Fatalf("third seq = %d, want 3 (chat b must not disturb a's seqs)", more[0].Seq)
	}
	s2 := reopen(t, s, dir)
	msgs, err := s2.Messages(ctx, "a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"one", "two", "three"}
	if len(msgs) != len(want) {
		t.Fatalf("got %d messages, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		if m.Content != want[i] || m.Seq != int64(i+1) {
			t.Errorf("msg %d = %q seq %d", i, m.Content, m.Seq)
		}
	}
	rng, _ := s2.Messages(ctx, "a", 2, 2)
	if len(rng) != 1 || rng[0].Content != "two" {
		t.Errorf("range 2..2 = %+v", rng)
	}
	last, _ := s2.LastSeq(ctx, "a")
	if last != 3 {
		t.Errorf("last seq = %d", last)
	}
}

func TestCreateChatTwiceFailsAndChatsFilterByTenant(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	defer s.Close()
	if err := s.CreateChat(ctx, Chat{ID: "x", Tenant: "t1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateChat(ctx, Chat{ID: "x", Tenant: "t2"}); err == nil {
		t.Fatal("second create of the same id succeeded")
	}
	_ = s.CreateChat(ctx, Chat{ID: "y", Tenant: "t2"})
	cs, _ := s.Chats(ctx, "t1")
	if len(cs) != 1 || cs[0].ID != "x" || cs[0].Tenant != "t1" {
		t.Fatalf("tenant t1 chats = %+v", cs)
	}
	if _, err := s.Chat(ctx, "nope"); err == nil {
		t.Fatal("unknown chat found")
	}
	if n, _ := s.CountChats(ctx, "t2"); n != 1 {
		t.Fatalf("t2 counts %d chats, want 1 (a failed create must not count)", n)
	}
	if all, _ := s.Chats(ctx, ""); len(all) != 2 {
		t.Fatalf("all chats = %d", len(all))
	}
}

func TestLearnWindowKeepsTheSmaller(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	defer s.Close()
	for _, c := range []struct{ in, want int }{{32000, 32000}, {64000, 32000}, {8192, 8192}} {
		got, err := s.LearnWindow(ctx, "p", "m", c.in)
		if err != nil || got != c.want {
			t.Fatalf("LearnWindow(%d) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	ws, _ := s.LearnedWindows(ctx)
	if ws["p/m"] != 8192 {
		t.Fatalf("learned = %v", ws)
	}
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
	return []string{"c/" + id, "t/" + tenant + "/" + id, "s/" + id, "m/" + id + "/", "d/" + id, "k/mark/" + id}
}

func TestDeleteChatRemovesAllOfTheChatAndNothingElse(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	for _, id := range []string{"a", "b"} {
		if err := s.CreateChat(ctx, Chat{ID: id, Tenant: "t1", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, id, chat.Message{Role: chat.RoleUser, Content: "hello " + id}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveSnapshot(ctx, id, Snapshot{Summary: "of " + id}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutRecord(ctx, "mark", id, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteChat(ctx, "a", RecordKey{Kind: "mark", ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if left := keysUnder(t, s, chatKeys("t1", "a")...); len(left) != 0 {
		t.Fatalf("left of the deleted chat: %q", left)
	}
	if n, _ := s.CountChats(ctx, "t1"); n != 1 {
		t.Fatalf("the tenant counts %d chats, want 1", n)
	}
	if kept := keysUnder(t, s, chatKeys("t1", "b")...); len(kept) != 5 { // all but a tombstone
		t.Fatalf("the other chat lost data: %q", kept)
	}
	if err := s.DeleteChat(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting again: %v, want ErrNotFound", err)
	}
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
		whole, err := deleteRest(txn, "big")
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
