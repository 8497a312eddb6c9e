package persistence

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentd/agentd/chat"
)

// req is a request log entry told apart by its estimate.
func req(n int) chat.RequestLog {
	return chat.RequestLog{At: time.Date(2026, 1, 1, 0, 0, n, 0, time.UTC), Estimate: n, Budget: 900, Window: 2048, Kind: "turn"}
}

// TestASaveWritesOnlyTheNewOrChangedRequests: whatever happened to the log
// since the last save (requests logged, the newest one's count reported,
// the log full or growing, nothing at all), a save writes those requests
// and deletes exactly the ones they pushed out.
func TestASaveWritesOnlyTheNewOrChangedRequests(t *testing.T) {
	const keep = 3
	type want struct {
		first            int64
		put              []int // estimates
		dropFrom, dropTo int64
	}
	for _, tc := range []struct {
		name string
		// logged: requests logged before the last save, then after it;
		// reported: the newest one's count reported after the save.
		before, after int
		reported      bool
		want          want
	}{
		{"the first request", 0, 1, false, want{1, []int{1}, 1, 1}},
		{"the log grows", 1, 1, true, want{2, []int{2}, 1, 1}},
		{"the log is full", 3, 1, true, want{4, []int{4}, 1, 2}},
		{"a turn with a tool round, full", 5, 2, true, want{6, []int{6, 7}, 3, 5}},
		{"only reported", 4, 0, true, want{4, []int{4}, 1, 2}},
		{"nothing new", 4, 0, false, want{5, nil, 2, 2}},
		{"more than the log holds", 2, 5, false, want{5, []int{5, 6, 7}, 1, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var snap Snapshot
			for i := 1; i <= tc.before; i++ {
				snap.LogRequest(req(i), keep)
			}
			snap.Stored()
			for i := tc.before + 1; i <= tc.before+tc.after; i++ {
				snap.LogRequest(req(i), keep)
			}
			if tc.reported {
				snap.ReportRequest(99)
			}
			rec, w := splitRequests(snap)
			var put []int
			for _, r := range w.put {
				put = append(put, r.Estimate)
			}
			got := want{w.first, put, w.dropFrom, w.dropTo}
			if got.first != tc.want.first || !slices.Equal(got.put, tc.want.put) || got.dropFrom != tc.want.dropFrom || got.dropTo != tc.want.dropTo {
				t.Fatalf("writes %+v, want %+v", got, tc.want)
			}
			if rec.Requests != nil || rec.RequestsLogged != int64(tc.before+tc.after) {
				t.Fatalf("the record keeps %v, logged %d", rec.Requests, rec.RequestsLogged)
			}
			if tc.reported && w.put[len(w.put)-1].Reported != 99 {
				t.Fatalf("the newest request is written without its count: %+v", w.put)
			}
		})
	}
}

// TestLogAndReportNeverShareTheSavedArray: a copy of the snapshot taken
// for a save keeps its log as it was when the log changes on.
func TestLogAndReportNeverShareTheSavedArray(t *testing.T) {
	var snap Snapshot
	for i := 1; i <= 3; i++ {
		snap.LogRequest(req(i), 3)
	}
	saved := snap
	snap.ReportRequest(7)
	snap.LogRequest(req(4), 3)
	if saved.Requests[2].Reported != 0 || saved.Requests[0].Estimate != 1 || len(saved.Requests) != 3 {
		t.Fatalf("the saved copy changed: %+v", saved.Requests)
	}
}

// storedRequests reads what a backend holds of a chat's request log: each
// record's number, and the snapshot record's raw value.
func storedRequests(t *testing.T, s store, chatID string) (ns []int64, rec string) {
	t.Helper()
	ctx := context.Background()
	switch s := s.(type) {
	case *Store:
		err := s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: requestPrefix(chatID)})
			for it.Rewind(); it.Valid(); it.Next() {
				ns = append(ns, int64(binary.BigEndian.Uint64(it.Item().Key()[len(requestPrefix(chatID)):])))
			}
			it.Close()
			item, err := txn.Get(snapKey(chatID))
			if err != nil {
				return err
			}
			v, err := item.ValueCopy(nil)
			rec = string(v)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	case *Postgres:
		rows, err := s.pool.Query(ctx, `SELECT n FROM request_log WHERE chat_id = $1 ORDER BY n`, chatID)
		if err == nil {
			for rows.Next() {
				var n int64
				if err = rows.Scan(&n); err != nil {
					break
				}
				ns = append(ns, n)
			}
			rows.Close()
		}
		if err == nil {
			err = s.pool.QueryRow(ctx, `SELECT data::text FROM snapshots WHERE chat_id = $1`, chatID).Scan(&rec)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return ns, rec
}

