package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// calledModel tells of each call before making it.
type calledModel struct {
	providers.Client
	called chan<- struct{}
}

func (m calledModel) Stream(ctx context.Context, req providers.Request, emit func(providers.Event)) (providers.Response, error) {
	m.called <- struct{}{}
	return m.Client.Stream(ctx, req, emit)
}

// TestATurnIsSentWhileItsMessageSyncsAndNothingIsSaidBeforeIt: the session
// plans a turn's request and sends it while the person's message syncs;
// the ack, the turn's events and the answer's words wait for the sync, and
// a failed sync refuses the turn with nothing said of it.
func TestATurnIsSentWhileItsMessageSyncsAndNothingIsSaidBeforeIt(t *testing.T) {
	for _, fail := range []error{nil, errors.New("disk gone")} {
		entered, release, called := make(chan struct{}, 1), make(chan struct{}), make(chan struct{}, 2)
		h := newHarnessWith(t, 128_000, nil, func(h *harness, d *Deps) {
			one := d.Catalog.(oneModel)
			one.client = calledModel{Client: one.client, called: called}
			d.Catalog = one
			h.store.synced = func() error {
				entered <- struct{}{}
				<-release
				return fail
			}
		}, reply("hello"), reply("again"))
		sub := h.bus.Subscribe("c1", 1024)
		fut := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &SubmitTurn{TurnID: "t-hi", Message: chat.Message{Content: "hi"}}}, time.Minute)
		<-entered
		<-called // the request went out while the message synced
		select {
		case ev := <-sub.C:
			t.Fatalf("%s went out before the message was durable", ev.Type)
		default:
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
			// The refused turn's events, and its answer's word, would have
			// come before the next turn's.
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
			if ev := <-sub.C; ev.Type != chat.EventMessageDelta {
				t.Fatalf("the third event is %s", ev.Type)
			}
		}
		sub.Close()
	}
}
