package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit/openaifake"
)

// streamEnd is how one message's stream ended.
type streamEnd struct {
	acked   bool
	userSeq int64
	res     api.TurnResult
	err     error
}

// sendAsync posts content to a chat and reports on acked once turn.started
// arrives, and on the returned channel when the stream ends.
func sendAsync(c *api.Client, chatID, content string, acked chan<- string) <-chan streamEnd {
	out := make(chan streamEnd, 1)
	go func() {
		var end streamEnd
		ctx, cancel := withTimeout(sendTimeout)
		defer cancel()
		end.res, end.err = c.Send(ctx, chatID, api.SendMessageRequest{Content: content}, func(ev api.Event) {
			if ev.Type == chat.EventTurnStarted {
				var d struct {
					UserSeq int64 `json:"user_seq"`
				}
				_ = json.Unmarshal(ev.Data, &d)
				end.acked, end.userSeq = true, d.UserSeq
				acked <- content
			}
		})
		out <- end
	}()
	return out
}

// TestSIGTERMFinishesOrMarksInFlightTurns sends SIGTERM while two turns run:
// one whose model answers after 1.5 s must complete, one whose model never
// answers must end as a "shutdown" problem (or, if its stream is cut, at
// least keep the person's message); the daemon must exit by itself, and
// after a restart nothing acknowledged is lost.
func TestSIGTERMFinishesOrMarksInFlightTurns(t *testing.T) {
	if testing.Short() {
		t.Skip("SIGTERM test waits for the 20 s shutdown grace: skipped with -short")
	}
	b := newBrain(7)
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: b.Script})
	defer fake.Close()
	d := newDaemon(t, daemonConfig{FakeURL: fake.URL(), Window: 32000, Limits: map[string]string{"model_idle_timeout": "90s"}})
	d.start()
	var ids [2]string
	for i := range ids {
		ctx, cancel := withTimeout(10 * time.Second)
		c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = c.ID
	}
	acked := make(chan string, 2)
	slow := sendAsync(d.Client, ids[0], "a slow question", acked)
	hung := sendAsync(d.Client, ids[1], "a question the model will hang on", acked)
	for range 2 {
		select {
		case <-acked:
		case <-time.After(time.Minute):
			t.Fatalf("turns were not acknowledged; %s", d.logTail(20))
		}
	}
	sent := time.Now()
	exited, state := d.term(40 * time.Second)
	took := time.Since(sent)
	if !exited {
		t.Fatalf("agentd did not exit within 40s of SIGTERM; %s", d.logTail(30))
	}
	if !state.Success() {
		t.Errorf("agentd exited with %v after SIGTERM; %s", state, d.logTail(30))
	}
	t.Logf("agentd exited %s after SIGTERM", took.Round(time.Millisecond))

	s := <-slow
	if s.err != nil || s.res.Problem != nil {
		t.Errorf("the turn that could finish within the grace did not: err %v, problem %+v", s.err, s.res.Problem)
	}
	h := <-hung
	switch {
	case h.err == nil && h.res.Problem != nil && h.res.Problem.Kind == chat.ProblemShutdown:
		t.Logf("the hung turn ended with turn.completed, problem %q", h.res.Problem.Message)
	case h.err == nil:
		t.Errorf("the hung turn ended with %+v; want problem kind %q", h.res.Problem, chat.ProblemShutdown)
	default:
		t.Errorf("the hung turn's stream was cut without turn.completed (problem kind %q): %v", chat.ProblemShutdown, h.err)
	}

	d.start()
	for i, want := range []streamEnd{s, h} {
		ctx, cancel := withTimeout(10 * time.Second)
		msgs, err := d.Client.Transcript(ctx, ids[i])
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) < int(want.userSeq) || msgs[want.userSeq-1].Role != api.RoleUser {
			t.Errorf("chat %d: the acknowledged message at seq %d is gone after the restart: %d messages", i, want.userSeq, len(msgs))
		}
		if i == 0 && (len(msgs) != 2 || msgs[1].Role != api.RoleAssistant || msgs[1].Partial) {
			t.Errorf("the finished turn's answer is not stored whole: %s", describe(msgs))
		}
	}
}

func describe(msgs []api.Message) string {
	out := ""
	for _, m := range msgs {
		out += fmt.Sprintf("[%d %s partial=%v %.40q] ", m.Seq, m.Role, m.Partial, m.Content)
	}
	return out
}
