package eventbus

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

func ev(typ string, seq int64) Event { return Event{Type: typ, ChatID: "c", Seq: seq} }

// drain reads what a subscription holds until C is closed or empty.
func drain(s *Sub) (got []Event, closed bool) {
	for {
		select {
		case e, ok := <-s.C:
			if !ok {
				return got, true
			}
			got = append(got, *e)
		default:
			return got, false
		}
	}
}

func TestDeltasDropPastTheMarkMustEventsUseTheRest(t *testing.T) {
	b := New(time.Hour, nil)
	s := b.Subscribe("c", 4) // the mark is 3
	defer s.Close()
	for i := range 5 {
		b.Publish(ev("message.delta", int64(i)))
	}
	if b.Dropped() != 2 {
		t.Fatalf("dropped = %d, want 2 (deltas past the mark of 3)", b.Dropped())
	}
	b.PublishMust(ev("turn.completed", 9))
	got, closed := drain(s)
	if closed || len(got) != 4 || got[3].Type != "turn.completed" {
		t.Fatalf("got %v (closed %v); want three deltas and turn.completed", got, closed)
	}
	if s.Dropped() != nil || b.Watchers("c") != 1 {
		t.Fatalf("a watcher that caught up was dropped: %+v", s.Dropped())
	}
}

// The structural property of issue 15: a publish never waits for a full
// subscriber; that subscriber alone ends, with the events it holds, a
// reason and the last seq it was told of, and the others get everything.
func TestAFullWatcherIsDroppedAndNobodyWaits(t *testing.T) {
	b := New(time.Hour, nil)
	stuck := b.Subscribe("c", 2)
	reader := b.Subscribe("c", 16)
	defer reader.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(1); i <= 5; i++ {
			b.PublishMust(ev("message", i))
		}
	}()
	<-done // a publisher that waited for stuck would never get here
	got, closed := drain(stuck)
	if !closed || len(got) != 2 || got[1].Seq != 2 {
		t.Fatalf("the full watcher got %v (closed %v); want seqs 1, 2 then the end", got, closed)
	}
	d := stuck.Dropped()
	if d == nil || d.Reason == "" || d.LastSeq != 2 {
		t.Fatalf("drop = %+v; want a reason and last seq 2", d)
	}
	if all, _ := drain(reader); len(all) != 5 {
		t.Fatalf("the reading watcher got %d of 5 events", len(all))
	}
	if b.Watchers("c") != 1 || b.DroppedWatchers() != 1 {
		t.Fatalf("watchers %d, dropped watchers %d; want 1 and 1", b.Watchers("c"), b.DroppedWatchers())
	}
	stuck.Close() // after a drop, Close is harmless
	if stuck.Dropped() == nil {
		t.Fatal("Close forgot why the watcher was dropped")
	}
}

// Each subscription keeps its own clock: one that stays past the mark for
// longer than the patience is dropped at the next event, another that
// keeps up is not.
func TestPatienceIsPerSubscription(t *testing.T) {
	b := New(time.Second, nil)
	behind := b.Subscribe("c", 4)
	fresh := b.Subscribe("c", 4)
	t0 := time.Now()
	cases := []struct {
		at   time.Duration
		must bool
		read bool // fresh reads everything before this event
		gone bool // behind is dropped by this event
	}{
		{0, true, false, false},
		{0, true, false, false},
		{0, true, false, false}, // behind reaches the mark
		{100 * time.Millisecond, false, true, false},
		{900 * time.Millisecond, false, true, false},
		{1200 * time.Millisecond, false, true, true}, // behind for over a second
	}
	for i, c := range cases {
		if c.read {
			drain(fresh)
		}
		e := ev("e", int64(i))
		ended := behind.offer(&e, c.must, t0.Add(c.at))
		fresh.offer(&e, c.must, t0.Add(c.at))
		if ended != c.gone {
			t.Fatalf("event %d at %s: dropped %v, want %v", i, c.at, ended, c.gone)
		}
	}
	if d := behind.Dropped(); d == nil || d.LastSeq != 2 {
		t.Fatalf("drop = %+v; want last seq 2", d)
	}
	if fresh.Dropped() != nil {
		t.Fatal("the watcher that kept up was dropped")
	}
	fresh.Close()
}

