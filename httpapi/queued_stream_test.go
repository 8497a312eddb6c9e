package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestAStreamQueuedBehindABusyTurnIsNotDroppedForItsEvents: a message sent
// with SSE while another turn of its chat runs waits its turn; the running
// turn's events, which that stream never sends, do not fill its buffer, so
// it streams its own turn whole instead of starting with stream.dropped.
func TestAStreamQueuedBehindABusyTurnIsNotDroppedForItsEvents(t *testing.T) {
	gate := make(chan struct{})
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == chat.RoleUser && last.Content == "busy":
			<-gate
			// Each call is a tool.call and a tool.result the queued
			// stream's buffer (256) would have to hold.
			calls := make([]chat.ToolCall, 200)
			for i := range calls {
				calls[i] = chat.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: "no_such_tool", Arguments: "{}"}
			}
			return testkit.Reply{ToolCalls: calls}
		case last.Role == chat.RoleTool:
			return testkit.Reply{Text: "done with the tools"}
		}
		return testkit.Reply{Text: "answer to " + last.Content}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	busy := make(chan error, 1)
	go func() {
		_, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "busy"}, nil)
		busy <- err
	}()
	waitFor(t, "the busy turn to call the model", func() bool { return len(fake.Requests()) > 0 })

	type answer struct {
		types []string
		err   error
	}
	queued := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, d.Server.URL+"/v1/chats/"+c.ID+"/messages", strings.NewReader(`{"content":"queued"}`))
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			queued <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var a answer
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				a.types = append(a.types, ev)
			}
		}
		queued <- a
	}()
	waitFor(t, "the second message to wait behind the first", func() bool { return turnsWaiting(t, d.Hub) == 1 })
	close(gate)
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	got := <-queued
	if got.err != nil {
		t.Fatal(got.err)
	}
	if n := len(got.types); n == 0 || got.types[0] != api.EventTurnStarted || got.types[n-1] != api.EventTurnCompleted {
		t.Fatalf("the queued stream's events: %v; want its own turn, turn.started to turn.completed", got.types)
	}
}
