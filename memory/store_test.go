package memory

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/persistence"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func openDB(t testing.TB) *persistence.Store {
	t.Helper()
	db, err := persistence.Open("", persistence.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func newStore(t testing.TB) (*Store, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 10, 5, 9, 0, 0, 0, time.UTC)}
	return New(openDB(t), Options{Now: c.Now}), c
}

func mustAdd(t *testing.T, s *Store, in AddInput) (Run, []Memory) {
	t.Helper()
	r, ms, err := s.Add(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return r, ms
}

func texts(ms []Memory) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Text
	}
	return out
}

func TestAddStatesAndDuplicates(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	run, mems := mustAdd(t, s, AddInput{Tenant: "t1", ChatID: "c1", Source: SourceFold, FromSeq: 1, ToSeq: 4,
		Texts: []string{" Lives in Oslo. ", "", "Prefers tea."}})
	if len(mems) != 2 || len(run.Added) != 2 || run.ID == "" {
		t.Fatalf("run %+v mems %v: want two added (the empty text skipped)", run, texts(mems))
	}
	for _, m := range mems {
		if m.State != StateActive || m.RunID != run.ID || m.ChatID != "c1" || m.FromSeq != 1 || m.ToSeq != 4 {
			t.Errorf("memory %+v does not carry its run, chat and seqs", m)
		}
	}
	// The same fact again, differently spaced and cased, is not stored twice.
	again, dup := mustAdd(t, s, AddInput{Tenant: "t1", Source: SourceTool, Texts: []string{"lives  in oslo."}})
	if again.ID != "" || len(dup) != 0 {
		t.Fatalf("duplicate stored: run %+v, %v", again, texts(dup))
	}
	// Another tenant may know the same fact.
	if _, other := mustAdd(t, s, AddInput{Tenant: "t2", Texts: []string{"Lives in Oslo."}}); len(other) != 1 {
		t.Fatalf("tenant t2 could not store a fact t1 knows")
	}
	_, waiting := mustAdd(t, s, AddInput{Tenant: "t1", Texts: []string{"Works at ACME."}, Wait: true})
	if waiting[0].State != StateWaiting {
		t.Fatalf("Wait stored state %q", waiting[0].State)
	}
	act, _ := s.List(ctx, "t1", StateActive)
	all, _ := s.List(ctx, "t1", "")
	if len(act) != 2 || len(all) != 3 {
		t.Fatalf("active %v, all %v", texts(act), texts(all))
	}
}

func TestAddMasksAndClips(t *testing.T) {
	c := &clock{t: time.Now()}
	s := New(openDB(t), Options{Now: c.Now, Mask: func(s string) string { return strings.ReplaceAll(s, "hunter2", "[secret]") }})
	_, mems := mustAdd(t, s, AddInput{Tenant: "t", Texts: []string{"Password is hunter2", strings.Repeat("é", 400)}})
	if mems[0].Text != "Password is [secret]" {
		t.Errorf("mask not applied: %q", mems[0].Text)
	}
	if len(mems[1].Text) > MaxTextLen || !strings.HasSuffix(mems[1].Text, "…") {
		t.Errorf("long text not clipped to %d bytes on a rune boundary: %d bytes", MaxTextLen, len(mems[1].Text))
	}
}

func TestTenantScoping(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	run, mems := mustAdd(t, s, AddInput{Tenant: "alice", Texts: []string{"Has a cat."}, Wait: true})
	// A tenant whose escaped name could prefix alice's keys.
	mustAdd(t, s, AddInput{Tenant: "alice/x", Texts: []string{"Has a dog."}})
	id := mems[0].ID
	cases := map[string]func() error{
		"get":         func() error { _, err := s.Get(ctx, "bob", id); return err },
		"approve":     func() error { _, err := s.Approve(ctx, "bob", id); return err },
		"get run":     func() error { _, err := s.GetRun(ctx, "bob", run.ID); return err },
		"undo run":    func() error { _, err := s.UndoRun(ctx, "bob", run.ID); return err },
		"memory id":   func() error { _, err := s.GetRun(ctx, "alice", id); return err },
		"garbage id":  func() error { _, err := s.Get(ctx, "alice", "../x"); return err },
		"unknown id":  func() error { _, err := s.Get(ctx, "alice", "m_00000000000000000000000"+"0"); return err },
		"empty id":    func() error { _, err := s.UndoRun(ctx, "alice", ""); return err },
		"escaped ten": func() error { _, err := s.Get(ctx, "alice/x", id); return err },
	}
	for name, call := range cases {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, ErrNotFound) {
				t.Fatalf("err = %v, want ErrNotFound", err)
			}
		})
	}
	if got, _ := s.List(ctx, "alice", ""); len(got) != 1 || got[0].Text != "Has a cat." {
		t.Fatalf("alice lists %v: another tenant leaked in", texts(got))
	}
	if m, _ := s.Get(ctx, "alice", id); m.State != StateWaiting {
		t.Fatalf("bob's approve changed alice's memory: %q", m.State)
	}
}

