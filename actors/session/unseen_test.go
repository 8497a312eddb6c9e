package session

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// loseWrite makes the store's write of messages number n (counted from
// now, over every write of messages) land but fail, as a commit whose
// answer a cut connection lost.
func (h *harness) loseWrite(n int32) {
	var writes atomic.Int32
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	h.store.lost = func() error {
		if writes.Add(1) == n {
			return errors.New("commit: conn closed")
		}
		return nil
	}
}

// ask sends m to chat c1 and returns the reply.
func (h *harness) ask(m any) any {
	h.t.Helper()
	res, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: m}, time.Minute).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// logOf is chat c1's log as "role: content" lines.
func (h *harness) logOf() []string {
	stored, _ := h.store.Messages(context.Background(), "c1", 0, 0)
	var got []string
	for _, m := range stored {
		got = append(got, string(m.Role)+": "+m.Content)
	}
	return got
}

// TestATurnsWriteThatLandedUnseenIsReadBeforeTheMessageIsSentAgain: a
// turn's answer, or its tools' results, whose write landed but failed (a
// cut connection lost the COMMIT's answer) ends the turn with a problem;
// the session was only unsure after a person's message or added items, so
// the message sent again under its key was answered a second time (the
// answer stored twice), or, its log ending with the tool calls, said
// Answered though nothing answered it. Now it reads what landed first:
// the answered message is Answered, the tool results are answered once.
func TestATurnsWriteThatLandedUnseenIsReadBeforeTheMessageIsSentAgain(t *testing.T) {
	for name, tc := range map[string]struct {
		lose    int32 // the message's write is 1
		replies []providers.Response
		again   func(t *testing.T, res any)
		log     []string
	}{
		"answer": {
			lose: 2, replies: []providers.Response{reply("hi there"), reply("a second answer")},
			again: func(t *testing.T, res any) {
				if a, ok := res.(*Answered); !ok || a.UserSeq != 1 {
					t.Fatalf("sent again: %#v; want Answered at seq 1", res)
				}
			},
			log: []string{"user: hello", "assistant: hi there"},
		},
		"tool results": {
			lose: 3, replies: []providers.Response{callTool("k1", "echo", `{"text":"x"}`), reply("done")},
			again: func(t *testing.T, res any) {
				if _, ok := res.(*TurnAccepted); !ok {
					t.Fatalf("sent again: %#v; want the turn continued from the stored results", res)
				}
			},
			log: []string{"user: hello", "assistant: ", `tool: echo:{"text":"x"}`, "assistant: done"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 128_000, echoTools(t), tc.replies...)
			h.loseWrite(tc.lose)
			keyed := &SubmitTurn{TurnID: "t1", Message: chat.Message{Content: "hello", IdempotencyKey: "k1"}}
			if res, _ := h.submit(keyed); res.Problem == nil {
				t.Fatalf("the turn whose write failed ended with %+v; want a problem", res)
			}
			sub := h.bus.Subscribe("c1", 1024, chat.EventTurnCompleted)
			defer sub.Close()
			res := h.ask(&SubmitTurn{TurnID: "t2", Message: keyed.Message})
			tc.again(t, res)
			if acc, ok := res.(*TurnAccepted); ok {
				for ev := range sub.C {
					if ev.TurnID == acc.TurnID {
						if p := ev.Data.(chat.TurnResult).Problem; p != nil {
							t.Fatalf("the continued turn: %+v", p)
						}
						break
					}
				}
			}
			if got := h.logOf(); strings.Join(got, "\n") != strings.Join(tc.log, "\n") {
				t.Fatalf("the log holds %q; want %q", got, tc.log)
			}
		})
	}
}

