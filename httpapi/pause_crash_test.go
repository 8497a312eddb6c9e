package httpapi_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/eventbus"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// snapshotStore is what a test reads and writes of a stopped daemon's
// store to put it in the state a crash between two writes leaves.
type snapshotStore interface {
	LoadSnapshot(ctx context.Context, chatID string) (persistence.Snapshot, bool, error)
	SaveSnapshot(ctx context.Context, chatID string, snap persistence.Snapshot, acts ...persistence.Activity) error
	Append(ctx context.Context, chatID string, msgs ...chat.Message) ([]chat.Message, error)
	Close() error
}

// onStore opens the store of cfg (its daemon stopped), runs f on it and
// closes it.
func onStore(t *testing.T, cfg configs.Config, f func(st snapshotStore)) {
	t.Helper()
	var st snapshotStore
	var err error
	if cfg.Store.Kind == configs.StorePostgres {
		st, _, err = persistence.OpenPostgres(context.Background(), os.Getenv(cfg.Store.DSNEnv), persistence.PostgresOptions{})
	} else {
		st, err = persistence.Open(cfg.DataDir+"/badger", persistence.Options{})
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	f(st)
}

// pausedOnCRM sends content to a new chat with the application's crm
// toolset (and the stored toolsets also named), which pauses its turn on
// calls calls of the application's.
func pausedOnCRM(t *testing.T, d *daemontest.Daemon, content string, calls int, also ...string) (api.Chat, api.TurnResult) {
	t.Helper()
	if st := askJSON(t, d, "", "PUT", "/v1/toolsets/crm", api.PutToolsetRequest{Tools: crmTools, Executor: api.Executor{Kind: "client"}}, nil); st != 200 {
		t.Fatalf("PUT toolset: %d", st)
	}
	c, err := d.Client.CreateChat(context.Background(), api.CreateChatRequest{Toolsets: append([]string{"crm"}, also...)})
	if err != nil {
		t.Fatal(err)
	}
	var paused api.TurnResult
	if st := askJSON(t, d, "", "POST", "/v1/chats/"+c.ID+"/messages", api.SendMessageRequest{Content: content}, &paused); st != 200 || len(paused.ToolCalls) != calls {
		t.Fatalf("send: %d %+v, want a pause on %d calls", st, paused, calls)
	}
	return c, paused
}

// resumedAndCompleted waits on sub for the turn paused as turnID, resumed
// after a restart, to complete.
func resumedAndCompleted(t *testing.T, sub *eventbus.Sub, turnID string) {
	t.Helper()
	for {
		select {
		case ev := <-sub.C:
			if ev.Type == api.EventTurnCompleted {
				if r := ev.Data.(api.TurnResult); r.TurnID != turnID || r.Status != "completed" {
					t.Fatalf("the resumed turn ended %+v", r)
				}
				return
			}
		case <-time.After(time.Minute): // a liveness bound, not a speed check
			t.Fatal("the turn whose results were all stored did not go on after the restart")
		}
	}
}

// TestAResultStoredBeforeACrashIsNotAwaitedAgain: a paused turn's results
// are stored, acknowledged, and only then its snapshot names the calls
// still awaited; a crash between the two writes left the snapshot naming
// every call. The restarted turn waited again for the answered one: the
// application's result for the other did not resume it, and a result sent
// again for the first was a second result of one call in the log.
func TestAResultStoredBeforeACrashIsNotAwaitedAgain(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		if requestKind(r) != kindTurn {
			return testkit.Reply{Text: "[]"}
		}
		last := r.Messages[len(r.Messages)-1]
		if last.Role == chat.RoleTool {
			return testkit.Reply{Text: "The CRM says: " + last.Content}
		}
		return testkit.Reply{ToolCalls: []chat.ToolCall{
			{ID: "call_ada", Name: "crm_find", Arguments: `{"name":"Ada"}`},
			{ID: "call_bob", Name: "crm_find", Arguments: `{"name":"Bob"}`},
		}}
	}})
	t.Cleanup(fake.Close)
	daemontest.EachStore(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), func(t *testing.T, cfg configs.Config) {
		ctx := context.Background()
		d := daemontest.Start(t, cfg, nil)
		c, paused := pausedOnCRM(t, d, "How are Ada and Bob?", 2)
		d.Close()
		var both persistence.Snapshot // the pause's snapshot, naming both calls
		onStore(t, cfg, func(st snapshotStore) {
			snap, ok, err := st.LoadSnapshot(ctx, c.ID)
			if err != nil || !ok || snap.Paused == nil || len(snap.Paused.Calls) != 2 {
				t.Fatalf("the paused snapshot: %v %v %+v", err, ok, snap.Paused)
			}
			both = snap
		})

		d = daemontest.Start(t, cfg, nil)
		var half api.TurnResult
		res := api.ToolResultsRequest{Results: []api.ToolResult{{CallID: "call_ada", Output: "Ada: 3 orders"}}}
		if st := askJSON(t, d, "", "POST", "/v1/chats/"+c.ID+"/tool-results", res, &half); st != 200 || half.Status != "requires_action" {
			t.Fatalf("Ada's result: %d %+v", st, half)
		}
		d.Close()
		// The crash: Ada's result is stored and acknowledged, the snapshot
		// naming Bob's call alone is not.
		onStore(t, cfg, func(st snapshotStore) {
			if err := st.SaveSnapshot(ctx, c.ID, both); err != nil {
				t.Fatal(err)
			}
		})

		d = daemontest.Start(t, cfg, nil)
		var again api.Error
		if st := askJSON(t, d, "", "POST", "/v1/chats/"+c.ID+"/tool-results", res, &again); st != 400 || !strings.Contains(again.Message, "call_bob") {
			t.Fatalf("Ada's result sent again: %d %+v, want 400 naming the awaited call_bob", st, again)
		}
		var done api.TurnResult
		res = api.ToolResultsRequest{Results: []api.ToolResult{{CallID: "call_bob", Output: "Bob: no orders"}}}
		if st := askJSON(t, d, "", "POST", "/v1/chats/"+c.ID+"/tool-results", res, &done); st != 200 || done.Status != "completed" || done.TurnID != paused.TurnID {
			t.Fatalf("Bob's result: %d %+v, want the turn completed", st, done)
		}
		msgs, err := d.Client.Transcript(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		results := map[string]int{}
		for _, m := range msgs {
			if m.Role == api.RoleTool {
				results[m.ToolCallID]++
			}
		}
		if results["call_ada"] != 1 || results["call_bob"] != 1 || len(results) != 2 {
			t.Fatalf("tool results in the log by call: %v, want one each", results)
		}
	})
}