func TestApprove(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		wait, undo bool
		wantErr    error
		wantState  string
	}{
		"waiting becomes active": {wait: true, wantState: StateActive},
		"active stays active":    {wantState: StateActive},
		"undone is refused":      {wait: true, undo: true, wantErr: ErrState, wantState: StateUndone},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, _ := newStore(t)
			run, mems := mustAdd(t, s, AddInput{Tenant: "t", Texts: []string{"Fact."}, Wait: tc.wait})
			if tc.undo {
				if _, err := s.UndoRun(ctx, "t", run.ID); err != nil {
					t.Fatal(err)
				}
			}
			_, err := s.Approve(ctx, "t", mems[0].ID)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if m, _ := s.Get(ctx, "t", mems[0].ID); m.State != tc.wantState {
				t.Fatalf("state %q, want %q", m.State, tc.wantState)
			}
		})
	}
}

func TestUndoRunRestores(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	_, keep := mustAdd(t, s, AddInput{Tenant: "t", ChatID: "c", Texts: []string{"Keeps bees."}})
	run, _ := mustAdd(t, s, AddInput{Tenant: "t", ChatID: "c", ToSeq: 9, Texts: []string{"Hates jazz.", "Owns a boat."}})
	if err := s.SetReadUntil(ctx, "t", "c", 9); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second undo is a no-op, not an error
		got, err := s.UndoRun(ctx, "t", run.ID)
		if err != nil || !got.Undone {
			t.Fatalf("undo: %+v, %v", got, err)
		}
	}
	act, _ := s.List(ctx, "t", StateActive)
	if len(act) != 1 || act[0].ID != keep[0].ID {
		t.Fatalf("active after undo = %v, want only the other run's memory", texts(act))
	}
	undone, _ := s.List(ctx, "t", StateUndone)
	if len(undone) != 2 {
		t.Fatalf("undone = %v, want the run's two", texts(undone))
	}
	if hits, _ := s.Search(ctx, "t", "jazz boat", 5); len(hits) != 0 {
		t.Fatalf("search still finds undone memories: %v", hits)
	}
	// The words stay read: undo must not invite the sweep to learn them again.
	if mark, _ := s.ReadUntil(ctx, "t", "c"); mark != 9 {
		t.Fatalf("read-until after undo = %d, want 9", mark)
	}
	runs, _ := s.Runs(ctx, "t")
	if len(runs) != 2 || runs[0].Undone || !runs[1].Undone {
		t.Fatalf("runs = %+v", runs)
	}
}

