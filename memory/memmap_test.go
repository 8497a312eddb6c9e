package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/agentd/agentd/persistence"
)

// mapText is the tenant's map of the day, "" when the store failed.
func mapText(s *Store, tenant string) string {
	text, _ := s.MapErr(context.Background(), tenant)
	return text
}

func TestMapByteStableForADay(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	c := &clock{t: time.Date(2026, 10, 5, 8, 0, 0, 0, time.UTC)}
	s := New(db, Options{Now: c.Now})
	for i := range 30 {
		mustAdd(t, s, AddInput{Tenant: "t", Texts: []string{fmt.Sprintf("Fact number %d about the garden and coffee habits of the person.", i)}})
	}
	morning := mapText(s, "t")
	if morning == "" || len(morning) > MapLimit {
		t.Fatalf("map is %d bytes, want 1..%d:\n%s", len(morning), MapLimit, morning)
	}

	// Later the same day: a new memory and an approval change nothing in the
	// map, though search finds the new memory at once.
	c.Add(10 * time.Hour)
	mustAdd(t, s, AddInput{Tenant: "t", Texts: []string{"Learned to play the theremin."}})
	_, waiting := mustAdd(t, s, AddInput{Tenant: "t", Texts: []string{"Speaks Basque."}, Wait: true})
	if _, err := s.Approve(ctx, "t", waiting[0].ID); err != nil {
		t.Fatal(err)
	}
	if evening := mapText(s, "t"); evening != morning {
		t.Fatalf("map changed within the day:\n--- morning\n%s\n--- evening\n%s", morning, evening)
	}
	if hits, _ := s.Search(ctx, "t", "theremin", 1); len(hits) != 1 {
		t.Fatalf("search does not find today's memory: %v", hits)
	}

	// A restart the same day (a new Store over the same Badger) keeps it.
	if again := mapText(New(db, Options{Now: c.Now}), "t"); again != morning {
		t.Fatalf("map changed across a restart:\n%s", again)
	}

	// The next day the new memories show (the newest lines come first).
	c.Add(6 * time.Hour) // 08:00+10h+6h = 2026-10-06 00:00
	next := mapText(s, "t")
	if next == morning || !strings.Contains(next, "theremin") || !strings.Contains(next, "Basque") {
		t.Fatalf("next day's map lacks the new memories:\n%s", next)
	}
	if !strings.Contains(next, "32 things") {
		t.Fatalf("next day's map does not count 32 memories:\n%s", next)
	}
}

func TestMapUndoRebuildsAtOnce(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustAdd(t, s, AddInput{Tenant: "t", Texts: []string{"Keeps bees."}})
	run, _ := mustAdd(t, s, AddInput{Tenant: "t", Texts: []string{"Is planning a surprise party."}})
	if !strings.Contains(mapText(s, "t"), "surprise party") {
		t.Fatalf("map lacks the memory: %q", mapText(s, "t"))
	}
	if _, err := s.UndoRun(ctx, "t", run.ID); err != nil {
		t.Fatal(err)
	}
	got := mapText(s, "t")
	if strings.Contains(got, "surprise") || !strings.Contains(got, "bees") {
		t.Fatalf("map after undo = %q, want bees without the party", got)
	}
}

func TestMapEmptyAndPerTenant(t *testing.T) {
	s, _ := newStore(t)
	if got := mapText(s, "nobody"); got != "" {
		t.Fatalf("map of a tenant with no memories = %q, want empty", got)
	}
	mustAdd(t, s, AddInput{Tenant: "a", Texts: []string{"Likes chess."}})
	mustAdd(t, s, AddInput{Tenant: "b", Texts: []string{"Likes golf."}})
	if a := mapText(s, "a"); !strings.Contains(a, "chess") || strings.Contains(a, "golf") {
		t.Fatalf("tenant a's map = %q", a)
	}
}

// TestBuildMapProperties: whatever the memories, the map fits MapLimit, is
// valid UTF-8, does not depend on the input's order, lists the newest
// memory, and says how many there are.
func TestBuildMapProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 80).Draw(rt, "n")
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		mems := make([]Memory, n)
		for i := range mems {
			text := rapid.StringN(1, 300, -1).Draw(rt, "text")
			if strings.TrimSpace(text) == "" {
				text = "x"
			}
			mems[i] = Memory{ID: fmt.Sprintf("m_%016x00000000", i), Text: text, State: StateActive,
				CreatedAt: base.Add(time.Duration(i) * time.Minute)}
		}
		got := BuildMap(mems)
		if len(got) > MapLimit {
			rt.Fatalf("map is %d bytes > %d", len(got), MapLimit)
		}
		if !utf8.ValidString(got) {
			rt.Fatalf("map is not valid UTF-8")
		}
		shuffled := rapid.Permutation(mems).Draw(rt, "order")
		if again := BuildMap(shuffled); again != got {
			rt.Fatalf("map depends on input order")
		}
		wantCount := fmt.Sprintf("%d thing", n)
		if !strings.Contains(got, wantCount) {
			rt.Fatalf("map does not say %q:\n%s", wantCount, got)
		}
		newest := clipText(strings.Join(strings.Fields(mems[n-1].Text), " "), mapLineLimit)
		if !strings.Contains(got, "- "+newest) {
			rt.Fatalf("map lacks the newest memory %q:\n%s", newest, got)
		}
	})
}

