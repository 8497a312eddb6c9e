package session

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// gated answers each call once let through: fail, or the call's number.
type gated struct {
	calls atomic.Int32
	let   chan bool // true: answer; false: fail
}

func (g *gated) Stream(ctx context.Context, _ providers.Request, emit func(providers.Event)) (providers.Response, error) {
	n := g.calls.Add(1)
	select {
	case ok := <-g.let:
		if !ok {
			return providers.Response{}, &providers.Error{Provider: "fake", Status: 400, Body: "refused"}
		}
	case <-ctx.Done():
		return providers.Response{}, ctx.Err()
	}
	text := "answer " + string(rune('0'+n))
	emit(providers.Event{Kind: providers.EventText, Text: text})
	return reply(text), nil
}

func (g *gated) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

// TestAKeyedMessageIsStoredAndAnsweredOnce: a message sent again under its
// idempotency key joins its running turn, is ErrKeyInProgress while it
// waits its turn, is Answered once its turn has ended (and ErrKeyReused
// with other words), and has its turn continued when that turn failed
// before answering; the log holds each message once.
func TestAKeyedMessageIsStoredAndAnsweredOnce(t *testing.T) {
	model := &gated{let: make(chan bool)}
	h := newHarnessWith(t, 128_000, nil, func(_ *harness, d *Deps) {
		d.Catalog = oneModel{client: model, info: providers.ModelInfo{Provider: "fake", ID: "m", Window: 128_000}}
	})
	ask := func(m *SubmitTurn) any {
		t.Helper()
		res, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: m}, time.Minute).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	keyed := func(turnID, text, key string) *SubmitTurn {
		return &SubmitTurn{TurnID: turnID, Message: chat.Message{Content: text, IdempotencyKey: key}}
	}
	sub := h.bus.Subscribe("c1", 1024, chat.EventTurnCompleted)
	defer sub.Close()
	completed := func(turnID string) chat.TurnResult {
		t.Helper()
		for ev := range sub.C {
			if ev.TurnID == turnID {
				return ev.Data.(chat.TurnResult)
			}
		}
		t.Fatal("the events ended")
		return chat.TurnResult{}
	}

	first, ok := ask(keyed("t1", "hello", "k1")).(*TurnAccepted)
	if !ok || first.TurnID != "t1" {
		t.Fatalf("the first send: %+v", first)
	}
	var joined string
	again := keyed("t1-again", "hello", "k1")
	again.Joined = func(id string) { joined = id }
	if acc, ok := ask(again).(*TurnAccepted); !ok || acc.TurnID != "t1" || acc.UserSeq != first.UserSeq || joined != "t1" {
		t.Fatalf("sent again while its turn runs: %+v, joined %q; want turn t1 joined", acc, joined)
	}
	// k2 waits behind t1: sent again meanwhile, it is in progress.
	queued := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: keyed("t2", "second", "k2")}, time.Minute)
	if r, ok := ask(keyed("t2-again", "second", "k2")).(*Rejected); !ok || !errors.Is(r.Err, ErrKeyInProgress) {
		t.Fatalf("sent again while it waits its turn: %+v", r)
	}
	model.let <- true
	if res := completed("t1"); len(res.Messages) != 2 || res.Messages[1].Content != "answer 1" {
		t.Fatalf("t1 answered %+v", res.Messages)
	}
	model.let <- true
	if res, err := queued.Result(); err != nil || res.(*TurnAccepted).TurnID != "t2" {
		t.Fatalf("k2's turn: %v, %v", res, err)
	}
	completed("t2")
	if a, ok := ask(keyed("t1-late", "hello", "k1")).(*Answered); !ok || a.UserSeq != first.UserSeq {
		t.Fatalf("sent again after its turn: %+v, want Answered at seq %d", a, first.UserSeq)
	}
	if r, ok := ask(keyed("t1-other", "goodbye", "k1")).(*Rejected); !ok || !errors.Is(r.Err, ErrKeyReused) {
		t.Fatalf("the key with other words: %+v, want ErrKeyReused", r)
	}

	// A turn that fails before answering is continued by the same key.
	failed, ok := ask(keyed("t3", "third", "k3")).(*TurnAccepted)
	if !ok {
		t.Fatalf("the third send: %+v", failed)
	}
	model.let <- false
	if res := completed("t3"); res.Problem == nil {
		t.Fatalf("t3 did not fail: %+v", res)
	}
	if acc, ok := ask(keyed("t3-again", "third", "k3")).(*TurnAccepted); !ok || acc.TurnID != "t3-again" || acc.UserSeq != failed.UserSeq {
		t.Fatalf("sent again after its turn failed: %+v, want a turn from seq %d", acc, failed.UserSeq)
	}
	model.let <- true
	if res := completed("t3-again"); res.Problem != nil || res.Messages[len(res.Messages)-1].Content != "answer 4" {
		t.Fatalf("the continued turn: %+v", res)
	}

	stored, _ := h.store.Messages(context.Background(), "c1", 0, 0)
	var got []string
	for _, m := range stored {
		got = append(got, m.Content)
	}
	if want := []string{"hello", "answer 1", "second", "answer 2", "third", "answer 4"}; !slices.Equal(got, want) {
		t.Fatalf("the log holds %q, want %q", got, want)
	}
	if stored[0].IdempotencyKey != "k1" || stored[1].IdempotencyKey != "" {
		t.Fatalf("keys stored %q, %q: want the message's alone", stored[0].IdempotencyKey, stored[1].IdempotencyKey)
	}
}