// TestAllResultsStoredBeforeACrashResumeTheTurn: a crash after the last
// results were stored, before the turn went on, left the snapshot paused
// on calls that all have their results; the restarted turn goes on and
// answers, where it waited for results the application was told it had.
func TestAllResultsStoredBeforeACrashResumeTheTurn(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Script: crmScript})
	t.Cleanup(fake.Close)
	daemontest.EachStore(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), func(t *testing.T, cfg configs.Config) {
		ctx := context.Background()
		d := daemontest.Start(t, cfg, nil)
		c, paused := pausedOnCRM(t, d, "How is Ada doing?", 1)
		d.Close()
		// The crash: the application's result is stored (the write its
		// acknowledgement waits for), the turn's answer and snapshot are
		// not. The log ends with the result, the snapshot is paused.
		onStore(t, cfg, func(st snapshotStore) {
			call := paused.ToolCalls[0]
			if _, err := st.Append(ctx, c.ID, chat.Message{Role: chat.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Content: "3 orders"}); err != nil {
				t.Fatal(err)
			}
		})
		d = daemontest.Start(t, cfg, nil)
		sub := d.Hub.Subscribe(c.ID, 64)
		defer sub.Close()
		// Waking the chat resumes the turn; its answer ends it.
		if st := askJSON(t, d, "", "GET", "/v1/chats/"+c.ID+"/context", nil, nil); st != 200 {
			t.Fatalf("context: %d", st)
		}
		resumedAndCompleted(t, sub, paused.TurnID)
		msgs, err := d.Client.Transcript(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if last := msgs[len(msgs)-1]; last.Content != "The CRM says: 3 orders" {
			t.Fatalf("the log ends with %+v", last)
		}
	})
}
