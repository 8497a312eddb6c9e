package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
)

// heldWrites holds, once armed, every message append (AppendThen's too,
// the write, not its caller, when thenToo), snapshot save, synced activity
// item and chat record update of the chats in held until release is
// closed.
type heldWrites struct {
	Store
	held    map[string]bool // filled before armed, read-only after
	thenToo bool            // AppendThen too, set before armed
	armed   atomic.Bool
	waiting atomic.Int64 // writes held now or before
	release chan struct{}
}

func (s *heldWrites) hold(chatID string) {
	if s.armed.Load() && s.held[chatID] {
		s.waiting.Add(1)
		<-s.release
	}
}

func (s *heldWrites) Append(ctx context.Context, chatID string, msgs ...chat.Message) ([]chat.Message, error) {
	s.hold(chatID)
	return s.Store.Append(ctx, chatID, msgs...)
}

func (s *heldWrites) SaveSnapshot(ctx context.Context, chatID string, snap persistence.Snapshot, acts ...persistence.Activity) error {
	s.hold(chatID)
	return s.Store.SaveSnapshot(ctx, chatID, snap, acts...)
}

func (s *heldWrites) AppendActivity(ctx context.Context, chatID string, a persistence.Activity) (persistence.Activity, error) {
	s.hold(chatID)
	return s.Store.AppendActivity(ctx, chatID, a)
}

// AppendThen holds the write, not its caller, which must not wait.
func (s *heldWrites) AppendThen(ctx context.Context, chatID string, msgs []chat.Message, then func([]chat.Message, error)) {
	if !s.thenToo || !s.armed.Load() || !s.held[chatID] {
		s.Store.AppendThen(ctx, chatID, msgs, then)
		return
	}
	s.waiting.Add(1)
	go func() { // ends at release, which the test's end makes sure of
		<-s.release
		s.Store.AppendThen(ctx, chatID, msgs, then)
	}()
}

func (s *heldWrites) UpdateChat(ctx context.Context, c persistence.Chat) error {
	s.hold(c.ID)
	return s.Store.UpdateChat(ctx, c)
}

// TestAChatsWritesHoldNoOtherTenant: while one tenant's chats store the
// messages an application adds, or a patch of their settings (the writes
// held here), more of them than the sessions' dispatcher has workers wait,
// and another tenant's chat still answers. Those writes ran in the
// sessions' mailboxes: each parked one of the shared workers, and no other
// tenant's chat ran until a write ended.
func TestAChatsWritesHoldNoOtherTenant(t *testing.T) {
	title := "renamed"
	for name, write := range map[string]func(h *Hub, id string) error{
		"add messages": func(h *Hub, id string) error {
			_, err := h.AddMessages(context.Background(), "alice", id, "", []api.Message{{Role: api.RoleUser, Content: "earlier words"}})
			return err
		},
		"patch": func(h *Hub, id string) error {
			return h.Patch(context.Background(), "alice", id, api.PatchChatRequest{Title: &title})
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var held *heldWrites
			h := hubOn(t, testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768), func(db Store) Store {
				held = &heldWrites{Store: db, held: map[string]bool{}, release: make(chan struct{})}
				return held
			})
			open := releaser(t, held.release)
			ids, bob := aliceAndBob(t, h, sessionWorkers+16)
			for _, id := range ids {
				held.held[id] = true
			}
			held.armed.Store(true)
			heldHoldsNoOtherTenant(t, h, ids, bob, func(id string) error { return write(h, id) }, open)
			for _, id := range ids[:3] {
				c, err := h.Chat(ctx, "alice", id)
				if err != nil {
					t.Fatal(err)
				}
				msgs, err := h.Transcript(ctx, "alice", id, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				if name == "patch" && c.Title != title || name == "add messages" && len(msgs) != 1 {
					t.Fatalf("chat %s after its write: title %q, %d messages", id, c.Title, len(msgs))
				}
			}
		})
	}
}

// TestAPausesAndAProblemsWritesHoldNoOtherTenant: the synced writes of a
// turn outside its message's and its answer's — the snapshot of a turn
// paused for the application's tools, the application's results, the
// snapshot and problem item of a turn that ends with a problem and no
// answer — hold (here, until let go) none of the sessions' shared workers:
// another tenant's chat answers while more of them wait than there are
// workers. They ran in the mailbox, each parking a worker until its write
// ended. Nobody hears of the pause, the results or the turn's end before
// its write is stored.
func TestAPausesAndAProblemsWritesHoldNoOtherTenant(t *testing.T) {
	tool := []api.Tool{{Name: "crm_find", Description: "Find a customer.", Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)}}
	for name, c := range map[string]struct {
		tools   []api.Tool
		results bool   // the chats are paused first; the act sends their results
		until   string // the event the act waits for after its message
	}{
		"pause":        {tools: tool, until: chat.EventTurnRequiresAction},
		"tool results": {tools: tool, results: true},
		"problem":      {until: chat.EventTurnCompleted},
	} {
		t.Run(name, func(t *testing.T) {
			fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
				if len(r.Tools) > 0 && r.Messages[len(r.Messages)-1].Role == chat.RoleUser {
					return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "crm_find", Arguments: `{"name":"Ada"}`}}}
				}
				return testkit.Reply{Text: "ok"}
			}})
			t.Cleanup(fake.Close)
			url := fake.URL()
			if c.tools == nil {
				url = "http://127.0.0.1:1" // the model is unreachable: the turn ends with a problem
			}
			var held *heldWrites
			h := hubOn(t, testkit.Config(t.TempDir(), url, 32768), func(db Store) Store {
				held = &heldWrites{Store: db, held: map[string]bool{}, release: make(chan struct{})}
				return held
			})
			open := releaser(t, held.release)
			ids, bob := aliceAndBob(t, h, sessionWorkers+16)
			send := func(id string) error {
				sub := h.Bus().Subscribe(id, 64, chat.EventTurnRequiresAction, chat.EventTurnCompleted)
				defer sub.Close()
				if _, err := h.Submit(context.Background(), "alice", id, api.SendMessageRequest{Content: "find Ada"}); err != nil {
					return err
				}
				select {
				case ev := <-sub.C:
					if ev.Type == chat.EventTurnCompleted && ev.Data.(api.TurnResult).Problem == nil {
						return fmt.Errorf("turn of %s completed with no problem", id)
					}
					if c.until != "" && ev.Type != c.until {
						return fmt.Errorf("chat %s: %s, want %s", id, ev.Type, c.until)
					}
					return nil
				case <-time.After(time.Minute): // a liveness bound, not a speed check
					return fmt.Errorf("no turn's end on chat %s", id)
				}
			}
			act := send
			for _, id := range ids {
				if c.tools != nil {
					if err := h.Patch(context.Background(), "alice", id, api.PatchChatRequest{Tools: &c.tools}); err != nil {
						t.Fatal(err)
					}
				}
				if c.results {
					if err := send(id); err != nil {
						t.Fatal(err)
					}
				}
				held.held[id] = true
			}
			if c.results {
				act = func(id string) error {
					_, err := h.SubmitToolResults(context.Background(), "alice", id, api.ToolResultsRequest{Results: []api.ToolResult{{CallID: "call_1", Output: "found"}}})
					return err
				}
			}
			held.thenToo = c.results
			held.armed.Store(true)
			heldHoldsNoOtherTenant(t, h, ids, bob, act, open, func() bool {
				// The model calls' workers come and go: count the held
				// writes. In the mailboxes, no more than the sessions'
				// workers would be held.
				return held.waiting.Load() >= sessionWorkers
			})
		})
	}
}
