package persistence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentd/agentd/chat"
)

// TestASaveWritesTheSummaryOnlyWhenTheStoreDoesNotHoldIt: a snapshot
// never stored, or whose summary, model, digest, trust or paused turn
// changed since, is saved whole; one whose summary the store holds writes
// its turn record alone. The turn record never carries the summary, and
// both name it alike.
func TestASaveWritesTheSummaryOnlyWhenTheStoreDoesNotHoldIt(t *testing.T) {
	stored := Snapshot{Summary: "so far", SummaryModel: "m", Digest: "ids: 7", FirstKeptSeq: 4}
	stored.Stored()
	for _, tc := range []struct {
		name      string
		change    func(*Snapshot)
		wantWhole bool
	}{
		{"never stored", func(s *Snapshot) { s.held = heldSummary{} }, true},
		{"a turn later", func(s *Snapshot) { s.LastSeqSent, s.FirstKeptSeq = 9, 5 }, false},
		{"a new summary", func(s *Snapshot) { s.Summary = "so far, and more" }, true},
		{"a new summary model", func(s *Snapshot) { s.SummaryModel = "n" }, true},
		{"a new digest", func(s *Snapshot) { s.Digest = "ids: 7, 8" }, true},
		{"the same summary, built again", func(s *Snapshot) { s.Summary = strings.Clone(s.Summary) }, false},
		{"outside text read", func(s *Snapshot) { s.Untrusted = true }, true},
		{"a turn paused on the application's tools", func(s *Snapshot) { s.Paused = &PausedTurn{TurnID: "t1", UserSeq: 3} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := stored
			tc.change(&snap)
			whole, turn, err := splitSummary(snap)
			if err != nil {
				t.Fatal(err)
			}
			if (whole != nil) != tc.wantWhole {
				t.Fatalf("whole record %s; want one: %v", whole, tc.wantWhole)
			}
			var w, u Snapshot
			if err := decode(turn, &u); err != nil || u.Summary != "" || u.SummaryModel != "" || u.Digest != "" || u.SummaryFP != summaryFP(&snap) || u.FirstKeptSeq != snap.FirstKeptSeq {
				t.Fatalf("turn record %s (%v); want the snapshot without its summary, named by it", turn, err)
			}
			if whole != nil {
				if err := decode(whole, &w); err != nil || w.Summary != snap.Summary || w.Digest != snap.Digest || w.SummaryFP != u.SummaryFP {
					t.Fatalf("whole record %s (%v) beside turn record %s", whole, err, turn)
				}
			}
		})
	}
}

