package session

import (
	"fmt"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/actors/toolindex"
	"github.com/agentd/agentd/chat"
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
	text, load, isErr := findTools(sys.Root, index, nil, func(...string) []chat.ToolSpec { return nil }, `{"query":"move a pallet"}`, 1000)
	if want := "tool search failed: " + toolindex.ErrReadFailed.Error(); !isErr || load != nil || !strings.HasPrefix(text, want) {
		t.Fatalf("find_tools = %q, %v, %v; want an error starting %q", text, load, isErr, want)
	}
}
