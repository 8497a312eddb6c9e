package session

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/window"
)

// BenchmarkKeptRequest is a 32K chat's next request's messages: 300 kept
// messages (a person's, a call, its result, an answer: ≈350 bytes each, a
// long result every fourth turn) and one turn more each time, starting
// again every 50 turns (not timed); assembled from scratch, converted and
// merged as before (AssembleInto, fromWindow, mergeUserRuns), and by
// keptRequest and sendable.
func BenchmarkKeptRequest(b *testing.B) {
	var all []chat.Message
	for i := range 1000 {
		seq := int64(4*i + 1)
		words := strings.Repeat("some words of the chat ", 14)
		result := words
		if i%4 == 0 {
			result = strings.Repeat(words, 10)
		}
		id := fmt.Sprintf("c%d", i)
		all = append(all, chat.Message{Seq: seq, Role: chat.RoleUser, Content: words},
			chat.Message{Seq: seq + 1, Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: id, Name: "read", Arguments: `{"n":1}`}}},
			chat.Message{Seq: seq + 2, Role: chat.RoleTool, ToolCallID: id, ToolName: "read", Content: result},
			chat.Message{Seq: seq + 3, Role: chat.RoleAssistant, Content: words})
	}
	for _, kept := range []bool{false, true} {
		b.Run(map[bool]string{false: "scratch", true: "kept"}[kept], func(b *testing.B) {
			var s *session
			t := 0
			b.ReportAllocs()
			for b.Loop() {
				if t%50 == 0 { // the fold's own cost is not the turn's
					b.StopTimer()
					s, t = &session{deps: &Deps{ToolResultBytes: 1 << 20, ToolArgBytes: 1 << 20}}, 0
					s.appendMsgs(all[:300]...)
					s.view()
					b.StartTimer()
				}
				s.appendMsgs(all[300+4*t : 304+4*t]...)
				t++
				plan := window.PlanResult{FirstKept: s.msgs[0].Seq, Stale: window.StaleExchanges}
				if kept {
					_ = s.sendable(s.keptRequest(plan))
					continue
				}
				sent := window.AssembleInto(assembled.Get(0), window.AssembleInput{Msgs: s.view().Msgs(), Plan: plan})
				_ = mergeUserRuns(s.fromWindow(sent))
				assembled.Put(sent)
			}
		})
	}
}
