package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// heldModel starts answering and then waits for its call to be cut.
type heldModel struct{ started chan struct{} }

func (m heldModel) Stream(ctx context.Context, _ providers.Request, emit func(providers.Event)) (providers.Response, error) {
	emit(providers.Event{Kind: providers.EventText, Text: "part of an answer"})
	m.started <- struct{}{}
	<-ctx.Done()
	return providers.Response{}, ctx.Err()
}

func (heldModel) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

// TestAChatThatMovesEndsItsTurnAsMovedAndWritesNothing: when a chat's grain
// leaves this node (cluster mode), the running turn ends with problem
// moved, not "agentd stopped"; a turn waiting behind it is refused with
// ErrMoved; and nothing more is written to the log, which is another
// node's to write now.
func TestAChatThatMovesEndsItsTurnAsMovedAndWritesNothing(t *testing.T) {
	model := heldModel{started: make(chan struct{}, 1)}
	h := newHarnessWith(t, 8000, nil, func(_ *harness, d *Deps) {
		d.Catalog = oneModel{client: model, info: providers.ModelInfo{Provider: "fake", ID: "m", Window: 8000}}
	})
	sub := h.bus.Subscribe("c1", 1024)
	defer sub.Close()
	first := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &SubmitTurn{TurnID: "t1", Message: chat.Message{Content: "hello"}}}, time.Minute)
	select {
	case <-model.started:
	case <-time.After(time.Minute):
		t.Fatal("the model was never called")
	}
	if _, err := first.Result(); err != nil {
		t.Fatalf("first submit: %v", err)
	}
	// The second waits behind the first: the registry hands it to the
	// session before it handles Moved, which arrives after it.
	second := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &SubmitTurn{TurnID: "t2", Message: chat.Message{Content: "and then"}}}, time.Minute)

	h.system.Root.Send(h.registry, &Moved{ChatID: "c1"})

	var problem *chat.Problem
	for ev := range sub.C {
		if ev.Type == chat.EventTurnCompleted {
			problem = ev.Data.(chat.TurnResult).Problem
			break
		}
	}
	if problem == nil || problem.Kind != chat.ProblemMoved {
		t.Errorf("the running turn ended with %+v, want problem %q", problem, chat.ProblemMoved)
	}
	res, err := second.Result()
	if err != nil {
		t.Fatalf("second submit: %v", err)
	}
	if r, ok := res.(*Rejected); !ok || !errors.Is(r.Err, ErrMoved) {
		t.Errorf("the waiting turn got %#v, want it refused with ErrMoved", res)
	}
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	for _, m := range h.store.msgs["c1"] {
		if m.Role != chat.RoleUser || m.Content != "hello" {
			t.Errorf("the log holds %s %q: a moved chat is another node's to write, and the refused turn was never acknowledged", m.Role, m.Content)
		}
	}
}
