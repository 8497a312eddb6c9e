package session

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/toolindex"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/tools"
)

// TestFindToolsSaysWhyTheIndexFailed: a search the tool index failed on
// (it panicked) is answered with Failed, and find_tools hands the model
// that error; it said "tool search failed: <nil>".
func TestFindToolsSaysWhyTheIndexFailed(t *testing.T) {
	sys := actor.NewActorSystem()
	index := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if s, ok := c.Message().(*toolindex.Search); ok {
			c.Respond(&toolindex.Failed{ReqID: s.ReqID, Err: fmt.Errorf("%w (a bug, logged)", toolindex.ErrReadFailed)})
		}
	}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(index).Wait() })
	text, load, isErr := findTools(context.Background(), sys.Root, index, nil, func(...string) []chat.ToolSpec { return nil }, `{"query":"move a pallet"}`, 1000)
	if want := "tool search failed: " + toolindex.ErrReadFailed.Error(); !isErr || load != nil || !strings.HasPrefix(text, want) {
		t.Fatalf("find_tools = %q, %v, %v; want an error starting %q", text, load, isErr, want)
	}
}

// stuckIndex is a tool index that answers NamedIn with no names unless
// stuckOnNamed, and never answers a Search; each ask it takes in is sent
// on asked.
func stuckIndex(sys *actor.ActorSystem, stuckOnNamed bool, asked chan<- any) *actor.PID {
	return sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *toolindex.NamedIn:
			asked <- m
			if !stuckOnNamed {
				c.Respond(&toolindex.NamedInResult{ReqID: m.ReqID})
			}
		case *toolindex.Search:
			asked <- m
		}
	}))
}

// outlastStops makes an ask of the tool index outlast a session's stop
// (stopWait): a stop that waited for one gives up and says so.
func outlastStops(t *testing.T) {
	old := askTimeout
	askTimeout = time.Hour
	t.Cleanup(func() { askTimeout = old })
}

// TestFindToolsIsCancelledWithItsTurn: find_tools asked of an index that
// does not answer ends when its turn's context does, answered as any
// cancelled call is; it waited out its 5 s, and told the model "timeout".
func TestFindToolsIsCancelledWithItsTurn(t *testing.T) {
	outlastStops(t)
	sys := actor.NewActorSystem()
	asked := make(chan any, 1)
	index := stuckIndex(sys, false, asked)
	t.Cleanup(func() { _ = sys.Root.StopFuture(index).Wait() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answer := make(chan string, 1)
	go func() {
		text, _, _ := findTools(ctx, sys.Root, index, nil, func(...string) []chat.ToolSpec { return nil }, `{"query":"move a pallet"}`, 1000)
		answer <- text
	}()
	wait(t, "the search", asked)
	cancel()
	if text, want := wait(t, "find_tools' answer once its turn was cancelled", answer), tools.CancelledResult(findToolsName).Text; text != want {
		t.Fatalf("find_tools = %q, want %q", text, want)
	}
}

// TestAStoppedTurnWaitsForNoToolIndex: a turn deleted while it waits for
// a tool index that never answers (the named tools of its message, or a
// find_tools call) stops at once: the ask ends with the turn's context,
// and the chat's stop finds its work done. The ask waited out its 5 s on
// the session's worker, and the stop with it.
func TestAStoppedTurnWaitsForNoToolIndex(t *testing.T) {
	for _, c := range []struct {
		name         string
		stuckOnNamed bool
	}{{"named tools", true}, {"find_tools", false}} {
		t.Run(c.name, func(t *testing.T) {
			outlastStops(t)
			var logs testkit.LogBuffer
			asked := make(chan any, 2)
			h := newHarnessWith(t, 8000, nil, func(h *harness, d *Deps) {
				d.Log = zerolog.New(&logs)
				d.ToolIndex = stuckIndex(h.system, c.stuckOnNamed, asked)
			}, callTool("call-1", findToolsName, `{"query":"move a pallet"}`), reply("done"))
			sub := h.bus.Subscribe("c1", 1024)
			defer sub.Close()
			if _, ok := wait(t, "the turn's acceptance", h.resultOf("c1", &SubmitTurn{TurnID: "t-1", Message: chat.Message{Content: "move the pallet"}})).(*TurnAccepted); !ok {
				t.Fatal("the turn was not accepted")
			}
			want := "*toolindex.NamedIn"
			if !c.stuckOnNamed {
				wait(t, "the named tools' ask", asked)
				want = "*toolindex.Search"
			}
			if m := wait(t, "the index's ask", asked); fmt.Sprintf("%T", m) != want {
				t.Fatalf("the index was asked %T, want %s", m, want)
			}
			if res, err := h.system.Root.RequestFuture(h.registry, &Retire{ChatID: "c1"}, patience).Result(); err != nil {
				t.Fatalf("retire the chat: %v", err)
			} else if _, ok := res.(*RetireDone); !ok {
				t.Fatalf("retire the chat: answered %#v", res)
			}
			if strings.Contains(logs.String(), "calls still in flight at stop") {
				t.Fatalf("the stop waited out the tool index's ask:\n%s", logs.String())
			}
		})
	}
}
