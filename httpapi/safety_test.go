package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
	"github.com/agentd/agentd/tools"
)

// mailBody is the 20 KB result of reading mail n, each one different.
func mailBody(n int) string {
	head := fmt.Sprintf("Mail %d. Invoice INV-%04d. ", n, 1000+n)
	return head + strings.Repeat(fmt.Sprintf("line of mail %d; ", n), (20_000-len(head))/18)
}

type mailArgs struct {
	N int `json:"n" jsonschema:"description=which mail to read"`
}

func mailTools(r *tools.Registry) error {
	return tools.Register(r, "read_mail", "Read one mail by number.", func(_ context.Context, a mailArgs) (tools.Result, error) {
		return tools.Result{Text: mailBody(a.N)}, nil
	})
}

// monsterScript reads 40 mails one by one, then answers; as the summariser
// it writes the structured state.
func monsterScript(r testkit.Received) testkit.Reply {
	if r.System == summarizer.CondenseInstructions {
		return testkit.Reply{Text: "TASK: list invoices of 40 mails\nPROGRESS: read some mails\nREMAINING: the rest\nDATA: INV numbers\nDECISIONS: none"}
	}
	if r.System == summarizer.Instructions {
		return testkit.Reply{Text: "What the person wants: invoices."}
	}
	read := 0
	for _, m := range r.Messages {
		if m.Role == chat.RoleAssistant {
			read += len(m.ToolCalls)
		}
	}
	if read >= 40 {
		return testkit.Reply{Text: "Done: 40 invoices listed."}
	}
	return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: fmt.Sprintf("call_%d", read), Name: "read_mail", Arguments: fmt.Sprintf(`{"n":%d}`, read)}}}
}

func TestMonsterTurnCompletesOnAnSmallWindowAndKeepsEveryResult(t *testing.T) {
	const window = 8192
	fake := openaifake.New(openaifake.Options{Window: window, Script: monsterScript})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), window), nil, hub.Options{Tools: mailTools})
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	var started, applied int
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "Read all forty mails and list every invoice number."}, func(ev api.Event) {
		switch ev.Type {
		case chat.EventCompactionStarted:
			started++
		case chat.EventCompactionApplied:
			applied++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Problem != nil {
		t.Fatalf("turn ended with %+v", res.Problem)
	}
	if started == 0 || applied == 0 {
		t.Fatalf("compaction events: started %d applied %d", started, applied)
	}
	var sawState bool
	for _, r := range fake.Requests() {
		if r.System == summarizer.CondenseInstructions || r.System == summarizer.Instructions {
			continue
		}
		if r.InputTokens > window {
			t.Fatalf("a request of %d tokens was sent to an %d window", r.InputTokens, window)
		}
		for _, m := range r.Messages {
			if strings.Contains(m.Content, "<task-state>") && strings.Contains(m.Content, "REMAINING") && strings.Contains(m.Content, summarizer.ContinuationNote) {
				sawState = true
			}
		}
	}
	if !sawState {
		t.Fatal("no request after compaction carried the structured state and the continuation note")
	}
	msgs, _ := d.Client.Transcript(ctx, c.ID)
	results := 0
	for _, m := range msgs {
		if m.Role == api.RoleTool {
			var a mailArgs
			for _, prev := range msgs {
				for _, call := range prev.ToolCalls {
					if call.ID == m.ToolCallID {
						_ = json.Unmarshal([]byte(call.Arguments), &a)
					}
				}
			}
			if m.Content != mailBody(a.N) {
				t.Fatalf("stored result of mail %d is not byte for byte the tool's output", a.N)
			}
			results++
		}
	}
	if results != 40 {
		t.Fatalf("transcript holds %d results, want 40", results)
	}
}

func TestContextFullGuardEndsATurnThatKeepsHittingLength(t *testing.T) {
	const window = 8192
	calls := 0
	fake := openaifake.New(openaifake.Options{Window: window, Script: func(r testkit.Received) testkit.Reply {
		calls++
		// The provider reports the input as filling the window, and stops for length.
		return testkit.Reply{Text: "partial", Finish: "length", Usage: &chat.Usage{InputTokens: window - 100, OutputTokens: 50}}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), window), nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "write a novel"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 2 || res.Messages[1].Content != "partial" {
		t.Fatalf("turn stored %+v", res.Messages)
	}
	if calls != 1 {
		t.Fatalf("the model was asked %d times; a full context must end the turn at once", calls)
	}
}

func TestLengthStopWithRoomContinuesABoundedNumberOfTimes(t *testing.T) {
	calls := 0
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		calls++
		return testkit.Reply{Text: fmt.Sprintf("part %d", calls), Finish: "length"}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "write a novel"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 4 || len(res.Messages) != 5 {
		t.Fatalf("calls %d, messages %d: want the first answer and three continuations", calls, len(res.Messages))
	}
}