// TestAnAddCutPartwayIsNeverAnsweredWhole: items added in several batches
// (each message here a batch of its own) whose second batch failed,
// having landed, were Answered when sent again under their key, the third
// never stored. Sent again, the add is completed while the log ends with
// its stored part, and refused (ErrKeyReused) once the chat went on.
func TestAnAddCutPartwayIsNeverAnsweredWhole(t *testing.T) {
	big := func(c string) string { return c + strings.Repeat(".", addBatchBytes*3/4) }
	items := &AddMessages{Key: "ka", Messages: []chat.Message{
		{Role: chat.RoleUser, Content: big("q")}, {Role: chat.RoleAssistant, Content: big("a")}, {Role: chat.RoleUser, Content: big("q2")},
	}}
	for name, wentOn := range map[string]bool{"completed": false, "refused once the chat went on": true} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 4_000_000, nil, reply("answered"))
			h.loseWrite(2)
			if r, ok := h.ask(items).(*Rejected); !ok || r.Err == nil {
				t.Fatalf("the add whose second batch failed: %#v; want it refused", r)
			}
			if wentOn {
				h.loseWrite(0)
				h.turn("next")
			}
			res := h.ask(items)
			if wentOn {
				if r, ok := res.(*Rejected); !ok || !errors.Is(r.Err, ErrKeyReused) {
					t.Fatalf("sent again once the chat went on: %#v; want ErrKeyReused", res)
				}
				if got := h.logOf(); len(got) != 4 {
					t.Fatalf("the log holds %d messages; want the two items stored and the turn", len(got))
				}
				return
			}
			a, ok := res.(*Added)
			if !ok || len(a.Messages) != 3 || a.Messages[0].Seq != 1 || a.Messages[2].Seq != 3 {
				t.Fatalf("sent again: %#v; want Added, the three items at seqs 1 to 3", res)
			}
			if got := h.logOf(); len(got) != 3 || !strings.HasPrefix(got[2], "user: q2") {
				t.Fatalf("the log holds %d messages; want the three items once", len(got))
			}
		})
	}
}

// TestAKeyReusedForAnotherLengthOfAddIsRefused: items added whole under
// a key, which the log ends with, were taken for an add cut partway when
// the key came again with a longer list: its first items matched, so the
// rest was stored after them. The add's length is stored with its first
// item now: another length under the key is ErrKeyReused, storing
// nothing, while an add of the same length whose later batch failed is
// still completed (TestAnAddCutPartwayIsNeverAnsweredWhole), and one
// stored before the length was kept is completed as then.
func TestAKeyReusedForAnotherLengthOfAddIsRefused(t *testing.T) {
	q, a := chat.Message{Role: chat.RoleUser, Content: "q"}, chat.Message{Role: chat.RoleAssistant, Content: "a"}
	longer := []chat.Message{q, a, {Role: chat.RoleUser, Content: "q2"}}
	for name, again := range map[string][]chat.Message{"longer": longer, "shorter": {q}} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 128_000, nil)
			if _, ok := h.ask(&AddMessages{Key: "ka", Messages: []chat.Message{q, a}}).(*Added); !ok {
				t.Fatal("the first add was not stored")
			}
			if r, ok := h.ask(&AddMessages{Key: "ka", Messages: again}).(*Rejected); !ok || !errors.Is(r.Err, ErrKeyReused) {
				t.Fatalf("%d items under the key of 2 stored whole: %#v; want ErrKeyReused", len(again), r)
			}
			if got := h.logOf(); len(got) != 2 {
				t.Fatalf("the log holds %q; want the first add alone", got)
			}
		})
	}
	t.Run("stored before the length was kept", func(t *testing.T) {
		h := newHarness(t, 128_000, nil)
		old := []chat.Message{q, a}
		old[0].IdempotencyKey = "ka"
		if _, err := h.store.Append(context.Background(), "c1", old...); err != nil {
			t.Fatal(err)
		}
		if ad, ok := h.ask(&AddMessages{Key: "ka", Messages: longer}).(*Added); !ok || len(ad.Messages) != 3 {
			t.Fatalf("a longer add under an old record's key: %#v; want it completed, as before", ad)
		}
	})
}

