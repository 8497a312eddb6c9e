package session

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/window"
)

// TestCompactLiveCutsAsTheWholeCountSays: the in-turn safety net on a
// chat's kept messages, told their conservative count by the view, cuts
// its live turn exactly as when every message is counted again.
func TestCompactLiveCutsAsTheWholeCountSays(t *testing.T) {
	s := &session{deps: &Deps{ToolResultBytes: 1 << 20, ToolArgBytes: 1 << 20}}
	words := strings.Repeat("some words of the chat ", 14)
	for i := range 60 {
		seq := int64(2*i + 1)
		s.appendMsgs(chat.Message{Seq: seq, Role: chat.RoleUser, Content: words}, chat.Message{Seq: seq + 1, Role: chat.RoleAssistant, Content: words})
	}
	task := int64(121)
	s.appendMsgs(chat.Message{Seq: task, Role: chat.RoleUser, Content: "Read the mails."})
	for i := range 8 {
		seq, id := task+1+2*int64(i), fmt.Sprintf("c%d", i)
		s.appendMsgs(chat.Message{Seq: seq, Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: id, Name: "read_mail", Arguments: `{}`}}},
			chat.Message{Seq: seq + 1, Role: chat.RoleTool, ToolCallID: id, ToolName: "read_mail", Content: strings.Repeat(fmt.Sprintf("mail %d ", i), 1500)})
	}
	v := s.view()
	p := &planned{estimate: estimate{budget: window.NewBudget(16384, 300, 200)}, msgs: v.Msgs(), conservative: v.Conservative()}
	b := p.budget
	start := turnStart(p.msgs, task)
	want, wantRep := window.CompactTurn(p.msgs, window.ConservativeTokens(p.msgs), start, b.System+b.Tools, b.Window-b.Answer)
	if wantRep.Targets == 0 {
		t.Fatalf("nothing to cut: %+v", wantRep)
	}
	got, changed := s.compactLive(&turn{userSeq: task}, p)
	if !changed || !reflect.DeepEqual(got, want) {
		t.Fatalf("changed %v; the live turn cut otherwise than when counted whole (%+v)", changed, wantRep)
	}
}
