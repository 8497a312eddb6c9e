package session

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// gated answers each call once let through: fail, or the call's number.
type gated struct {
	calls atomic.Int32
	let   chan bool // true: answer; false: fail
}

func (g *gated) Stream(ctx context.Context, _ providers.Request, emit func(providers.Event)) (providers.Response, error) {
	n := g.calls.Add(1)
	select {
	case ok := <-g.let:
		if !ok {
			return providers.Response{}, &providers.Error{Provider: "fake", Status: 400, Body: "refused"}
		}
	case <-ctx.Done():
		return providers.Response{}, ctx.Err()
	}
	text := "answer " + string(rune('0'+n))
	emit(providers.Event{Kind: providers.EventText, Text: text})
	return reply(text), nil
}

func (g *gated) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

// TestAKeyedMessageIsStoredAndAnsweredOnce: a message sent again under its
// idempotency key joins its running turn, is ErrKeyInProgress while it
// waits its turn, is Answered once its turn has ended (and ErrKeyReused
// with other words), and has its turn continued when that turn failed
// before answering; the log holds each message once.
func TestAKeyedMessageIsStoredAndAnsweredOnce(t *testing.T) {
	model := &gated{let: make(chan bool)}
	h := newHarnessWith(t, 128_000, nil, func(_ *harness, d *Deps) {
		d.Catalog = oneModel{client: model, info: providers.ModelInfo{Provider: "fake", ID: "m", Window: 128_000}}
	})
	ask := func(m *SubmitTurn) any {
		t.Helper()
		res, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: m}, time.Minute).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	keyed := func(turnID, text, key string) *SubmitTurn {
		return &SubmitTurn{TurnID: turnID, Message: chat.Message{Content: text, IdempotencyKey: key}}
	}
	sub := h.bus.Subscribe("c1", 1024, chat.EventTurnCompleted)
	defer sub.Close()
	completed := func(turnID string) chat.TurnResult {
		t.Helper()
		for ev := range sub.C {
			if ev.TurnID == turnID {
				return ev.Data.(chat.TurnResult)
			}
		}
		t.Fatal("the events ended")
		return chat.TurnResult{}
	}

	first, ok := ask(keyed("t1", "hello", "k1")).(*TurnAccepted)
	if !ok || first.TurnID != "t1" {
		t.Fatalf("the first send: %+v", first)
	}
	var joined string
	again := keyed("t1-again", "hello", "k1")
	again.Joined = func(id string) { joined = id }
	if acc, ok := ask(again).(*TurnAccepted); !ok || acc.TurnID != "t1" || acc.UserSeq != first.UserSeq || joined != "t1" {
		t.Fatalf("sent again while its turn runs: %+v, joined %q; want turn t1 joined", acc, joined)
	}
	// k2 waits behind t1: sent again meanwhile, it is in progress.
	queued := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: keyed("t2", "second", "k2")}, time.Minute)
	if r, ok := ask(keyed("t2-again", "second", "k2")).(*Rejected); !ok || !errors.Is(r.Err, ErrKeyInProgress) {
		t.Fatalf("sent again while it waits its turn: %+v", r)
	}
	model.let <- true
	if res := completed("t1"); len(res.Messages) != 2 || res.Messages[1].Content != "answer 1" {
		t.Fatalf("t1 answered %+v", res.Messages)
	}
	model.let <- true
	if res, err := queued.Result(); err != nil || res.(*TurnAccepted).TurnID != "t2" {
		t.Fatalf("k2's turn: %v, %v", res, err)
	}
	completed("t2")
	if a, ok := ask(keyed("t1-late", "hello", "k1")).(*Answered); !ok || a.UserSeq != first.UserSeq {
		t.Fatalf("sent again after its turn: %+v, want Answered at seq %d", a, first.UserSeq)
	}
	if r, ok := ask(keyed("t1-other", "goodbye", "k1")).(*Rejected); !ok || !errors.Is(r.Err, ErrKeyReused) {
		t.Fatalf("the key with other words: %+v, want ErrKeyReused", r)
	}

	// A turn that fails before answering is continued by the same key.
	failed, ok := ask(keyed("t3", "third", "k3")).(*TurnAccepted)
	if !ok {
		t.Fatalf("the third send: %+v", failed)
	}
	model.let <- false
	if res := completed("t3"); res.Problem == nil {
		t.Fatalf("t3 did not fail: %+v", res)
	}
	if acc, ok := ask(keyed("t3-again", "third", "k3")).(*TurnAccepted); !ok || acc.TurnID != "t3-again" || acc.UserSeq != failed.UserSeq {
		t.Fatalf("sent again after its turn failed: %+v, want a turn from seq %d", acc, failed.UserSeq)
	}
	model.let <- true
	if res := completed("t3-again"); res.Problem != nil || res.Messages[len(res.Messages)-1].Content != "answer 4" {
		t.Fatalf("the continued turn: %+v", res)
	}

	stored, _ := h.store.Messages(context.Background(), "c1", 0, 0)
	var got []string
	for _, m := range stored {
		got = append(got, m.Content)
	}
	if want := []string{"hello", "answer 1", "second", "answer 2", "third", "answer 4"}; !slices.Equal(got, want) {
		t.Fatalf("the log holds %q, want %q", got, want)
	}
	if stored[0].IdempotencyKey != "k1" || stored[1].IdempotencyKey != "" {
		t.Fatalf("keys stored %q, %q: want the message's alone", stored[0].IdempotencyKey, stored[1].IdempotencyKey)
	}
}