// TestTheNextWriteAfterOneThatLandedUnseenReadsItFirst: after an answer
// whose write landed unseen, the next turn's first request (sent while
// its message commits) left the answer out, numbered its message over it,
// and was planned again; items added next left it out of every later
// request. Now the next turn, or add, reads what landed first.
func TestTheNextWriteAfterOneThatLandedUnseenReadsItFirst(t *testing.T) {
	for _, add := range []bool{false, true} {
		t.Run(map[bool]string{false: "turn", true: "add"}[add], func(t *testing.T) {
			called := make(chan struct{}, 8)
			h := newHarnessWith(t, 128_000, nil, func(_ *harness, d *Deps) {
				one := d.Catalog.(oneModel)
				one.client = calledModel{Client: one.client, called: called, one: &sync.Mutex{}}
				d.Catalog = one
			}, reply("hi there"), reply("again"), reply("a spare answer"))
			h.loseWrite(2)
			if res, _ := h.turn("hello"); res.Problem == nil {
				t.Fatalf("the turn whose answer's write failed ended with %+v; want a problem", res)
			}
			<-called
			h.loseWrite(0)
			want := []string{"user: hello", "assistant: hi there", "user: more", "assistant: again"}
			if add {
				if a, ok := h.ask(&AddMessages{Messages: []chat.Message{{Role: chat.RoleUser, Content: "item"}, {Role: chat.RoleAssistant, Content: "its answer"}}}).(*Added); !ok || a.Messages[0].Seq != 3 {
					t.Fatalf("the items: %#v; want them added from seq 3", a)
				}
				want = slices.Insert(want, 2, "user: item", "assistant: its answer")
			}
			// The turn's message commits once its first request went out.
			h.store.mu.Lock()
			h.store.committing = func() error {
				select {
				case <-called:
				case <-time.After(time.Minute):
					return errors.New("no request went out while the message committed")
				}
				h.store.mu.Lock()
				defer h.store.mu.Unlock()
				h.store.committing = nil
				return nil
			}
			h.store.mu.Unlock()
			if res, _ := h.turn("more"); res.Problem != nil {
				t.Fatalf("the next turn: %+v", res.Problem)
			}
			reqs := h.model.requests()
			for i, req := range reqs[1:] {
				n := 0
				for _, m := range req.Messages {
					n += strings.Count(m.Content, "hi there")
				}
				if n != 1 {
					t.Fatalf("request %d of the next turn carries the landed answer %d times; want once", i, n)
				}
			}
			if got := h.logOf(); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("the log holds %q; want %q", got, want)
			}
		})
	}
}

