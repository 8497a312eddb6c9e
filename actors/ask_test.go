package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestAskEndsWithItsContext: an ask of an actor that never answers ends
// with its context's cause once that ends, not at its timeout; an ask
// answered gets the answer.
func TestAskEndsWithItsContext(t *testing.T) {
	sys := actor.NewActorSystem()
	asked := make(chan struct{}, 1)
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case string:
			if m == "answer" {
				c.Respond("answered")
				return
			}
			asked <- struct{}{}
		}
	}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	if res, err := Ask(context.Background(), sys.Root, pid, "answer", time.Minute); err != nil || res != "answered" {
		t.Fatalf("an answered ask: %v, %v", res, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Ask(ctx, sys.Root, pid, "ignore", time.Hour)
		done <- err
	}()
	<-asked
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("an ask whose context ended: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the ask outlived its context")
	}
	if _, err := Ask(ctx, sys.Root, pid, "answer", time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("an ask with its context ended already: %v, want context.Canceled", err)
	}
}
