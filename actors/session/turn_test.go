package session

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// resolveCounter is a catalog that counts Resolve, which a turn's planning
// calls first.
type resolveCounter struct {
	oneModel
	n *atomic.Int32
}

func (c resolveCounter) Resolve(ref string) (providers.Client, providers.ModelInfo, error) {
	c.n.Add(1)
	return c.oneModel.Resolve(ref)
}

// TestATurnIsPlannedWhileItsMessageSyncsAndNothingIsSaidBeforeIt: the
// session plans a turn's request while the person's message syncs; the
// ack, the turn's events and the model call wait for the sync, and a
// failed sync refuses the turn with nothing said of it.
func TestATurnIsPlannedWhileItsMessageSyncsAndNothingIsSaidBeforeIt(t *testing.T) {
	for _, fail := range []error{nil, errors.New("disk gone")} {
		entered, release := make(chan struct{}, 1), make(chan struct{})
		var resolved atomic.Int32
		h := newHarnessWith(t, 128_000, nil, func(h *harness, d *Deps) {
			d.Catalog = resolveCounter{oneModel: d.Catalog.(oneModel), n: &resolved}
			h.store.synced = func() error {
				entered <- struct{}{}
				<-release
				return fail
			}
		}, reply("hello"), reply("again"))
		sub := h.bus.Subscribe("c1", 1024)
		fut := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &SubmitTurn{TurnID: "t-hi", Message: chat.Message{Content: "hi"}}}, time.Minute)
		<-entered
		if resolved.Load() == 0 {
			t.Fatal("the turn was not planned while its message synced")
		}
		select {
		case ev := <-sub.C:
			t.Fatalf("%s went out before the message was durable", ev.Type)
		default:
		}
		if n := len(h.model.requests()); n != 0 {
			t.Fatalf("%d model calls before the message was durable", n)
		}
		close(release)
		res, err := fut.Result()
		if err != nil {
			t.Fatal(err)
		}
		if fail != nil {
			if r, ok := res.(*Rejected); !ok || !errors.Is(r.Err, fail) {
				t.Fatalf("a turn whose message did not sync got %#v", res)
			}
			h.store.synced = nil // the next message syncs
			if res, _ := h.turn("again"); res.Problem != nil {
				t.Fatalf("the next turn: %+v", res.Problem)
			}
			// turn gathers from its own submit on: the refused turn's
			// events would have come before.
			if ev := <-sub.C; ev.Type != chat.EventTurnStarted || ev.TurnID != "t-again" {
				t.Fatalf("after a refused turn the first event is %s of %s", ev.Type, ev.TurnID)
			}
		} else {
			if _, ok := res.(*TurnAccepted); !ok {
				t.Fatalf("submit got %#v", res)
			}
			if ev := <-sub.C; ev.Type != chat.EventTurnStarted {
				t.Fatalf("the first event is %s", ev.Type)
			}
			if ev := <-sub.C; ev.Type != chat.EventMessage || ev.Data.(chat.Message).Content != "hi" {
				t.Fatalf("the second event is %s %+v", ev.Type, ev.Data)
			}
		}
		sub.Close()
	}
}