func TestEventsReachOnlyTheirChat(t *testing.T) {
	b := New(time.Second, nil)
	a, other := b.Subscribe("a", 4), b.Subscribe("b", 4)
	b.PublishMust(Event{Type: "x", ChatID: "a"})
	a.Close()
	if _, ok := <-a.C; !ok {
		t.Fatal("chat a's event was lost")
	}
	select {
	case e := <-other.C:
		t.Fatalf("chat b got %+v", e)
	default:
	}
	other.Close()
	if b.Watchers("a")+b.Watchers("b") != 0 {
		t.Fatal("closed subscriptions still counted")
	}
}

// Publishing, dropping and closing at once: no send on a closed channel,
// no race (go test -race).
func TestPublishDropAndCloseConcurrently(t *testing.T) {
	b := New(time.Millisecond, nil)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				if i%3 == 0 {
					b.PublishMust(ev("m", int64(i)))
				} else {
					b.Publish(ev("d", int64(i)))
				}
			}
		}()
	}
	for range 50 {
		s := b.Subscribe("c", 2)
		drain(s)
		s.Close()
	}
	wg.Wait()
}

func TestWatchersReadConvertedData(t *testing.T) {
	calls := 0
	b := New(time.Second, func(d any) any { calls++; return d.(int) * 2 })
	b.Publish(Event{Type: "x", ChatID: "c", Data: 1}) // no watcher: not converted
	s1, s2 := b.Subscribe("c", 2), b.Subscribe("c", 2)
	defer s1.Close()
	defer s2.Close()
	b.PublishMust(Event{Type: "x", ChatID: "c", Data: 21})
	for _, s := range []*Sub{s1, s2} {
		if ev := <-s.C; ev.Data != 42 {
			t.Fatalf("data = %v, want 42", ev.Data)
		}
	}
	if calls != 1 {
		t.Fatalf("converted %d times, want once per event with watchers", calls)
	}
}

// A watcher of some types holds, is woken by and falls behind on those
// alone: a request waiting for its turn's end, with a buffer of 2, stays
// through a turn's hundred deltas and messages and gets the end; an event
// only the other types' watchers skip is not converted.
func TestAWatcherOfSomeTypesTakesThoseAlone(t *testing.T) {
	calls := 0
	b := New(time.Hour, func(d any) any { calls++; return d })
	end := b.Subscribe("c", 2, "turn.completed", "turn.requires_action")
	defer end.Close()
	for i := range 100 {
		b.Publish(ev("message.delta", int64(i)))
		b.PublishMust(ev("message", int64(i)))
	}
	if got, closed := drain(end); len(got) != 0 || closed {
		t.Fatalf("the turn end's watcher got %v (closed %v) before the end", got, closed)
	}
	if calls != 0 || b.Dropped() != 0 {
		t.Fatalf("events no watcher takes: %d converted, %d counted dropped; want 0 and 0", calls, b.Dropped())
	}
	all := b.Subscribe("c", 4)
	defer all.Close()
	b.PublishMust(ev("message", 100))
	b.PublishMust(ev("turn.completed", 101))
	got, closed := drain(end)
	if closed || len(got) != 1 || got[0].Type != "turn.completed" || end.Dropped() != nil {
		t.Fatalf("the turn end's watcher got %v (closed %v, dropped %+v); want turn.completed alone", got, closed, end.Dropped())
	}
	if got, _ := drain(all); len(got) != 2 {
		t.Fatalf("a watcher of every type got %v; want message and turn.completed", got)
	}
	if calls != 2 {
		t.Fatalf("converted %d times, want 2 (the two events watched)", calls)
	}
}