// rawSnapshot is the whole record a store holds for chatID, and (Badger)
// the version it was written at: a record not written again keeps it.
func rawSnapshot(t *testing.T, s store, chatID string) (rec string, version uint64) {
	t.Helper()
	switch s := s.(type) {
	case *Store:
		err := s.db.View(func(txn *badger.Txn) error {
			item, err := txn.Get(snapKey(chatID))
			if err != nil {
				return err
			}
			v, err := item.ValueCopy(nil)
			rec, version = string(v), item.Version()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	case *Postgres:
		if err := s.pool.QueryRow(context.Background(), `SELECT data::text FROM snapshots WHERE chat_id = $1`, chatID).Scan(&rec); err != nil {
			t.Fatal(err)
		}
	}
	return rec, version
}

// TestTheSummaryIsWrittenByTheFoldAndReadBackWithTheNewestTurn: turns
// after a fold write the snapshot without its summary (Badger's whole
// record keeps its version), a reopened store loads the fold's summary
// with the newest turn's fields, a new fold writes the summary again, and
// a chat imported from a loaded snapshot is stored whole.
func TestTheSummaryIsWrittenByTheFoldAndReadBackWithTheNewestTurn(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		if err := s.CreateChat(ctx, Chat{ID: "a", Tenant: "t"}); err != nil {
			t.Fatal(err)
		}
		snap := Snapshot{Model: "m", Summary: strings.Repeat("What was decided. ", 400), SummaryModel: "m", FirstKeptSeq: 1}
		if err := s.SaveSnapshot(ctx, "a", snap); err != nil { // a fold
			t.Fatal(err)
		}
		snap.Stored()
		folded, v0 := rawSnapshot(t, s, "a")
		for turn := range 5 {
			snap.LoadedTools = append(snap.LoadedTools, fmt.Sprint("tool", turn))
			snap.LogRequest(req(turn+1), 50)
			snap = saveTurn(t, s, "a", snap, fmt.Sprint("answer ", turn))
		}
		if rec, v := rawSnapshot(t, s, "a"); rec != folded || v != v0 {
			t.Fatalf("turns rewrote the whole record (version %d, then %d)", v0, v)
		}
		check := func(s store, want Snapshot) {
			t.Helper()
			got, ok, err := s.LoadSnapshot(ctx, "a")
			if err != nil || !ok || got.Summary != want.Summary || got.FirstKeptSeq != want.FirstKeptSeq || got.LastSeqSent != want.LastSeqSent ||
				strings.Join(got.LoadedTools, ",") != strings.Join(want.LoadedTools, ",") || got.RequestsLogged != want.RequestsLogged || got.SummaryFP != 0 {
				t.Fatalf("loaded %q… first kept %d, last sent %d, tools %v, logged %d (%v, %v); want first kept %d, last sent %d, tools %v, logged %d",
					got.Summary[:min(20, len(got.Summary))], got.FirstKeptSeq, got.LastSeqSent, got.LoadedTools, got.RequestsLogged, ok, err,
					want.FirstKeptSeq, want.LastSeqSent, want.LoadedTools, want.RequestsLogged)
			}
		}
		_ = s.Close()
		s = open(t)
		defer s.Close()
		check(s, snap)

		loaded, _, err := s.LoadSnapshot(ctx, "a") // as the session wakes
		if err != nil {
			t.Fatal(err)
		}
		_, v1 := rawSnapshot(t, s, "a")
		loaded.LastSeqSent = 99
		if err := s.SaveSnapshot(ctx, "a", loaded); err != nil {
			t.Fatal(err)
		}
		loaded.Stored()
		if rec, v := rawSnapshot(t, s, "a"); rec != folded || v != v1 {
			t.Fatalf("a woken chat's turn rewrote the whole record (version %d, then %d)", v1, v)
		}
		check(s, loaded)
		snap = loaded

		// An older binary after a rollback reads the whole record: it must
		// know that the chat read outside text.
		snap.Untrusted = true
		if err := s.SaveSnapshot(ctx, "a", snap); err != nil {
			t.Fatal(err)
		}
		snap.Stored()
		if rec, _ := rawSnapshot(t, s, "a"); !strings.Contains(rec, `"untrusted":true`) {
			t.Fatalf("outside text read left the whole record %s", rec[:min(80, len(rec))])
		}

		snap.Summary, snap.FirstKeptSeq = "A new fold's summary.", 12
		if err := s.SaveSnapshot(ctx, "a", snap); err != nil {
			t.Fatal(err)
		}
		snap.Stored()
		if rec, _ := rawSnapshot(t, s, "a"); !strings.Contains(rec, "A new fold") {
			t.Fatalf("a fold's save left the whole record %s", rec[:min(80, len(rec))])
		}
		check(s, snap)

		if err := s.(interface {
			ImportChat(context.Context, Chat, Snapshot, []chat.Message, ...RecordPut) error
		}).ImportChat(ctx, Chat{ID: "b", Tenant: "t"}, snap, nil); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := s.LoadSnapshot(ctx, "b"); err != nil || !ok || got.Summary != snap.Summary || got.LastSeqSent != snap.LastSeqSent {
			t.Fatalf("the imported chat loads %+v, %v, %v", got, ok, err)
		}

		if err := s.DeleteChat(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if b, ok := s.(*Store); ok {
			if err := b.db.View(func(txn *badger.Txn) error {
				_, err := txn.Get(snapTurnKey("a"))
				return err
			}); !errors.Is(err, badger.ErrKeyNotFound) {
				t.Fatalf("a deleted chat's turn record: %v", err)
			}
		}
	})
}

// TestASnapshotAnOlderBinaryRewroteWinsOverTheTurnRecord: after a
// rollback to a binary that saves the snapshot whole, with no
// fingerprint, and back, the turn record left from before is not read
// over it; the next save stores the summary again.
func TestASnapshotAnOlderBinaryRewroteWinsOverTheTurnRecord(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		defer s.Close()
		if err := s.CreateChat(ctx, Chat{ID: "a", Tenant: "t"}); err != nil {
			t.Fatal(err)
		}
		snap := Snapshot{Summary: "before the rollback", FirstKeptSeq: 3, LastSeqSent: 5}
		if err := s.SaveSnapshot(ctx, "a", snap); err != nil {
			t.Fatal(err)
		}
		old := `{"v":1,"d":{"summary":"the older binary's fold","first_kept_seq":8,"last_seq_sent":20}}`
		switch s := s.(type) {
		case *Store:
			if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(snapKey("a"), []byte(old)) }); err != nil {
				t.Fatal(err)
			}
		case *Postgres:
			if _, err := s.pool.Exec(ctx, `UPDATE snapshots SET data = $1 WHERE chat_id = 'a'`, old); err != nil {
				t.Fatal(err)
			}
		}
		got, ok, err := s.LoadSnapshot(ctx, "a")
		if err != nil || !ok || got.Summary != "the older binary's fold" || got.FirstKeptSeq != 8 || got.LastSeqSent != 20 {
			t.Fatalf("loaded %+v, %v, %v; want the older binary's snapshot", got, ok, err)
		}
		got.LastSeqSent = 21
		if err := s.SaveSnapshot(ctx, "a", got); err != nil {
			t.Fatal(err)
		}
		if rec, _ := rawSnapshot(t, s, "a"); !strings.Contains(rec, `"summary_fp"`) {
			t.Fatalf("the next save left the older binary's record %s", rec)
		}
		if back, _, err := s.LoadSnapshot(ctx, "a"); err != nil || back.Summary != "the older binary's fold" || back.LastSeqSent != 21 {
			t.Fatalf("after the next save %+v, %v", back, err)
		}
	})
}