// TestAKeyFoldedOutOfTheKeptMessagesIsStillKnown: a keyed message that a
// fold moved out of the messages its session keeps is still found by its
// key, in the store's index of the whole log: sent again it is Answered
// (same words) or ErrKeyReused (other words), stored nowhere and charged
// nothing, also by a session started anew on the same store; a new key
// is stored and charged once. Items added under a key are found the same
// way. The store is asked only once the chat has folded, and only for a
// key the kept messages do not hold.
func TestAKeyFoldedOutOfTheKeptMessagesIsStillKnown(t *testing.T) {
	var deps *Deps
	h := newHarnessWith(t, 128_000, nil, func(_ *harness, d *Deps) { deps = d },
		reply("one"), reply("two"), reply("three"), reply("four"))
	charged := 0
	keyed := func(turnID, text, key string) *SubmitTurn {
		return &SubmitTurn{TurnID: turnID, Message: chat.Message{Content: text, IdempotencyKey: key}, Charge: func() error { charged++; return nil }}
	}
	ask := func(msg any) any {
		t.Helper()
		return wait(t, "an answer", h.resultOf("c1", msg))
	}
	stored := func() int {
		msgs, _ := h.store.Messages(context.Background(), "c1", 0, 0)
		return len(msgs)
	}
	first, _ := h.submit(keyed("t1", "hello", "k1"))
	if charged != 1 || first.Messages[0].Seq != 1 {
		t.Fatalf("the first send: charged %d, %+v", charged, first.Messages)
	}
	if a, ok := ask(keyed("t1-again", "hello", "k1")).(*Answered); !ok || a.UserSeq != 1 || h.store.keyReads != 0 {
		t.Fatalf("sent again while kept: %+v, %d reads of the store; want Answered from the kept messages", a, h.store.keyReads)
	}
	h.turn("more")
	if c, ok := ask(&Compact{}).(*Compacted); !ok || c.View.FirstKeptSeq != 3 {
		t.Fatalf("compact: %+v, want the first turn folded", c)
	}
	n, reads := stored(), h.store.keyReads
	for _, name := range []string{"the session", "a session started anew"} {
		if a, ok := ask(keyed("t1-late", "hello", "k1")).(*Answered); !ok || a.UserSeq != 1 {
			t.Fatalf("%s: sent again once folded: %#v, want Answered at seq 1", name, a)
		}
		if r, ok := ask(keyed("t1-other", "goodbye", "k1")).(*Rejected); !ok || !errors.Is(r.Err, ErrKeyReused) {
			t.Fatalf("%s: the folded key with other words: %#v, want ErrKeyReused", name, r)
		}
		if stored() != n || charged != 1 || h.store.keyReads != reads+2 {
			t.Fatalf("%s: %d messages stored (want %d), %d charged (want 1), %d reads of the store (want %d)", name, stored(), n, charged, h.store.keyReads, reads+2)
		}
		// The session again, from the store alone.
		if err := h.system.Root.StopFuture(h.registry).Wait(); err != nil {
			t.Fatal(err)
		}
		h.registry = h.system.Root.Spawn(Props(deps))
		reads = h.store.keyReads
	}
	if res, _ := h.submit(keyed("t2", "new", "k2")); res.Messages[0].Content != "new" || charged != 2 || h.store.keyReads != reads+1 {
		t.Fatalf("a new key on the folded chat: %+v, charged %d, %d reads", res.Messages, charged, h.store.keyReads-reads)
	}
	if stored() != n+2 {
		t.Fatalf("%d messages stored, want %d", stored(), n+2)
	}

	items := &AddMessages{Key: "ka", Messages: []chat.Message{{Role: chat.RoleUser, Content: "an item"}, {Role: chat.RoleAssistant, Content: "its answer"}}}
	added, ok := ask(items).(*Added)
	if !ok || len(added.Messages) != 2 || added.Messages[0].IdempotencyKey != "ka" || added.Messages[1].IdempotencyKey != "" {
		t.Fatalf("items added under a key: %#v", added)
	}
	if a, ok := ask(items).(*Answered); !ok || a.UserSeq != added.Messages[0].Seq {
		t.Fatalf("the items again: %#v, want Answered at seq %d", a, added.Messages[0].Seq)
	}
	h.turn("after the items")
	if c, ok := ask(&Compact{}).(*Compacted); !ok || c.View.FirstKeptSeq <= added.Messages[1].Seq {
		t.Fatalf("compact: %+v, want the items folded", c)
	}
	if a, ok := ask(items).(*Answered); !ok || a.UserSeq != added.Messages[0].Seq {
		t.Fatalf("the items again once folded: %#v, want Answered at seq %d", a, added.Messages[0].Seq)
	}
	if r, ok := ask(keyed("t-items", "other words", "ka")).(*Rejected); !ok || !errors.Is(r.Err, ErrKeyReused) {
		t.Fatalf("a message of other words under the items' key: %#v, want ErrKeyReused", r)
	}
}