// TestTheRequestLogIsStoredApartAndComesBackWhole: turn after turn (tool
// rounds, counts reported, folds' plain saves), the snapshot's record
// holds no request, the store holds the log's requests and no other, and
// a reopened store loads the log as the session had it.
func TestTheRequestLogIsStoredApartAndComesBackWhole(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		const keep = 4
		s := open(t)
		if err := s.CreateChat(ctx, Chat{ID: "a", Tenant: "t"}); err != nil {
			t.Fatal(err)
		}
		var snap Snapshot
		n := 0
		check := func(s store) {
			t.Helper()
			got, ok, err := s.LoadSnapshot(ctx, "a")
			if err != nil || !ok || !slices.Equal(got.Requests, snap.Requests) || got.RequestsLogged != snap.RequestsLogged {
				t.Fatalf("loaded %+v (logged %d), %v, %v; want %+v (logged %d)", got.Requests, got.RequestsLogged, ok, err, snap.Requests, snap.RequestsLogged)
			}
			ns, rec := storedRequests(t, s, "a")
			if want := int64(len(snap.Requests)); int64(len(ns)) != want || ns[0] != snap.RequestsLogged-want+1 || strings.Contains(rec, `"requests":`) {
				t.Fatalf("stored requests %v and record %s; want the %d up to %d apart", ns, rec, want, snap.RequestsLogged)
			}
		}
		for turn := range 7 {
			for range turn%3 + 1 { // a turn with tool rounds logs more
				n++
				snap.LogRequest(req(n), keep)
				snap.ReportRequest(n * 10)
			}
			if turn%4 == 3 { // a fold's plain save
				if err := s.SaveSnapshot(ctx, "a", snap); err != nil {
					t.Fatal(err)
				}
			} else {
				snap = saveTurn(t, s, "a", snap, fmt.Sprint("answer ", turn))
			}
			snap.Stored()
			check(s)
		}
		_ = s.Close()
		s = open(t)
		defer s.Close()
		check(s)
		if err := s.DeleteChat(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if ns, _ := storedRequestsOfGone(t, s, "a"); len(ns) != 0 {
			t.Fatalf("a deleted chat keeps requests %v", ns)
		}
	})
}

// storedRequestsOfGone is storedRequests for a chat with no snapshot.
func storedRequestsOfGone(t *testing.T, s store, chatID string) ([]int64, error) {
	t.Helper()
	if _, ok, err := s.LoadSnapshot(context.Background(), chatID); ok || err != nil {
		t.Fatalf("a deleted chat's snapshot loads: %v, %v", ok, err)
	}
	var ns []int64
	switch s := s.(type) {
	case *Store:
		err := s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: requestPrefix(chatID)})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				ns = append(ns, 0)
			}
			return nil
		})
		return ns, err
	case *Postgres:
		var c int64
		err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM request_log WHERE chat_id = $1`, chatID).Scan(&c)
		return make([]int64, c), err
	}
	return nil, nil
}

// TestASnapshotSavedBeforeKeepsItsLog: a snapshot the previous version
// saved, its log inline, loads with that log; the next save moves the log
// apart, every request of it and the new one.
func TestASnapshotSavedBeforeKeepsItsLog(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		defer s.Close()
		if err := s.CreateChat(ctx, Chat{ID: "old", Tenant: "t"}); err != nil {
			t.Fatal(err)
		}
		// A record a newer binary left before a rollback to the previous
		// one, which then saved the snapshot inline again.
		orphan, _ := encode(req(9))
		// As the previous version wrote it: the log inline, last, no number.
		old := `{"v":1,"d":{"summary":"so far","first_kept_seq":3,"factor":1.1,"requests":[` +
			`{"at":"2026-01-01T00:00:01Z","estimate":1,"reported":11,"budget":900,"window":2048,"kind":"turn"},` +
			`{"at":"2026-01-01T00:00:02Z","estimate":2,"reported":22,"budget":900,"window":2048,"kind":"heal"}]}}`
		switch s := s.(type) {
		case *Store:
			if err := s.db.Update(func(txn *badger.Txn) error {
				if err := txn.Set(requestKey("old", 9), orphan); err != nil {
					return err
				}
				return txn.Set(snapKey("old"), []byte(old))
			}); err != nil {
				t.Fatal(err)
			}
		case *Postgres:
			if _, err := s.pool.Exec(ctx, `INSERT INTO snapshots (chat_id, data) VALUES ('old', $1)`, old); err != nil {
				t.Fatal(err)
			}
			if _, err := s.pool.Exec(ctx, `INSERT INTO request_log (chat_id, n, data) VALUES ('old', 9, $1)`, string(orphan)); err != nil {
				t.Fatal(err)
			}
		}
		first := []chat.RequestLog{req(1), req(2)}
		first[0].Reported, first[1].Reported, first[1].Kind = 11, 22, "heal"
		snap, ok, err := s.LoadSnapshot(ctx, "old")
		if err != nil || !ok || !slices.Equal(snap.Requests, first) || snap.Summary != "so far" {
			t.Fatalf("loaded %+v, %v, %v; want the log %+v", snap, ok, err, first)
		}
		snap.LogRequest(req(3), 50)
		if err := s.SaveSnapshot(ctx, "old", snap); err != nil {
			t.Fatal(err)
		}
		back, _, err := s.LoadSnapshot(ctx, "old")
		if want := append(first, req(3)); err != nil || !slices.Equal(back.Requests, want) || back.RequestsLogged != 3 {
			t.Fatalf("after the next save %+v (logged %d), %v; want %+v", back.Requests, back.RequestsLogged, err, want)
		}
		if ns, rec := storedRequests(t, s, "old"); !slices.Equal(ns, []int64{1, 2, 3, 9}) || strings.Contains(rec, `"requests":`) {
			t.Fatalf("stored requests %v, record %s; want 1 to 3 apart (and the one left over)", ns, rec)
		}
	})
}
