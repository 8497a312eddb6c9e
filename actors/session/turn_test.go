package session

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// calledModel tells of each call before making it.
type calledModel struct {
	providers.Client
	called chan<- struct{}
	// one lets a call in only once the one before it has returned, so a
	// call cancelled as it starts still takes its own scripted reply,
	// never the next call's.
	one *sync.Mutex
}

func (m calledModel) Stream(ctx context.Context, req providers.Request, emit func(providers.Event)) (providers.Response, error) {
	m.one.Lock()
	defer m.one.Unlock()
	m.called <- struct{}{}
	return m.Client.Stream(ctx, req, emit)
}

// TestATurnIsSentWhileItsMessageSyncsAndNothingIsSaidBeforeIt: the session
// plans a turn's request and sends it while the person's message syncs;
// the ack, the turn's events and the answer's words wait for the sync, and
// a failed sync refuses the turn with nothing said of it.
func TestATurnIsSentWhileItsMessageSyncsAndNothingIsSaidBeforeIt(t *testing.T) {
	for _, fail := range []error{nil, errors.New("disk gone")} {
		entered, release, called := make(chan struct{}, 1), make(chan struct{}), make(chan struct{}, 2)
		h := newHarnessWith(t, 128_000, nil, func(h *harness, d *Deps) {
			one := d.Catalog.(oneModel)
			one.client = calledModel{Client: one.client, called: called, one: &sync.Mutex{}}
			d.Catalog = one
			h.store.synced = func() error {
				entered <- struct{}{}
				<-release
				return fail
			}
		}, reply("hello"), reply("again"))
		sub := h.bus.Subscribe("c1", 1024)
		fut := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &SubmitTurn{TurnID: "t-hi", Message: chat.Message{Content: "hi"}}}, time.Minute)
		<-entered
		<-called // the request went out while the message synced
		select {
		case ev := <-sub.C:
			t.Fatalf("%s went out before the message was durable", ev.Type)
		default:
		}
		close(release)
		res, err := fut.Result()
		if err != nil {
			t.Fatal(err)
		}
		if fail != nil {
			if r, ok := res.(*Rejected); !ok || !errors.Is(r.Err, fail) {
				t.Fatalf("a turn whose message did not sync got %#v", res)
			}
			h.store.synced = nil // the next message syncs
			if res, _ := h.turn("again"); res.Problem != nil {
				t.Fatalf("the next turn: %+v", res.Problem)
			}
			// The refused turn's events, and its answer's word, would have
			// come before the next turn's.
			if ev := <-sub.C; ev.Type != chat.EventTurnStarted || ev.TurnID != "t-again" {
				t.Fatalf("after a refused turn the first event is %s of %s", ev.Type, ev.TurnID)
			}
		} else {
			if _, ok := res.(*TurnAccepted); !ok {
				t.Fatalf("submit got %#v", res)
			}
			if ev := <-sub.C; ev.Type != chat.EventTurnStarted {
				t.Fatalf("the first event is %s", ev.Type)
			}
			if ev := <-sub.C; ev.Type != chat.EventMessage || ev.Data.(chat.Message).Content != "hi" {
				t.Fatalf("the second event is %s %+v", ev.Type, ev.Data)
			}
			if ev := <-sub.C; ev.Type != chat.EventMessageDelta {
				t.Fatalf("the third event is %s", ev.Type)
			}
		}
		sub.Close()
	}
}