// TestATurnWhoseLogCannotBeReadIsNotAnsweredWithAGap: a turn's message
// stored after one another node wrote, whose read then failed, went on
// without it: the model was asked with a gap in the chat. Now the read is
// tried again once; failing twice, the turn ends with a problem saying
// so, its message stored and unanswered, and the next turn reads the
// log, the gap and the message in, and announces each once.
func TestATurnWhoseLogCannotBeReadIsNotAnsweredWithAGap(t *testing.T) {
	for name, fails := range map[string]int32{"one failed read is read again": 1, "two end the turn": 2} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 128_000, nil, reply("one"), reply("ok"), reply("ok"), reply("ok"))
			h.turn("first")
			sub := h.bus.Subscribe("c1", 1024, chat.EventMessage, chat.EventTurnCompleted)
			defer sub.Close()
			if _, err := h.store.Append(context.Background(), "c1", chat.Message{Role: chat.RoleUser, Content: "from another node"}); err != nil {
				t.Fatal(err)
			}
			var reads atomic.Int32
			h.store.mu.Lock()
			h.store.reading = func() error {
				if reads.Add(1) <= fails {
					return errors.New("read: conn closed")
				}
				return nil
			}
			h.store.mu.Unlock()
			res, _ := h.turn("next")
			want := []string{"user: first", "assistant: one", "user: from another node", "user: next", "assistant: ok"}
			if fails == 2 {
				if res.Problem == nil || !strings.Contains(res.Problem.Message, "log before it could not be read") || len(res.Messages) != 0 {
					t.Fatalf("the turn whose log could not be read: %+v; want a problem saying so, and no message of its own", res)
				}
				if got := h.logOf(); !slices.Equal(got, want[:4]) {
					t.Fatalf("the log holds %q; want the message stored, unanswered", got)
				}
				if res, _ := h.turn("again"); res.Problem != nil {
					t.Fatalf("the next turn: %+v", res.Problem)
				}
				want = append(want[:4], "user: again", "assistant: ok")
			} else if res.Problem != nil {
				t.Fatalf("the turn whose read failed once: %+v", res.Problem)
			}
			if got := h.logOf(); !slices.Equal(got, want) {
				t.Fatalf("the log holds %q; want %q", got, want)
			}
			// The answer's request held the whole log (a person's messages
			// in a row are sent as one).
			reqs := h.model.requests()
			var asked []string
			for _, m := range reqs[len(reqs)-1].Messages {
				asked = append(asked, m.Content)
			}
			for _, m := range want[:len(want)-1] {
				if _, text, _ := strings.Cut(m, ": "); !strings.Contains(strings.Join(asked, "\n\n"), text) {
					t.Fatalf("the last request held %q; want %q in it", asked, text)
				}
			}
			var seen []string
			for ev := range sub.C {
				if ev.Type == chat.EventTurnCompleted {
					if res := ev.Data.(chat.TurnResult); res.Problem == nil {
						break
					}
					continue
				}
				if m := ev.Data.(chat.Message); m.Role == chat.RoleUser {
					seen = append(seen, m.Content)
				}
			}
			if wantSeen := map[int32][]string{1: {"from another node", "next"}, 2: {"from another node", "next", "again"}}[fails]; !slices.Equal(seen, wantSeen) {
				t.Fatalf("the watcher saw the person's messages %q; want %q, each once", seen, wantSeen)
			}
		})
	}
}

// TestAMessageTheKeyedReadTakesInIsAnnouncedWhenNoTurnContinuesIt: the
// read of a key's look-up holds back the announcement of the message the
// log ends with under the key, for the turn that continues it; when none
// does (the key sent again with other words, or items added under it),
// the session announces it, once, as a stored message.
func TestAMessageTheKeyedReadTakesInIsAnnouncedWhenNoTurnContinuesIt(t *testing.T) {
	items := &AddMessages{Key: "k1", Messages: []chat.Message{{Role: chat.RoleUser, Content: "hello"}}}
	for name, tc := range map[string]struct {
		first, again any
		answer       func(res any) bool
	}{
		"a turn's message, sent again with other words": {
			first: &SubmitTurn{TurnID: "t1", Message: chat.Message{Content: "hello", IdempotencyKey: "k1"}},
			again: &SubmitTurn{TurnID: "t2", Message: chat.Message{Content: "other words", IdempotencyKey: "k1"}},
			answer: func(res any) bool {
				r, ok := res.(*Rejected)
				return ok && errors.Is(r.Err, ErrKeyReused)
			},
		},
		"items added under the key, sent again": {
			first: items, again: items,
			answer: func(res any) bool { _, ok := res.(*Answered); return ok },
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 128_000, nil)
			sub := h.bus.Subscribe("c1", 1024, chat.EventMessage)
			defer sub.Close()
			h.loseWrite(1)
			if r, ok := h.ask(tc.first).(*Rejected); !ok || r.Err == nil {
				t.Fatalf("a send whose write's answer was lost: %#v; want it refused", r)
			}
			if res := h.ask(tc.again); !tc.answer(res) {
				t.Fatalf("sent again under the key: %#v", res)
			}
			if _, ok := h.ask(&AddMessages{Messages: []chat.Message{{Role: chat.RoleUser, Content: "after"}}}).(*Added); !ok {
				t.Fatal("the add after was not stored")
			}
			var got []string
			for ev := range sub.C {
				m := ev.Data.(chat.Message)
				if got = append(got, m.Content+"@"+ev.TurnID); m.Content == "after" {
					break
				}
			}
			if want := []string{"hello@", "after@"}; !slices.Equal(got, want) {
				t.Fatalf("the watcher saw %q; want %q", got, want)
			}
		})
	}
}

