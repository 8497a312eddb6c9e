package eventbus

import (
	"testing"
	"time"
)

func TestDeltasDropForLaggingWatchersButMustEventsWait(t *testing.T) {
	b := New()
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
	b := New()
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
