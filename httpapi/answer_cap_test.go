package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
)

// Issue 15, deliver 5: a model answer over limits.max_answer_bytes ends the
// turn with answer-too-large; the part before the cap is kept, whole.
func TestAnAnswerOverTheCapEndsTheTurnAndKeepsItsHead(t *testing.T) {
	const maxAnswer = 64 << 10
	huge := strings.Repeat("an answer that never ends. ", 2<<20/27)
	cases := map[string]struct {
		reply testkit.Reply
		kept  int // bytes of text kept
	}{
		"text":           {testkit.Reply{Text: huge, ChunkRunes: 8192}, maxAnswer},
		"tool arguments": {testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "calculate", Arguments: `{"expression":"` + huge + `"}`}}}, 0},
		// Ids count as the answer's bytes: calls of empty arguments with
		// long ids were held whole, however many came.
		"tool ids": {testkit.Reply{ToolCalls: longIDCalls(64, 8<<10)}, 0},
	}
	for _, kind := range daemontest.Kinds {
		for name, tc := range cases {
			t.Run(kind+"/"+name, func(t *testing.T) {
				script := func(r testkit.Received) testkit.Reply {
					if r.Messages[len(r.Messages)-1].Content == "hello" {
						return tc.reply
					}
					return echoScript(r)
				}
				fake := startFake(t, kind, fakeOptions{Window: 32000, Script: script, Models: []fakeModel{{ID: "m", Window: 32000}}})
				cfg := kindConfig(t, kind, fake.URL(), 32000)
				cfg.Limits.MaxAnswerBytes = maxAnswer
				d := daemontest.Start(t, cfg, nil)
				ctx := context.Background()
				c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
				res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "hello"}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if res.Problem == nil || res.Problem.Kind != chat.ProblemAnswerTooLarge || !strings.Contains(res.Problem.Message, "max_answer_bytes") {
					t.Fatalf("problem %+v; want %q naming the limit", res.Problem, chat.ProblemAnswerTooLarge)
				}
				msgs, _ := d.Hub.Transcript(ctx, "default", c.ID, 0, 0)
				stored := 0
				for _, m := range msgs[1:] {
					stored += len(m.Content) + len(m.Thinking)
					for _, call := range m.ToolCalls {
						stored += len(call.ID) + len(call.Name) + len(call.Arguments)
					}
				}
				if stored > maxAnswer {
					t.Fatalf("%d bytes of answer stored; the cap is %d", stored, maxAnswer)
				}
				if tc.kept > 0 {
					last := msgs[len(msgs)-1]
					if last.Role != api.RoleAssistant || !last.Partial || len(last.Content) != tc.kept || !strings.HasPrefix(huge, last.Content) {
						t.Fatalf("kept %d bytes (partial %v) of the answer; want its first %d", len(last.Content), last.Partial, tc.kept)
					}
				} else if len(msgs) != 1 {
					t.Fatalf("a cut tool call stored %s", contents(msgs[1:]))
				}
				next, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "again"}, nil)
				if err != nil || next.Problem != nil {
					t.Fatalf("the chat does not go on: %v %+v", err, next.Problem)
				}
			})
		}
	}
}

// longIDCalls are n calls of calculate with empty arguments, each id of
// size bytes.
func longIDCalls(n, size int) []chat.ToolCall {
	calls := make([]chat.ToolCall, n)
	for i := range calls {
		calls[i] = chat.ToolCall{ID: fmt.Sprintf("call_%d_%s", i, strings.Repeat("x", size)), Name: "calculate", Arguments: "{}"}
	}
	return calls
}