// TestMessagesATailReadTakesInAreAnnouncedOnce: a message the session
// takes in by reading the log's tail (its write landed though it was
// reported failed, or another node wrote it) is announced to the chat's
// watchers as a stored message is, once, in the log's order: also when
// the session's own write turns out to be it (sent again under its key),
// or is read in with it (the log moved under the turn's write: the turn's
// own message is then the turn's to announce, with its id). Such a
// message was taken in but never announced, so a watcher never saw it. A
// message sent again under its key, whose first write landed unseen, was
// announced by the read, with no turn id, before the turn that continues
// it started; it is the turn's to announce now, after turn.started.
func TestMessagesATailReadTakesInAreAnnouncedOnce(t *testing.T) {
	replies := []providers.Response{reply("one"), reply("two"), reply("three")}
	for name, tc := range map[string]struct {
		before func(h *harness)
		last   *SubmitTurn
		want   []string // the message events' contents, in order
		lastBy string   // the turn id the last one carries
	}{
		"the next turn after a write that landed unseen": {
			before: func(h *harness) {
				h.loseWrite(1)
				if r, ok := h.ask(&SubmitTurn{TurnID: "t1", Message: chat.Message{Content: "hello"}}).(*Rejected); !ok || r.Err == nil {
					t.Fatalf("a send whose write's answer was lost: %#v; want it refused", r)
				}
			},
			last: &SubmitTurn{TurnID: "t2", Message: chat.Message{Content: "next"}},
			want: []string{"hello", "next"}, lastBy: "t2",
		},
		"the same message sent again under its key": {
			before: func(h *harness) {
				h.loseWrite(1)
				if r, ok := h.ask(&SubmitTurn{TurnID: "t1", Message: chat.Message{Content: "hello", IdempotencyKey: "k1"}}).(*Rejected); !ok || r.Err == nil {
					t.Fatalf("a send whose write's answer was lost: %#v; want it refused", r)
				}
			},
			last: &SubmitTurn{TurnID: "t2", Message: chat.Message{Content: "hello", IdempotencyKey: "k1"}},
			want: []string{"hello"}, lastBy: "t2", // read in before t2 began, announced by it
		},
		"a turn whose write lands after another node's message": {
			before: func(h *harness) {
				h.turn("first")
				if _, err := h.store.Append(context.Background(), "c1", chat.Message{Role: chat.RoleUser, Content: "from another node"}); err != nil {
					t.Fatal(err)
				}
			},
			last: &SubmitTurn{TurnID: "t2", Message: chat.Message{Content: "next"}},
			want: []string{"first", "from another node", "next"}, lastBy: "t2",
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 128_000, nil, replies...)
			sub := h.bus.Subscribe("c1", 1024, chat.EventMessage, chat.EventTurnStarted, chat.EventTurnCompleted)
			defer sub.Close()
			tc.before(h)
			res, _ := h.submit(tc.last)
			if res.Problem != nil {
				t.Fatalf("the last turn: %+v", res.Problem)
			}
			var got []string
			lastBy, started, lastAfterStart := "?", false, false
			for ev := range sub.C {
				if ev.Type == chat.EventTurnStarted {
					started = started || ev.TurnID == tc.last.TurnID
					continue
				}
				if ev.Type == chat.EventTurnCompleted {
					if ev.TurnID == tc.last.TurnID {
						break
					}
					continue
				}
				if m := ev.Data.(chat.Message); m.Role == chat.RoleUser {
					got, lastBy, lastAfterStart = append(got, m.Content), ev.TurnID, started
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("the watcher saw the person's messages %q; want %q, each once", got, tc.want)
			}
			if lastBy != tc.lastBy || !lastAfterStart {
				t.Fatalf("the last message came with turn id %q, after its turn.started: %v; want %q, after it", lastBy, lastAfterStart, tc.lastBy)
			}
		})
	}
}