func TestReadUntilOnlyRises(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	if got, err := s.ReadUntil(ctx, "t", "c"); err != nil || got != 0 {
		t.Fatalf("fresh mark = %d, %v; want 0", got, err)
	}
	for _, seq := range []int64{5, 3, 8, 8, 2} {
		if err := s.SetReadUntil(ctx, "t", "c", seq); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := s.ReadUntil(ctx, "t", "c"); got != 8 {
		t.Fatalf("mark = %d, want the highest set (8)", got)
	}
}

// countingRecords counts the writes a Store makes.
type countingRecords struct {
	*persistence.Store
	mu     sync.Mutex
	writes [][]persistence.RecordPut
}

func (c *countingRecords) PutRecords(ctx context.Context, recs ...persistence.RecordPut) error {
	c.mu.Lock()
	c.writes = append(c.writes, recs)
	c.mu.Unlock()
	return c.Store.PutRecords(ctx, recs...)
}

// TestAddIsOneWrite: a run, its memories and the chat's raised read-until
// mark are stored in one write (one sync); a mark already past ReadTo is
// not lowered, and a run with nothing new still raises the mark.
func TestAddIsOneWrite(t *testing.T) {
	ctx := context.Background()
	rec := &countingRecords{Store: openDB(t)}
	s := New(rec, Options{})
	run, mems := mustAdd(t, s, AddInput{Tenant: "t1", ChatID: "c", Source: SourceFold, FromSeq: 1, ToSeq: 9, ReadTo: 9,
		Texts: []string{"likes tea", "lives in Oslo", "has a cat"}})
	if len(rec.writes) != 1 || len(rec.writes[0]) != 5 || len(mems) != 3 || len(run.Added) != 3 {
		t.Fatalf("%d writes (first of %d records) for a run of %d memories; want one of 5 (the run, 3 memories, the mark)", len(rec.writes), len(rec.writes[0]), len(mems))
	}
	if got, _ := s.ReadUntil(ctx, "t", "c"); got != 9 {
		t.Fatalf("mark %d, want 9", got)
	}
	if run, _ := mustAdd(t, s, AddInput{Tenant: "t1", ChatID: "c", Texts: []string{"likes tea"}, ReadTo: 5}); run.ID != "" || len(rec.writes) != 1 {
		t.Fatalf("nothing new and a lower mark: run %+v, %d writes; want none", run, len(rec.writes))
	}
	if got, _ := s.ReadUntil(ctx, "t", "c"); got != 9 {
		t.Fatalf("mark %d after a lower ReadTo, want 9", got)
	}
	mustAdd(t, s, AddInput{Tenant: "t1", ChatID: "c", Texts: []string{"likes tea"}, ReadTo: 12})
	if got, _ := s.ReadUntil(ctx, "t", "c"); got != 12 || len(rec.writes) != 2 || len(rec.writes[1]) != 1 {
		t.Fatalf("mark %d after a run with nothing new, %d writes; want 12 in one write of the mark", got, len(rec.writes))
	}
}

func TestSearchRanking(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	for _, text := range []string{
		"The person is vegetarian.",                   // 0
		"Grows tomatoes in the garden.",               // 1
		"Gardening on weekends, mostly roses.",        // 2
		"Their home server runs Debian 12.",           // 3
		"Prefers answers in French.",                  // 4
		"Their laptop runs Debian testing.",           // 5
		"Their home server is called 'atlas'.",        // 6
		"Allergic to peanuts; carries an epipen.",     // 7
		"Uses a standing desk at home in the garden.", // 8
		"The server at home is old.",                  // 9, the newest
	} {
		mustAdd(t, s, AddInput{Tenant: "t", Texts: []string{text}})
		c.Add(time.Minute)
	}
	cases := map[string]struct {
		query string
		k     int
		want  []string // the texts expected first, in order (prefix of the hits)
		none  bool
	}{
		"one exact word": {query: "vegetarian", want: []string{"The person is vegetarian."}},
		// debian is in 2 of 10 memories, home in 4: a debian-only memory
		// beats the newer home-only ones; the one with both comes first.
		"rare word outranks common": {query: "debian home", want: []string{"Their home server runs Debian 12.", "Their laptop runs Debian testing."}},
		// Memories 3, 6 and 9 all hold home and server; 9 is newest and would
		// win a tie, but only 3 and 6 have them as the phrase asked for.
		"phrase bonus":                 {query: "home server", k: 3, want: []string{"Their home server is called 'atlas'.", "Their home server runs Debian 12.", "The server at home is old."}},
		"prefix counts below exact":    {query: "garden", want: []string{"Uses a standing desk at home in the garden.", "Grows tomatoes in the garden.", "Gardening on weekends, mostly roses."}},
		"case and punctuation ignored": {query: "PEANUTS!", want: []string{"Allergic to peanuts; carries an epipen."}},
		"only stopwords still search":  {query: "the", k: 1, want: []string{"The server at home is old."}},
		"no match":                     {query: "kayak", none: true},
		"empty query":                  {query: "  ", none: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hits, err := s.Search(ctx, "t", tc.query, tc.k)
			if err != nil {
				t.Fatal(err)
			}
			if tc.none {
				if len(hits) != 0 {
					t.Fatalf("hits %v, want none", hits)
				}
				return
			}
			if tc.k > 0 && len(hits) > tc.k {
				t.Fatalf("%d hits, limit %d", len(hits), tc.k)
			}
			if len(hits) < len(tc.want) {
				t.Fatalf("hits %v, want at least %v", hits, tc.want)
			}
			for i, w := range tc.want {
				if hits[i].Text != w {
					t.Errorf("hit %d = %q (%.2f), want %q", i, hits[i].Text, hits[i].Score, w)
				}
			}
		})
	}
}
