package session

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/providers"
)

// patience bounds a wait for what must come: past it the test has hung.
const patience = time.Minute

// resultOf resolves a session's reply in the background, so a test can
// tell whether it has come yet.
func (h *harness) resultOf(chatID string, msg any) <-chan any {
	out := make(chan any, 1)
	fut := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: chatID, Msg: msg}, patience)
	go func() {
		res, err := fut.Result()
		if err != nil {
			res = err
		}
		out <- res
	}()
	return out
}

func wait[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(patience):
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

// TestAWriteATurnWaitsForHoldsNoWorker: more chats than the sessions'
// dispatcher has workers start turns whose messages' syncs are held. Every
// one of them starts (each write is reached), another chat still answers,
// and a held chat answers what came after its message only once the
// message is durable, with the message in its view.
func TestAWriteATurnWaitsForHoldsNoWorker(t *testing.T) {
	const chats = 3 * actors.DefaultWorkerFloor
	held, gate := make(chan struct{}, chats), make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	var replies []providers.Response
	for range chats {
		replies = append(replies, reply("noted"))
	}
	h := newHarnessWith(t, 128_000, nil, func(h *harness, d *Deps) {
		hubDispatchers(t, d)
		h.store.synced = func() error { held <- struct{}{}; <-gate; return nil }
	}, replies...)
	t.Cleanup(release) // first: a failed test leaves no write held
	var submitted []<-chan any
	for i := range chats {
		id := fmt.Sprintf("held-%d", i)
		h.store.mu.Lock()
		h.store.chats[id] = persistence.Chat{ID: id, Tenant: "t1", Model: "fake/m"}
		h.store.mu.Unlock()
		submitted = append(submitted, h.resultOf(id, &SubmitTurn{TurnID: "t-" + id, Message: chat.Message{Content: "hi"}}))
	}
	for i := range chats {
		wait(t, fmt.Sprintf("sync of the message of chat %d of %d (its session could not run)", i+1, chats), held)
	}
	after := h.resultOf("held-0", &GetContext{})
	if v, ok := wait(t, "context of a chat with nothing held", h.resultOf("c1", &GetContext{})).(*chat.ContextView); !ok || v.LastSeq != 0 {
		t.Fatalf("the other chat's context: %#v", v)
	}
	select {
	case res := <-after:
		t.Fatalf("a chat answered %#v while its message was not yet durable", res)
	default:
	}
	release()
	for i, res := range submitted {
		if _, ok := wait(t, "answer to a submit", res).(*TurnAccepted); !ok {
			t.Fatalf("chat %d's turn: %#v", i, res)
		}
	}
	if v, ok := wait(t, "context of the held chat", after).(*chat.ContextView); !ok || v.LastSeq < 1 {
		t.Fatalf("the held chat's context after its message: %#v", v)
	}
}

// silentModel answers nothing until its call is cancelled.
type silentModel struct{ providers.Client }

func (silentModel) Stream(ctx context.Context, _ providers.Request, _ func(providers.Event)) (providers.Response, error) {
	<-ctx.Done()
	return providers.Response{}, ctx.Err()
}

// TestASessionStoppedWhileItsMessageSyncsAcceptsTheTurnAndEndsIt: a stop
// that comes while a turn's message syncs waits for the sync, so the
// person hears the message was taken (it is durable), and the turn then
// ends cut short by the stop, its mark in the log after the message.
func TestASessionStoppedWhileItsMessageSyncsAcceptsTheTurnAndEndsIt(t *testing.T) {
	held, release := make(chan struct{}, 1), make(chan struct{})
	h := newHarnessWith(t, 128_000, nil, func(h *harness, d *Deps) {
		one := d.Catalog.(oneModel)
		one.client = silentModel{one.client}
		d.Catalog = one
		h.store.synced = func() error { held <- struct{}{}; <-release; return nil }
	})
	sub := h.bus.Subscribe("c1", 1024)
	defer sub.Close()
	submitted := h.resultOf("c1", &SubmitTurn{TurnID: "t-hi", Message: chat.Message{Content: "hi"}})
	wait(t, "sync of the message", held)
	stop := h.system.Root.StopFuture(h.registry)
	close(release)
	if res, ok := wait(t, "answer to the submit", submitted).(*TurnAccepted); !ok || res.UserSeq != 1 {
		t.Fatalf("a turn whose message synced while its session stopped got %#v", res)
	}
	if err := stop.Wait(); err != nil {
		t.Fatal(err)
	}
	var end *chat.TurnResult
	var order []string
	for ev := range sub.C {
		order = append(order, ev.Type)
		if ev.Type == chat.EventTurnCompleted {
			r := ev.Data.(chat.TurnResult)
			end = &r
			break
		}
	}
	if order[0] != chat.EventTurnStarted {
		t.Fatalf("the turn's events came in the order %v", order)
	}
	if end == nil || end.Problem == nil || end.Problem.Kind != chat.ProblemShutdown {
		t.Fatalf("the turn ended with %+v, want the shutdown problem", end)
	}
	h.store.mu.Lock()
	log := h.store.msgs["c1"]
	h.store.mu.Unlock()
	if len(log) != 2 || log[0].Content != "hi" || !log[1].Partial {
		t.Fatalf("the log after the stop: %+v", log)
	}
}

// hubDispatchers runs d's sessions as the hub does: their mailboxes on a
// bounded dispatcher, their calls and writes on one of their own; both
// stop when the test ends.
func hubDispatchers(t *testing.T, d *Deps) {
	d.Dispatcher, d.Workers = actors.NewBoundedDispatcher(1), actors.NewDispatcher(0, 0, 0)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		for _, dd := range []*actors.Dispatcher{d.Dispatcher, d.Workers} {
			if err := dd.Stop(ctx); err != nil {
				t.Error(err)
			}
		}
	})
}
