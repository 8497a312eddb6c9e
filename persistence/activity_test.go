package persistence

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
)

func TestActivityIsOrderedWithTheMessagesAndSurvivesReopen(t *testing.T) {
	eachBackend(t, activityOrderedAndReopened)
}

func activityOrderedAndReopened(t *testing.T, open func(t *testing.T) store) {
	ctx := context.Background()
	s := open(t)
	if _, err := s.Append(ctx, "a", chat.Message{Role: chat.RoleUser, Content: "one"}, chat.Message{Role: chat.RoleAssistant, Content: "two"}); err != nil {
		t.Fatal(err)
	}
	first, err := s.AppendActivity(ctx, "a", Activity{Type: chat.EventCompacted, TurnID: "t1", Data: json.RawMessage(`{"first_kept_seq":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "a", chat.Message{Role: chat.RoleUser, Content: "three"}); err != nil {
		t.Fatal(err)
	}
	second, err := s.AppendActivity(ctx, "a", Activity{Type: chat.EventHealed})
	if err != nil {
		t.Fatal(err)
	}
	if first.ID != 1 || first.AfterSeq != 2 || second.ID != 2 || second.AfterSeq != 3 {
		t.Fatalf("ids/after = %d/%d, %d/%d; want 1/2, 2/3", first.ID, first.AfterSeq, second.ID, second.AfterSeq)
	}
	if second.At.IsZero() {
		t.Error("At not set")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	defer s.Close()
	got, more, err := s.ActivityPage(ctx, "a", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if more || len(got) != 2 || got[0].Type != chat.EventCompacted || got[1].Type != chat.EventHealed || got[0].TurnID != "t1" {
		t.Fatalf("after reopen: %+v more=%v", got, more)
	}
	if string(got[0].Data) != `{"first_kept_seq":2}` {
		t.Errorf("data = %s", got[0].Data)
	}
}

// TestAnAnswersWriteCarriesActivityBeforeItsMessages: AppendWithSnapshot
// stores its activity as AppendActivity would just before the messages,
// in the same write as the messages and the snapshot.
func TestAnAnswersWriteCarriesActivityBeforeItsMessages(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		s := open(t)
		defer s.Close()
		ctx := context.Background()
		if _, err := s.AppendActivity(ctx, "a", Activity{Type: chat.EventHealed}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, "a", chat.Message{Role: chat.RoleUser, Content: "one"}); err != nil {
			t.Fatal(err)
		}
		acts := []Activity{{Type: chat.EventCompacted, TurnID: "t1", Data: json.RawMessage(`{"first_kept_seq":1}`)}, {Type: chat.EventCompacted, TurnID: "t1"}}
		stored, err := appendWithSnapshot(ctx, s, "a", func(last int64) Snapshot { return Snapshot{FirstKeptSeq: 1, LastSeqSent: last} }, acts,
			chat.Message{Role: chat.RoleAssistant, Content: "two"})
		if err != nil || len(stored) != 1 || stored[0].Seq != 2 {
			t.Fatalf("stored %+v, %v", stored, err)
		}
		got, _, err := s.ActivityPage(ctx, "a", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids, after []int64
		for _, a := range got {
			ids, after = append(ids, a.ID), append(after, a.AfterSeq)
			if a.At.IsZero() {
				t.Errorf("activity %d has no date", a.ID)
			}
		}
		if fmt.Sprint(ids, after) != "[1 2 3] [0 1 1]" || got[1].Type != chat.EventCompacted || got[1].TurnID != "t1" || string(got[1].Data) != `{"first_kept_seq":1}` {
			t.Fatalf("activity %+v; want the healed item, then the two carried after seq 1", got)
		}
		if snap, ok, err := s.LoadSnapshot(ctx, "a"); err != nil || !ok || snap.LastSeqSent != 2 {
			t.Fatalf("snapshot %+v %v %v", snap, ok, err)
		}
	})
}

func TestActivityPages(t *testing.T) { eachBackend(t, activityPages) }

func activityPages(t *testing.T, open func(t *testing.T) store) {
	ctx := context.Background()
	s := open(t)
	defer s.Close()
	for i := range 5 {
		if _, err := s.AppendActivity(ctx, "a", Activity{Type: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AppendActivity(ctx, "ab", Activity{Type: "other chat"}); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		after int64
		limit int
		want  []string
		more  bool
	}{
		"first page":   {0, 2, []string{"0", "1"}, true},
		"middle page":  {2, 2, []string{"2", "3"}, true},
		"last page":    {4, 2, []string{"4"}, false},
		"past the end": {9, 2, nil, false},
		"exact fit":    {0, 5, []string{"0", "1", "2", "3", "4"}, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, more, err := s.ActivityPage(ctx, "a", c.after, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, a := range got {
				types = append(types, a.Type)
			}
			if fmt.Sprint(types) != fmt.Sprint(c.want) || more != c.more {
				t.Fatalf("got %v more=%v, want %v more=%v", types, more, c.want, c.more)
			}
		})
	}
}

func TestConcurrentActivityWritersGetDistinctIDs(t *testing.T) {
	eachBackend(t, concurrentActivityWriters)
}

func concurrentActivityWriters(t *testing.T, open func(t *testing.T) store) {
	ctx := context.Background()
	s := open(t)
	defer s.Close()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := s.AppendActivity(ctx, "a", Activity{Type: "x"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, _, err := s.ActivityPage(ctx, "a", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range got {
		if a.ID != int64(i+1) {
			t.Fatalf("item %d has id %d: ids must run 1..n without a gap or a repeat", i, a.ID)
		}
	}
	if len(got) != 20 {
		t.Fatalf("%d items, want 20", len(got))
	}
}

func TestDeleteChatDeletesItsActivity(t *testing.T) { eachBackend(t, deleteChatDeletesActivity) }

func deleteChatDeletesActivity(t *testing.T, open func(t *testing.T) store) {
	ctx := context.Background()
	s := open(t)
	defer s.Close()
	for _, id := range []string{"a", "b"} {
		if err := s.CreateChat(ctx, Chat{ID: id, Tenant: "t", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendActivity(ctx, id, Activity{Type: chat.EventHealed}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteChat(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.ActivityPage(ctx, "a", 0, 10); len(got) != 0 {
		t.Errorf("deleted chat keeps %d activity items", len(got))
	}
	if got, _, _ := s.ActivityPage(ctx, "b", 0, 10); len(got) != 1 {
		t.Errorf("the other chat has %d activity items, want 1", len(got))
	}
}

func TestSnapshotKeepsItsRequests(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	defer s.Close()
	want := []chat.RequestLog{{Estimate: 100, Reported: 120, Budget: 900, Window: 2048, Kind: "turn"}}
	if err := s.SaveSnapshot(ctx, "a", Snapshot{Requests: want}); err != nil {
		t.Fatal(err)
	}
	snap, ok, err := s.LoadSnapshot(ctx, "a")
	if err != nil || !ok || len(snap.Requests) != 1 || snap.Requests[0] != want[0] {
		t.Fatalf("loaded %+v ok=%v err=%v", snap.Requests, ok, err)
	}
}