func TestAWatcherOfOneTurnIsNotDroppedForAnothersEvents(t *testing.T) {
	b := New(time.Hour, nil)
	mine := b.Subscribe("c", 2)
	defer mine.Close()
	mine.OfTurn("t2", "compacted")
	for i := range 100 {
		b.PublishMust(Event{Type: "message", ChatID: "c", TurnID: "t1", Seq: int64(i)})
	}
	b.PublishMust(Event{Type: "compacted", ChatID: "c", TurnID: "t1", Seq: 100})
	b.PublishMust(Event{Type: "turn.started", ChatID: "c", TurnID: "t2", Seq: 100})
	got, closed := drain(mine)
	if closed || len(got) != 2 || got[0].Type != "compacted" || got[1].TurnID != "t2" {
		t.Fatalf("the watcher of turn t2 got %v (closed %v, dropped %+v); want compacted and t2's turn.started", got, closed, mine.Dropped())
	}
}

// Watchers of a chat share the one copy of an event that a publish makes,
// so a subscription's buffer holds pointers: 256 slots cost about 2 KB,
// where a buffer of Events cost 18 KB (per turn, for the HTTP API's turn
// streams).
func TestWatchersShareOneEventAndABufferHoldsPointers(t *testing.T) {
	b := New(time.Second, nil)
	subs := []*Sub{b.Subscribe("c", 4), b.Subscribe("c", 4), b.Subscribe("c", 4)}
	publish := func() { b.PublishMust(Event{Type: "x", ChatID: "c", TurnID: "t", Seq: 7, Data: "d"}) }
	publish()
	first := <-subs[0].C
	for _, s := range subs[1:] {
		if e := <-s.C; e != first {
			t.Fatalf("watchers got different copies: %p and %p", e, first)
		}
	}
	if *first != (Event{Type: "x", ChatID: "c", TurnID: "t", Seq: 7, Data: "d"}) {
		t.Fatalf("got %+v", *first)
	}
	allocs := testing.AllocsPerRun(100, func() {
		publish()
		for _, s := range subs {
			<-s.C
		}
	})
	if allocs > 1 {
		t.Fatalf("a publish to 3 watchers allocated %.0f times, want one shared event", allocs)
	}
	const n, buf = 100, 256
	keep := make([]*Sub, 0, n)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		keep = append(keep, b.Subscribe("d", buf))
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 4<<10 {
		t.Fatalf("a %d-event subscription allocated %d bytes, want a pointer a slot (about 2 KB)", buf, per)
	}
	for _, s := range append(keep, subs...) {
		s.Close()
	}
}

// Many chats, each with watchers coming and going while its events are
// published: a watcher that stays gets every event of its chat, in order,
// and none of another chat's; once all are closed none is counted.
func TestManyChatsWatchersComeAndGo(t *testing.T) {
	b := New(time.Minute, nil)
	const chats, events = 200, 50
	var wg sync.WaitGroup
	for c := range chats {
		id := fmt.Sprint("chat-", c)
		stay := b.Subscribe(id, events)
		wg.Go(func() {
			for i := range events {
				brief := b.Subscribe(id, 1)
				b.PublishMust(Event{Type: "m", ChatID: id, Seq: int64(i + 1)})
				brief.Close()
			}
			stay.Close()
			var seqs []int64
			for e := range stay.C {
				if e.ChatID != id {
					t.Errorf("%s got an event of %s", id, e.ChatID)
				}
				seqs = append(seqs, e.Seq)
			}
			if len(seqs) != events || !slices.IsSorted(seqs) || seqs[0] != 1 {
				t.Errorf("%s got seqs %v, want 1..%d in order", id, seqs, events)
			}
			if d := stay.Dropped(); d != nil {
				t.Errorf("%s dropped: %+v", id, d)
			}
		})
	}
	wg.Wait()
	for c := range chats {
		if n := b.Watchers(fmt.Sprint("chat-", c)); n != 0 {
			t.Fatalf("chat-%d still counts %d watchers", c, n)
		}
	}
}