// TestAKeyedMessageWhoseWriteLandedUnseenIsStoredOnce: the store commits
// a person's message but the write's answer is lost (Postgres: its
// connection cut in the middle of the COMMIT's answer), so the send
// fails (503, to send again) though the log holds the message. Sent again
// under its key, the message is not stored a second time: its turn goes
// on from the one stored, and the log holds it once, answered. Items
// added under a key (AddMessages) the same: Answered where they landed.
// Their write failing in its first batch is refused: the session took in
// the none it stored, panicked, and the caller waited out its timeout.
func TestAKeyedMessageWhoseWriteLandedUnseenIsStoredOnce(t *testing.T) {
	model := &gated{let: make(chan bool, 1)}
	h := newHarnessWith(t, 128_000, nil, func(_ *harness, d *Deps) {
		d.Catalog = oneModel{client: model, info: providers.ModelInfo{Provider: "fake", ID: "m", Window: 128_000}}
	})
	var lose atomic.Bool
	lose.Store(true)
	h.store.mu.Lock()
	h.store.lost = func() error {
		if lose.CompareAndSwap(true, false) {
			return errors.New("commit 1 writes: conn closed")
		}
		return nil
	}
	h.store.mu.Unlock()
	ask := func(m any) any {
		t.Helper()
		res, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: m}, time.Minute).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	keyed := func(turnID string) *SubmitTurn {
		return &SubmitTurn{TurnID: turnID, Message: chat.Message{Content: "hello", IdempotencyKey: "k1"}}
	}
	sub := h.bus.Subscribe("c1", 1024, chat.EventTurnCompleted)
	defer sub.Close()

	if r, ok := ask(keyed("t1")).(*Rejected); !ok || r.Err == nil {
		t.Fatalf("a send whose write's answer was lost: %+v; want it refused", r)
	}
	acc, ok := ask(keyed("t1-again")).(*TurnAccepted)
	if !ok {
		t.Fatalf("sent again under its key: %+v; want a turn", acc)
	}
	model.let <- true
	var res chat.TurnResult
	for ev := range sub.C {
		if ev.TurnID == acc.TurnID {
			res = ev.Data.(chat.TurnResult)
			break
		}
	}
	// Answered as the first send would have been: the person's message,
	// then the answer (it held the answer alone).
	if len(res.Messages) != 2 || res.Messages[0].Seq != 1 || res.Messages[0].Content != "hello" {
		t.Fatalf("the turn of the message sent again ended with %+v; want the person's message at seq 1, then its answer", res.Messages)
	}
	stored, _ := h.store.Messages(context.Background(), "c1", 0, 0)
	var got []string
	for _, m := range stored {
		got = append(got, string(m.Role)+": "+m.Content)
	}
	if len(got) != 2 || got[0] != "user: hello" || !strings.HasPrefix(got[1], "assistant: answer") || acc.UserSeq != 1 {
		t.Fatalf("the log holds %q, the turn from seq %d; want the message once, from seq 1, answered", got, acc.UserSeq)
	}

	// Items added under a key, the same.
	lose.Store(true)
	items := &AddMessages{Key: "ka", Messages: []chat.Message{{Role: chat.RoleUser, Content: "an item"}, {Role: chat.RoleAssistant, Content: "its answer"}}}
	if r, ok := ask(items).(*Rejected); !ok || r.Err == nil {
		t.Fatalf("items whose write's answer was lost: %+v; want them refused", r)
	}
	if a, ok := ask(items).(*Answered); !ok || a.UserSeq != 3 {
		t.Fatalf("the items again under their key: %#v; want Answered at seq 3, where they landed", a)
	}
	if stored, _ := h.store.Messages(context.Background(), "c1", 0, 0); len(stored) != 4 {
		t.Fatalf("the log holds %d messages; want the two items once after the answered message", len(stored))
	}
}