// TestATurnIsSentWhileItsMessageCommits: a turn's first request goes out
// before its message's write is committed, with the message numbered as
// the store numbers it; a write that fails refuses the turn, says nothing
// of it, and leaves the message out of the next request; a log that holds
// a message the session does not know of (a failed write that landed) gets
// the turn planned again with the message as stored and the one that
// landed read in before it, and only that call's answer counts.
func TestATurnIsSentWhileItsMessageCommits(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail error
		// landed is a message the log takes behind the session's back.
		landed bool
	}{{name: "committed"}, {name: "failed", fail: errors.New("disk gone")}, {name: "log moved", landed: true}} {
		t.Run(tc.name, func(t *testing.T) {
			called := make(chan struct{}, 4)
			var h *harness
			replies := []providers.Response{reply("hello"), reply("again")}
			if tc.landed {
				// The first call's answer comes to a call that was
				// cancelled: "stale" must not be the turn's answer.
				replies = []providers.Response{reply("stale"), reply("hello"), reply("again")}
			}
			h = newHarnessWith(t, 128_000, nil, func(hh *harness, d *Deps) {
				one := d.Catalog.(oneModel)
				one.client = calledModel{Client: one.client, called: called, one: &sync.Mutex{}}
				d.Catalog = one
				hh.store.committing = func() error {
					select {
					case <-called: // the request went out before the commit
					case <-time.After(time.Minute):
						return errors.New("no request went out while the message committed")
					}
					hh.store.mu.Lock()
					defer hh.store.mu.Unlock()
					hh.store.committing = nil
					if tc.landed {
						hh.store.appendLocked("c1", []chat.Message{{Role: chat.RoleUser, Content: "landed"}})
					}
					return tc.fail
				}
			}, replies...)
			sub := h.bus.Subscribe("c1", 1024)
			defer sub.Close()
			res, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &SubmitTurn{TurnID: "t-hi", Message: chat.Message{Content: "hi"}}}, time.Minute).Result()
			if err != nil {
				t.Fatal(err)
			}
			if tc.fail != nil {
				if r, ok := res.(*Rejected); !ok || !errors.Is(r.Err, tc.fail) {
					t.Fatalf("a turn whose message did not commit got %#v", res)
				}
				next, evs := h.turn("again")
				if next.Problem != nil || evs[0].Type != chat.EventTurnStarted || evs[0].TurnID != "t-again" {
					t.Fatalf("the next turn: %+v, first event %s of %s", next.Problem, evs[0].Type, evs[0].TurnID)
				}
				if next.Messages[0].Seq != 1 {
					t.Fatalf("the next message is seq %d, want 1 (the refused one is not in the log)", next.Messages[0].Seq)
				}
				reqs := h.model.requests()
				if last := reqs[len(reqs)-1].Messages; len(last) != 1 || last[0].Content != "again" {
					t.Fatalf("the next request carries %+v, want only its own message", last)
				}
				return
			}
			acc, ok := res.(*TurnAccepted)
			want := int64(1)
			if tc.landed {
				want = 2
			}
			if !ok || acc.UserSeq != want {
				t.Fatalf("submit got %#v, want the message accepted as seq %d", res, want)
			}
			var done chat.TurnResult
			for ev := range sub.C {
				if ev.Type == chat.EventTurnCompleted {
					done = ev.Data.(chat.TurnResult)
					break
				}
			}
			if done.Problem != nil || len(done.Messages) != 2 || done.Messages[0].Seq != want || done.Messages[0].Content != "hi" ||
				done.Messages[1].Content != "hello" || done.Messages[1].Seq != want+1 {
				t.Fatalf("the turn ended with %+v, want hi (seq %d) answered hello", done, want)
			}
			h.store.mu.Lock()
			log := slices.Clone(h.store.msgs["c1"])
			h.store.mu.Unlock()
			if got := log[want-1]; got.Content != "hi" || got.Seq != want {
				t.Fatalf("the log holds %+v at seq %d", got, want)
			}
			// The turn's request, planned again, and the next turn's carry
			// the message once, as stored, and the one that landed before
			// it: the session reads the log it had not seen.
			h.turn("more")
			reqs := h.model.requests()
			for i, req := range [][]chat.Message{reqs[len(reqs)-2].Messages, reqs[len(reqs)-1].Messages} {
				// A person's messages in a row are sent as one.
				var text []string
				for _, m := range req {
					text = append(text, m.Content)
				}
				all := strings.Join(text, "\n\n")
				n, landed := strings.Count(all, "hi"), strings.Count(all, "landed")
				if want := map[bool]int{true: 1}[tc.landed]; n != 1 || landed != want {
					t.Fatalf("request %d of the last two carries the message %d times, the landed one %d times (want %d)", i, n, landed, want)
				}
			}
		})
	}
}

// promptModel answers each call at once and, as a real provider does,
// fails a call whose context ended while it streamed; it hands each call's
// context to calls first.
type promptModel struct{ calls chan<- context.Context }

func (m promptModel) Stream(ctx context.Context, _ providers.Request, emit func(providers.Event)) (providers.Response, error) {
	m.calls <- ctx
	emit(providers.Event{Kind: providers.EventText, Text: "hello"})
	if err := ctx.Err(); err != nil {
		return providers.Response{}, err
	}
	return reply("hello"), nil
}

func (promptModel) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

