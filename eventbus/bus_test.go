package eventbus

import (
	"testing"
	"time"
)

func TestDeltasDropForLaggingWatchersButMustEventsWait(t *testing.T) {
	b := New(nil)
	s := b.Subscribe("c", 1)
	defer s.Close()
	b.Publish(Event{Type: "message.delta", ChatID: "c"})
	b.Publish(Event{Type: "message.delta", ChatID: "c"}) // no room: dropped
	if b.Dropped() != 1 {
		t.Fatalf("dropped = %d, want 1", b.Dropped())
	}
	done := make(chan struct{})
	go func() {
		b.PublishMust(Event{Type: "turn.completed", ChatID: "c"}, time.Minute)
		close(done)
	}()
	if ev := <-s.C; ev.Type != "message.delta" {
		t.Fatalf("first = %s", ev.Type)
	}
	<-done
	if ev := <-s.C; ev.Type != "turn.completed" {
		t.Fatalf("second = %s", ev.Type)
	}
}

func TestEventsReachOnlyTheirChat(t *testing.T) {
	b := New(nil)
	a, other := b.Subscribe("a", 4), b.Subscribe("b", 4)
	b.PublishMust(Event{Type: "x", ChatID: "a"}, time.Second)
	a.Close()
	if _, ok := <-a.C; !ok {
		t.Fatal("chat a's event was lost")
	}
	select {
	case ev := <-other.C:
		t.Fatalf("chat b got %+v", ev)
	default:
	}
	other.Close()
	if b.Watchers("a")+b.Watchers("b") != 0 {
		t.Fatal("closed subscriptions still counted")
	}
}

func TestWatchersReadConvertedData(t *testing.T) {
	calls := 0
	b := New(func(d any) any { calls++; return d.(int) * 2 })
	b.Publish(Event{Type: "x", ChatID: "c", Data: 1}) // no watcher: not converted
	s1, s2 := b.Subscribe("c", 2), b.Subscribe("c", 2)
	defer s1.Close()
	defer s2.Close()
	b.PublishMust(Event{Type: "x", ChatID: "c", Data: 21}, time.Second)
	for _, s := range []*Sub{s1, s2} {
		if ev := <-s.C; ev.Data != 42 {
			t.Fatalf("data = %v, want 42", ev.Data)
		}
	}
	if calls != 1 {
		t.Fatalf("converted %d times, want once per event with watchers", calls)
	}
}
