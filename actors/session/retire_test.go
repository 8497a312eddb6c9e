package session

import (
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
)

// TestARetiredChatEndsTheTurnARestartLeftPaused: a turn paused for the
// application's tool results, as a restart finds it (in the snapshot, its
// session not running), ends with problem deleted when its chat is
// retired, told to its watchers before RetireDone (so before the hub's
// chat.deleted), as a paused turn of a running session does. With no
// session to wake, it was never told its end: a client that saw it pause
// heard only chat.deleted.
func TestARetiredChatEndsTheTurnARestartLeftPaused(t *testing.T) {
	h := newHarnessWith(t, 128_000, nil, func(_ *harness, d *Deps) { d.ToolResultsWait = time.Hour })
	call := chat.ToolCall{ID: "call_1", Name: "crm_find", Arguments: "{}"}
	h.store.mu.Lock()
	h.store.appendLocked("c1", []chat.Message{{Role: chat.RoleUser, Content: "How is Ada?"}, {Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{call}}})
	h.store.snaps["c1"] = persistence.Snapshot{FirstKeptSeq: 1, Paused: &persistence.PausedTurn{TurnID: "t-paused", UserSeq: 1, Calls: []chat.ToolCall{call}, Since: time.Now()}}
	h.store.mu.Unlock()
	sub := h.bus.Subscribe("c1", 64, chat.EventTurnCompleted)
	defer sub.Close()

	res, err := h.system.Root.RequestFuture(h.registry, &Retire{ChatID: "c1"}, time.Minute).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.(*RetireDone); !ok {
		t.Fatalf("retire: %#v", res)
	}
	// The turn's end is published before its session stops, so before
	// RetireDone.
	select {
	case ev := <-sub.C:
		if r := ev.Data.(chat.TurnResult); ev.TurnID != "t-paused" || r.Problem == nil || r.Problem.Kind != chat.ProblemDeleted {
			t.Fatalf("turn.completed of %s: %+v; want the paused turn ended as deleted", ev.TurnID, r)
		}
	default:
		t.Fatal("the paused turn's end was not told before RetireDone")
	}
}