// TestAMessageSyncSlowerThanTheIdleTimeoutIsNotTheModelsSilence: a turn's
// call goes out while its message syncs, and its words wait for the sync;
// a model that answered at once is not cut off as idle
// (limits.model_idle_timeout) however long that sync takes.
func TestAMessageSyncSlowerThanTheIdleTimeoutIsNotTheModelsSilence(t *testing.T) {
	const idle = time.Second
	calls := make(chan context.Context, 4)
	h := newHarnessWith(t, 128_000, nil, func(h *harness, d *Deps) {
		d.ModelIdle = idle
		d.Catalog = oneModel{client: promptModel{calls: calls}, info: providers.ModelInfo{Provider: "fake", ID: "m", Window: 128_000}}
		h.store.synced = func() error {
			h.store.mu.Lock()
			h.store.synced = nil // the answer's write syncs at once
			h.store.mu.Unlock()
			// The message's sync lasts until the call is cut, or twice
			// the idle timeout.
			select {
			case <-(<-calls).Done():
			case <-time.After(2 * idle):
			}
			return nil
		}
	})
	res, _ := h.turn("hi")
	if res.Problem != nil || len(res.Messages) != 2 || res.Messages[1].Content != "hello" {
		t.Fatalf("the turn ended with %+v, %+v; want hi answered hello", res.Problem, res.Messages)
	}
}

// continueTurn submits a turn marked Continue and returns the session's
// reply: *TurnAccepted or *Rejected.
func (h *harness) continueTurn(turnID string) any {
	h.t.Helper()
	res, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &SubmitTurn{TurnID: turnID, Continue: true}}, time.Minute).Result()
	if err != nil {
		h.t.Fatalf("submit: %v", err)
	}
	return res
}

// TestAContinuedTurnAnswersTheLogAsItStands: a turn that failed at the
// provider leaves the person's message unanswered; a turn marked Continue
// stores nothing and answers it, the request ending with that message.
// Once the log ends with an answer, and on an empty chat, Continue is
// refused with ErrNothingToAnswer.
func TestAContinuedTurnAnswersTheLogAsItStands(t *testing.T) {
	h := newHarness(t, 128_000, nil)
	if r, ok := h.continueTurn("t-empty").(*Rejected); !ok || !errors.Is(r.Err, ErrNothingToAnswer) {
		t.Fatalf("Continue on an empty chat: %+v", r)
	}
	if res, _ := h.turn("hello"); res.Problem == nil {
		t.Fatalf("the first turn did not fail: %+v", res)
	}
	h.model.mu.Lock()
	h.model.replies = append(h.model.replies, reply("hello to you"))
	h.model.mu.Unlock()

	sub := h.bus.Subscribe("c1", 1024)
	defer sub.Close()
	acc, ok := h.continueTurn("t-again").(*TurnAccepted)
	if !ok {
		t.Fatal("Continue after the failed turn was not accepted")
	}
	var res chat.TurnResult
	var told []chat.Role
	for ev := range sub.C {
		if m, ok := ev.Data.(chat.Message); ok && ev.Type == chat.EventMessage {
			told = append(told, m.Role)
		}
		if ev.Type == chat.EventTurnCompleted {
			res = ev.Data.(chat.TurnResult)
			break
		}
	}
	if res.TurnID != "t-again" || res.Problem != nil || len(res.Messages) != 1 || res.Messages[0].Content != "hello to you" {
		t.Fatalf("the continued turn: %+v", res)
	}
	if !slices.Equal(told, []chat.Role{chat.RoleAssistant}) {
		t.Fatalf("the continued turn told messages %v; it stores the answer alone", told)
	}
	stored, _ := h.store.Messages(context.Background(), "c1", 0, 0)
	if len(stored) != 2 || stored[0].Content != "hello" || stored[1].Content != "hello to you" || acc.UserSeq != stored[0].Seq {
		t.Fatalf("the log after the continued turn: %+v (accepted at user seq %d)", stored, acc.UserSeq)
	}
	h.model.mu.Lock()
	last := h.model.seen[len(h.model.seen)-1].Messages
	h.model.mu.Unlock()
	if m := last[len(last)-1]; m.Role != chat.RoleUser || m.Content != "hello" {
		t.Fatalf("the continued turn's request ends with %+v, want the person's message", m)
	}
	if r, ok := h.continueTurn("t-more").(*Rejected); !ok || !errors.Is(r.Err, ErrNothingToAnswer) {
		t.Fatalf("Continue after an answer: %+v", r)
	}
}