// buildMapBefore is BuildMap as it was before it kept a running length:
// it joined the kept lines again to measure each count, which cost seconds
// for thousands of memories. TestBuildMapAsBefore's oracle.
func buildMapBefore(mems []Memory) string {
	if len(mems) == 0 {
		return ""
	}
	mems = slices.Clone(mems)
	sortNewest(mems)
	header, lines := mapParts(mems)
	fits := func(lines []string, footer string) bool { return len(render(header, lines, footer)) <= MapLimit }
	if fits(lines, footer(0)) {
		return render(header, lines, footer(0))
	}
	if t := topics(mems); len(t) > 0 {
		header += " Often about: " + strings.Join(t, ", ") + "."
	}
	for n := len(lines) - 1; n >= 0; n-- {
		f := footer(len(lines) - n)
		if fits(lines[:n], f) {
			return render(header, lines[:n], f)
		}
	}
	return clipText(header, MapLimit)
}

// TestBuildMapAsBefore: BuildMap gives exactly the bytes it gave before its
// running length, on maps that list every memory, some, or one, with and
// without topics, in any script, with ties in time.
func TestBuildMapAsBefore(t *testing.T) {
	vocab := []string{"tea", "garden", "chess", "Oslo", "café", "日本語", "bees", "  ", "\t", "a", "zzzzzzzzzzzzzzzzzzzzzzzzz"}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 300).Draw(rt, "n")
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		mems := make([]Memory, n)
		for i := range mems {
			var text string
			if rapid.Bool().Draw(rt, "words") {
				ws := rapid.SliceOfN(rapid.SampledFrom(vocab), 1, 40).Draw(rt, "vocab")
				text = strings.Join(ws, " ")
			} else {
				text = rapid.StringN(0, 200, -1).Draw(rt, "text")
			}
			mems[i] = Memory{ID: fmt.Sprintf("m_%016x00000000", i), Text: text, State: StateActive,
				CreatedAt: base.Add(time.Duration(rapid.IntRange(0, 5).Draw(rt, "minute")) * time.Minute)}
		}
		if got, want := BuildMap(mems), buildMapBefore(mems); got != want {
			rt.Fatalf("BuildMap changed its bytes:\n--- now\n%s\n--- before\n%s", got, want)
		}
	})
}

// heldRecords stalls reading one tenant's stored map until released.
type heldRecords struct {
	*persistence.Store
	id      string
	entered chan struct{}
	release chan struct{}
}

func (h *heldRecords) Record(ctx context.Context, kind, id string, v any) error {
	if kind == mapKind && id == h.id {
		close(h.entered)
		<-h.release
	}
	return h.Store.Record(ctx, kind, id, v)
}

// TestMapOfOneTenantWaitsNotOnAnother: while one tenant's map is read from
// a stalled store, another tenant's map of the day is still answered, and
// every caller of the stalled tenant gets the one map built once it goes on.
func TestMapOfOneTenantWaitsNotOnAnother(t *testing.T) {
	db := openDB(t)
	c := &clock{t: time.Date(2026, 10, 5, 9, 0, 0, 0, time.UTC)}
	held := &heldRecords{Store: db, id: "slow", entered: make(chan struct{}), release: make(chan struct{})}
	s := New(held, Options{Now: c.Now})
	mustAdd(t, s, AddInput{Tenant: "fast", Texts: []string{"Likes chess."}})
	mustAdd(t, s, AddInput{Tenant: "slow", Texts: []string{"Likes golf."}})
	fast := mapText(s, "fast")
	slow := make(chan string, 3)
	for range cap(slow) {
		go func() { slow <- mapText(s, "slow") }()
	}
	<-held.entered
	again := make(chan string, 1)
	go func() { again <- mapText(s, "fast") }()
	select {
	case got := <-again:
		if got != fast || !strings.Contains(got, "chess") {
			t.Fatalf("fast tenant's map = %q, want %q", got, fast)
		}
	case <-time.After(time.Minute):
		t.Fatal("a tenant's cached map waited on another tenant's store read")
	}
	close(held.release)
	for range cap(slow) {
		if got := <-slow; !strings.Contains(got, "golf") {
			t.Fatalf("slow tenant's map = %q", got)
		}
	}
}
