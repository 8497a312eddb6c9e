package session

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/window"
)

// TestFromWindowKeptEqualsAFreshConversion: over any run of requests (new
// messages, stubs, folds, a summary frame, a missing result, a holder's own
// append), converting only what is new gives what a session with nothing
// kept converts, and no request handed out earlier changes.
func TestFromWindowKeptEqualsAFreshConversion(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := &session{deps: &Deps{ToolResultBytes: 1 << 20, ToolArgBytes: 1 << 20}}
		seq := int64(0)
		add := func() {
			seq++
			s.msgs = append(s.msgs, drawMessage(rt, seq, true, false))
		}
		for range rapid.IntRange(1, 8).Draw(rt, "first") {
			add()
		}
		type handed struct{ got, copy []chat.Message }
		var earlier []handed
		for step := range rapid.IntRange(1, 12).Draw(rt, "steps") {
			switch rapid.IntRange(0, 3).Draw(rt, "change") {
			case 0: // a fold drops the front
				s.msgs = s.msgs[rapid.IntRange(0, len(s.msgs)-1).Draw(rt, "fold"):]
			default:
				for range rapid.IntRange(1, 3).Draw(rt, "new") {
					add()
				}
			}
			sent := s.toWindow(s.msgs)
			if rapid.Bool().Draw(rt, "frame") {
				sent[0].Text = "<earlier>summary " + fmt.Sprint(step) + "</earlier>" + sent[0].Text
			}
			if i := rapid.IntRange(-1, len(sent)-1).Draw(rt, "stub"); i >= 0 {
				sent[i].Text = fmt.Sprintf("[stubbed %d]", step)
			}
			if rapid.Bool().Draw(rt, "missing result") {
				last := sent[len(sent)-1]
				sent = append(sent, window.Msg{Seq: last.Seq, Role: window.Tool, ToolCallID: "gone", ToolName: "read", Text: "[no result]", IsError: true})
			}
			fresh := &session{msgs: s.msgs, deps: s.deps}
			want := fresh.fromWindow(sent)
			got := s.fromWindow(sent)
			if !reflect.DeepEqual(got, want) {
				rt.Fatalf("step %d: kept conversion\n%+v\nfresh\n%+v", step, got, want)
			}
			if cap(got) != len(got) {
				rt.Fatalf("step %d: a request's messages have room to grow into the kept slice", step)
			}
			_ = append(got, chat.Message{Seq: -1, Content: "a holder's own append"})
			for i, e := range earlier {
				if !reflect.DeepEqual(e.got, e.copy) {
					rt.Fatalf("step %d: request %d changed after it was handed out", step, i)
				}
			}
			earlier = append(earlier, handed{got: got, copy: slices.Clone(got)})
		}
	})
}

// drawMessage draws a chat's message seq: a person's (with a picture, when
// pictures draws one), an answer with thinking, a call, or the call's
// result (longer than window.StaleChars, when long draws it).
func drawMessage(rt *rapid.T, seq int64, pictures, long bool) chat.Message {
	m := chat.Message{Seq: seq, Content: fmt.Sprintf("message %d", seq)}
	switch rapid.IntRange(0, 3).Draw(rt, "role") {
	case 0:
		m.Role = chat.RoleUser
		if pictures && rapid.Bool().Draw(rt, "picture") {
			m.Images = []chat.Image{{MediaType: "image/png", Data: []byte{1, 2}}}
		}
	case 1:
		m.Role, m.Thinking, m.ThinkingSignature = chat.RoleAssistant, "hmm", "sig"
	case 2:
		m.Role, m.ToolCalls = chat.RoleAssistant, []chat.ToolCall{{ID: fmt.Sprintf("c%d", seq), Name: "read", Arguments: `{"n":1}`}}
	default:
		m.Role, m.ToolCallID, m.ToolName = chat.RoleTool, fmt.Sprintf("c%d", seq-1), "read"
		if long && rapid.Bool().Draw(rt, "long") {
			m.Content = strings.Repeat("r", window.StaleChars+1)
		}
	}
	return m
}

// TestKeptRequestEqualsAFreshOne: as a chat grows (results long enough to
// stub among its messages), folds, and converts another assembly between
// its requests (a fold's prefix), each plan and request (with runs of
// person's messages merged) the session makes from what it kept equals one
// made from scratch.
func TestKeptRequestEqualsAFreshOne(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := &session{deps: &Deps{ToolResultBytes: 1 << 20, ToolArgBytes: 1 << 20}}
		seq := int64(0)
		add := func() chat.Message {
			seq++
			return drawMessage(rt, seq, false, true)
		}
		for step := range rapid.IntRange(1, 14).Draw(rt, "steps") {
			var ms []chat.Message
			for range rapid.IntRange(1, 4).Draw(rt, "new") {
				ms = append(ms, add())
			}
			s.appendMsgs(ms...)
			switch rapid.IntRange(0, 5).Draw(rt, "between") {
			case 0: // a fold
				to := s.msgs[rapid.IntRange(0, len(s.msgs)-1).Draw(rt, "fold")].Seq
				s.msgs = slices.DeleteFunc(slices.Clone(s.msgs), func(m chat.Message) bool { return m.Seq < to })
				if s.win != nil {
					s.win.DropBefore(to)
				}
			case 1: // a fold's prefix, converted from another assembly
				s.fromWindow(s.toWindow(s.msgs[:1]))
			}
			b := window.NewBudget(rapid.IntRange(2000, 20000).Draw(rt, "window"), 100, 100)
			b.Stale = 1
			planned := s.planMsgs(s.view().Msgs(), b, false).plan
			if want := window.Plan(window.PlanInput{Msgs: s.view().Msgs(), Budget: b}); !reflect.DeepEqual(planned, want) {
				rt.Fatalf("step %d: kept plan\n%+v\nfresh\n%+v", step, planned, want)
			}
			plan := window.PlanResult{FirstKept: s.msgs[0].Seq, Stale: 1}
			got := s.keptRequest(plan)
			fresh := &session{msgs: s.msgs, deps: s.deps}
			want := fresh.keptRequest(plan)
			if len(got)+len(want) > 0 && !reflect.DeepEqual(got, want) {
				rt.Fatalf("step %d: kept request\n%+v\nfresh\n%+v", step, got, want)
			}
			if got, want := s.sendable(got), mergeUserRuns(want); len(got)+len(want) > 0 && !reflect.DeepEqual(got, want) {
				rt.Fatalf("step %d: kept request, runs merged\n%+v\nfresh\n%+v", step, got, want)
			}
		}
	})
}