// TestARetriedMessageIsAnsweredAsStored: a message whose turn failed at the
// provider is in the log, unanswered; the same message sent again marked
// Retry is answered as stored, the request ending with it once. Sent again
// once the log ends with an answer, it is a new message, stored and
// answered.
func TestARetriedMessageIsAnsweredAsStored(t *testing.T) {
	h := newHarness(t, 128_000, nil)
	if res, _ := h.turn("hello"); res.Problem == nil {
		t.Fatalf("the first turn did not fail: %+v", res)
	}
	h.model.mu.Lock()
	h.model.replies = append(h.model.replies, reply("first answer"), reply("second answer"))
	h.model.mu.Unlock()
	retry := func(id string) chat.TurnResult {
		res, _ := h.submit(&SubmitTurn{TurnID: id, Message: chat.Message{Content: "hello"}, Retry: true})
		return res
	}
	if res := retry("t-retry"); res.Problem != nil || len(res.Messages) != 1 || res.Messages[0].Content != "first answer" {
		t.Fatalf("the retry: %+v", res)
	}
	h.model.mu.Lock()
	sent := h.model.seen[len(h.model.seen)-1].Messages
	h.model.mu.Unlock()
	var hellos int
	for _, m := range sent {
		if m.Role == chat.RoleUser && m.Content == "hello" {
			hellos++
		}
	}
	if hellos != 1 || sent[len(sent)-1].Content != "hello" {
		t.Fatalf("the retry's request holds the message %d times and ends with %+v", hellos, sent[len(sent)-1])
	}
	if res := retry("t-again"); res.Problem != nil || len(res.Messages) != 2 || res.Messages[0].Content != "hello" || res.Messages[1].Content != "second answer" {
		t.Fatalf("the message after its answer: %+v", res)
	}
	stored, _ := h.store.Messages(context.Background(), "c1", 0, 0)
	var got []string
	for _, m := range stored {
		got = append(got, m.Content)
	}
	if want := []string{"hello", "first answer", "hello", "second answer"}; !slices.Equal(got, want) {
		t.Fatalf("the log holds %q, want %q", got, want)
	}
}

// TestOnlyTheSameUnansweredMessageEndsTheLog: endsUnanswered holds for
// the person's message at the log's end with the same words, origin,
// images and attachments, and for nothing else.
func TestOnlyTheSameUnansweredMessageEndsTheLog(t *testing.T) {
	img := chat.Image{MediaType: "image/png", Data: []byte{1, 2, 3}}
	att := chat.Attachment{ID: "sha-1", Name: "a.txt"}
	m := chat.Message{Role: chat.RoleUser, Content: "hello", Images: []chat.Image{img}, Attachments: []chat.Attachment{att}}
	with := func(f func(*chat.Message)) chat.Message {
		c := m
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		log  []chat.Message
		want bool
	}{
		{"the same message", []chat.Message{m}, true},
		{"the same, its attachment named otherwise", []chat.Message{with(func(c *chat.Message) { c.Attachments = []chat.Attachment{{ID: "sha-1", Name: "b.txt"}} })}, true},
		{"an empty log", nil, false},
		{"answered", []chat.Message{m, {Role: chat.RoleAssistant, Content: "hi"}}, false},
		{"other words", []chat.Message{with(func(c *chat.Message) { c.Content = "hello!" })}, false},
		{"another origin", []chat.Message{with(func(c *chat.Message) { c.Origin = "schedule" })}, false},
		{"another image", []chat.Message{with(func(c *chat.Message) { c.Images = []chat.Image{{MediaType: "image/png", Data: []byte{1, 2}}} })}, false},
		{"no attachment", []chat.Message{with(func(c *chat.Message) { c.Attachments = nil })}, false},
		{"a tool result with its words", []chat.Message{with(func(c *chat.Message) { c.Role = chat.RoleTool })}, false},
	} {
		if got := (&session{msgs: tc.log}).endsUnanswered(m); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// countingModel streams only usage, as a provider's keep-alive of counts
// would (Anthropic's message_delta), until its call is cut.
type countingModel struct{}

func (countingModel) Stream(ctx context.Context, _ providers.Request, emit func(providers.Event)) (providers.Response, error) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return providers.Response{}, ctx.Err()
		case <-tick.C:
			emit(providers.Event{Kind: providers.EventUsage, Usage: &chat.Usage{InputTokens: 10}})
		}
	}
}

func (countingModel) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

// TestCountsAloneAreTheModelsSilence: a model that sends only usage, never
// a word, is cut off as idle (limits.model_idle_timeout), not kept until
// the turn's own timeout.
func TestCountsAloneAreTheModelsSilence(t *testing.T) {
	h := newHarnessWith(t, 128_000, nil, func(h *harness, d *Deps) {
		d.ModelIdle, d.TurnTimeout = 200*time.Millisecond, 20*time.Second
		d.Catalog = oneModel{client: countingModel{}, info: providers.ModelInfo{Provider: "fake", ID: "m", Window: 128_000}}
	})
	res, _ := h.turn("hi")
	if res.Problem == nil || res.Problem.Kind != chat.ProblemTimeout || !strings.Contains(res.Problem.Message, errModelIdle.Error()) {
		t.Fatalf("the turn ended with %+v; want the model cut off as idle", res.Problem)
	}
}
