package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/eventbus"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/providers"
)

// TestAFoldHandsTheSummariserTheChatsLastRequest: the summariser gets the
// chat's own request as it was last sent, up to the fold point, byte for
// byte (what the provider holds in its cache), with its system prompt and
// tools, and the chat's tenant (its provider slots are shared fairly
// between tenants).
func TestAFoldHandsTheSummariserTheChatsLastRequest(t *testing.T) {
	for _, lines := range []bool{false, true} {
		f, last := foldAfterTwoTurns(t, lines)
		if f.Tenant != "t1" {
			t.Fatalf("fold for tenant %q, want the chat's t1", f.Tenant)
		}
		p := f.Prefix
		if lines {
			if p != nil {
				t.Fatalf("fold_as_lines: a prefix was sent: %+v", p)
			}
			continue
		}
		if p == nil || p.System != last.System || len(p.Tools) != len(last.Tools) || p.CacheKey != "c1" || p.Tokens <= 0 {
			t.Fatalf("prefix %+v, last request %+v", p, last)
		}
		// Folding up to the newest person's message: the two messages before it.
		if len(p.Messages) != 2 || len(last.Messages) < 3 {
			t.Fatalf("prefix messages %+v, last request's %+v", p.Messages, last.Messages)
		}
		for i, m := range p.Messages {
			if l := last.Messages[i]; m.Role != l.Role || m.Content != l.Content || m.Seq != l.Seq {
				t.Fatalf("prefix message %d = %+v, the last request sent %+v", i, m, l)
			}
		}
	}
}

// foldAfterTwoTurns runs two turns, compacts, and returns the Fold the
// summariser got and the last request the model got.
func foldAfterTwoTurns(t *testing.T, lines bool) (*summarizer.Fold, providers.Request) {
	t.Helper()
	folds := make(chan *summarizer.Fold, 1)
	h := newHarnessWith(t, 32_000, nil, func(h *harness, d *Deps) {
		d.FoldAsLines = lines
		d.Summarizer = h.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if f, ok := c.Message().(*summarizer.Fold); ok {
				folds <- f
				c.Respond(&summarizer.Folded{ReqID: f.ReqID, ChatID: f.ChatID, OK: true, Summary: "the person greeted"})
			}
		}))
	}, reply("hi"), reply("fine"))
	h.turn("hello")
	h.turn("how are you?")
	if _, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &Compact{}}, time.Minute).Result(); err != nil {
		t.Fatalf("compact: %v", err)
	}
	return <-folds, h.model.requests()[1]
}

// TestAFoldBetweenTurnsIsOneUnsyncedWrite: a background fold that lands
// after its turn ended saves its boundary and stores its item in one
// write with no sync of its own (two would each wait for the writer's
// cycle, on the mailbox), and is told once stored.
func TestAFoldBetweenTurnsIsOneUnsyncedWrite(t *testing.T) {
	h, folds := heldFolds(t)
	if res, _ := h.turn("and now?"); res.Problem != nil {
		t.Fatalf("problem: %+v", res.Problem)
	}
	a := <-folds // asked after the turn ended; the turn is over
	sub := h.bus.Subscribe("c1", 16)
	defer sub.Close()
	h.store.mu.Lock()
	w0, u0 := h.store.writes, h.store.unsynced
	h.store.mu.Unlock()
	h.system.Root.Send(a.from, &summarizer.Folded{ReqID: a.f.ReqID, ChatID: a.f.ChatID, OK: true, Summary: "the person asked questions"})
	ev := <-sub.C
	if ev.Type != chat.EventCompacted || ev.TurnID != "" {
		t.Fatalf("first event %s of turn %q, want compacted of none", ev.Type, ev.TurnID)
	}
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	acts, snap := h.store.acts["c1"], h.store.snaps["c1"]
	if h.store.writes != w0 || h.store.unsynced != u0+1 || len(acts) != 1 || acts[0].Type != chat.EventCompacted || snap.FirstKeptSeq <= 1 || snap.Summary == "" {
		t.Fatalf("%d synced and %d unsynced writes, activity %d items, snapshot first kept %d; want 0 and 1, the fold's item, its boundary",
			h.store.writes-w0, h.store.unsynced-u0, len(acts), snap.FirstKeptSeq)
	}
}

// TestAFoldsWriteHoldsNoWorker: a fold's own write — a background fold's
// between turns, unsynced, and a /compact's, synced — runs off the
// session's mailbox: while the store holds it, an actor on the sessions'
// dispatcher's last free worker still answers (a frozen store holds the
// chat, not every tenant's sessions). Once stored, the fold is as before:
// its boundary saved, told once, and the /compact answered with it.
func TestAFoldsWriteHoldsNoWorker(t *testing.T) {
	for _, compact := range []bool{false, true} {
		name := "between turns"
		if compact {
			name = "a compact"
		}
		t.Run(name, func(t *testing.T) {
			var sessions *actors.Dispatcher
			h, folds := heldFoldsWith(t, func(h *harness, d *Deps) {
				hubDispatchers(t, d)
				sessions = d.Dispatcher
			})
			if res, _ := h.turn("and now?"); res.Problem != nil {
				t.Fatalf("problem: %+v", res.Problem)
			}
			fold := wait(t, "the background fold", folds)
			sub := h.bus.Subscribe("c1", 64)
			defer sub.Close()
			var compacted <-chan any
			if compact {
				// The background fold lands first; the /compact folds after it.
				h.system.Root.Send(fold.from, &summarizer.Folded{ReqID: fold.f.ReqID, ChatID: fold.f.ChatID, OK: true, Summary: "the person asked questions"})
				if ev := wait(t, "the background fold's event", sub.C); ev.Type != chat.EventCompacted {
					t.Fatalf("event %s, want compacted", ev.Type)
				}
				compacted = h.resultOf("c1", &Compact{})
				fold = wait(t, "the compact's fold", folds)
			}
			// Every worker of the sessions' dispatcher but one is busy; the
			// fold's write must not take that one.
			busy, free := make(chan struct{}, actors.DefaultWorkerFloor), make(chan struct{})
			t.Cleanup(sync.OnceFunc(func() { close(free) }))
			for range actors.DefaultWorkerFloor - 1 {
				pid := h.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
					if _, ok := c.Message().(string); ok {
						busy <- struct{}{}
						<-free
					}
				}, actor.WithDispatcher(sessions)))
				h.system.Root.Send(pid, "hold")
				wait(t, "a busy worker", busy)
			}
			probe := h.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
				if _, ok := c.Message().(string); ok {
					c.Respond("pong")
				}
			}, actor.WithDispatcher(sessions)))
			held, release := h.holdSaves(t)
			h.system.Root.Send(fold.from, &summarizer.Folded{ReqID: fold.f.ReqID, ChatID: fold.f.ChatID, OK: true, Summary: "the person asked more"})
			wait(t, "the fold's write", held)
			if res, err := h.system.Root.RequestFuture(probe, "ping", patience).Result(); err != nil || res != "pong" {
				t.Fatalf("an actor on the sessions' dispatcher while a fold's write is held: %v, %v", res, err)
			}
			select {
			case ev := <-sub.C:
				t.Fatalf("%s told before the fold's write was stored", ev.Type)
			default:
			}
			release()
			if ev := wait(t, "the fold's event", sub.C); ev.Type != chat.EventCompacted {
				t.Fatalf("event %s, want compacted", ev.Type)
			}
			h.store.mu.Lock()
			h.store.saving = nil
			snap := h.store.snaps["c1"]
			h.store.mu.Unlock()
			if snap.FirstKeptSeq != foldTo(fold.f) || snap.Summary != "the person asked more" {
				t.Fatalf("stored first kept %d, summary %q; want %d and the fold's summary", snap.FirstKeptSeq, snap.Summary, foldTo(fold.f))
			}
			if compact {
				if c, ok := wait(t, "the compact's answer", compacted).(*Compacted); !ok || c.View.FirstKeptSeq != snap.FirstKeptSeq {
					t.Fatalf("the compact's answer: %#v", c)
				}
			}
			// The chat answers once the fold is done; nothing more was told.
			if _, ok := wait(t, "the chat's context", h.resultOf("c1", &GetContext{})).(*chat.ContextView); !ok {
				t.Fatal("no context after the fold")
			}
			select {
			case ev := <-sub.C:
				t.Fatalf("%s told after the fold", ev.Type)
			default:
			}
		})
	}
}

// TestASessionStoppedWhileAFoldIsWrittenStoresAndTellsIt: a stop that
// comes while a fold's write is held waits for it (settle), so the fold
// is stored and told before the session is gone.
func TestASessionStoppedWhileAFoldIsWrittenStoresAndTellsIt(t *testing.T) {
	h, folds := heldFolds(t)
	if res, _ := h.turn("and now?"); res.Problem != nil {
		t.Fatalf("problem: %+v", res.Problem)
	}
	fold := wait(t, "the background fold", folds)
	sub := h.bus.Subscribe("c1", 64)
	defer sub.Close()
	held, release := h.holdSaves(t)
	h.system.Root.Send(fold.from, &summarizer.Folded{ReqID: fold.f.ReqID, ChatID: fold.f.ChatID, OK: true, Summary: "the person asked questions"})
	wait(t, "the fold's write", held)
	stop := h.system.Root.StopFuture(h.registry)
	release()
	if err := stop.Wait(); err != nil {
		t.Fatal(err)
	}
	if ev := wait(t, "the fold's event", sub.C); ev.Type != chat.EventCompacted {
		t.Fatalf("event %s, want compacted", ev.Type)
	}
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	if snap := h.store.snaps["c1"]; snap.FirstKeptSeq != foldTo(fold.f) || snap.Summary != "the person asked questions" {
		t.Fatalf("stored first kept %d, summary %q; want %d and the fold's summary", snap.FirstKeptSeq, snap.Summary, foldTo(fold.f))
	}
}

// gatedModel answers as its client once gate is closed.
type gatedModel struct {
	providers.Client
	gate <-chan struct{}
}

func (g gatedModel) Stream(ctx context.Context, req providers.Request, on func(providers.Event)) (providers.Response, error) {
	<-g.gate
	return g.Client.Stream(ctx, req, on)
}

// TestAFoldWithNoSummariserIsStoredBeforeTheQueuedTurnStarts: a turn's
// background fold with no summariser to ask folds with the digest at
// once and saves off the mailbox; the turn queued behind starts only once
// that write is stored, and the fold is told between the two turns.
func TestAFoldWithNoSummariserIsStoredBeforeTheQueuedTurnStarts(t *testing.T) {
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	h := newHarnessWith(t, 4096, nil, func(h *harness, d *Deps) {
		one := d.Catalog.(oneModel)
		one.client = gatedModel{one.client, gate}
		d.Catalog = one
	}, reply("ok"), reply("fine"))
	t.Cleanup(release) // first: a failed test leaves no call held
	for i := range 9 {
		_, _ = h.store.Append(context.Background(), "c1",
			chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("words ", 100))},
			chat.Message{Role: chat.RoleAssistant, Content: strings.Repeat("answer ", 100)})
	}
	sub := h.bus.Subscribe("c1", 1024)
	defer sub.Close()
	if _, ok := wait(t, "the first turn's answer", h.resultOf("c1", &SubmitTurn{TurnID: "t-1", Message: chat.Message{Content: "and now?"}})).(*TurnAccepted); !ok {
		t.Fatal("the first turn was not accepted")
	}
	queued := make(chan struct{}, 1)
	second := h.resultOf("c1", &SubmitTurn{TurnID: "t-2", Message: chat.Message{Content: "and then?"}, Queued: func(bool) { queued <- struct{}{} }})
	wait(t, "the second turn queued", queued)
	release()
	if _, ok := wait(t, "the second turn's answer", second).(*TurnAccepted); !ok {
		t.Fatal("the second turn was not accepted")
	}
	var order []string
	for ev := range sub.C {
		if ev.Type == chat.EventCompacted || ev.Type == chat.EventTurnCompleted || ev.Type == chat.EventTurnStarted {
			order = append(order, ev.Type+" "+ev.TurnID)
		}
		if ev.Type == chat.EventTurnCompleted && ev.TurnID == "t-2" {
			break
		}
	}
	i := slices.Index(order, chat.EventTurnCompleted+" t-1")
	if i < 0 || !slices.Equal(order[i:i+2], []string{chat.EventTurnCompleted + " t-1", chat.EventCompacted + " "}) {
		t.Fatalf("events %q: want the fold told after the first turn completed, before anything of the second", order)
	}
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	if first := h.store.snaps["c1"].FirstKeptSeq; first <= 1 {
		t.Fatalf("stored first kept %d: the fold's boundary was not saved", first)
	}
}

// TestAFoldATurnMeetsIsStoredAndToldHoweverTheTurnEnds: a turn that ends
// with no answer to write, or whose answer's write fails, still stores
// the fold it met (its boundary in the snapshot, its activity) and tells
// it before the turn completes.
func TestAFoldATurnMeetsIsStoredAndToldHoweverTheTurnEnds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		replies   []providers.Response
		answering error
		problem   string
	}{
		{name: "the model fails", problem: chat.ProblemProvider},
		{name: "the answer's write fails", replies: []providers.Response{reply("ok")}, answering: errors.New("disk gone"), problem: chat.ProblemInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 4096, nil, tc.replies...)
			for i := range 12 {
				_, _ = h.store.Append(context.Background(), "c1",
					chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("words ", 300))},
					chat.Message{Role: chat.RoleAssistant, Content: strings.Repeat("answer ", 300)})
			}
			h.store.answering = func() error { return tc.answering }
			res, evs := h.turn("and now?")
			if res.Problem == nil || res.Problem.Kind != tc.problem {
				t.Fatalf("problem %+v, want %s", res.Problem, tc.problem)
			}
			told := slices.ContainsFunc(evs, func(ev eventbus.Event) bool { return ev.Type == chat.EventCompacted })
			h.store.mu.Lock()
			defer h.store.mu.Unlock()
			var stored []string
			for _, a := range h.store.acts["c1"] {
				stored = append(stored, a.Type)
			}
			if first := h.store.snaps["c1"].FirstKeptSeq; !told || !slices.Equal(stored, []string{chat.EventCompacted, chat.EventTurnProblem}) || first <= 1 {
				t.Fatalf("told %v, activity %v, first kept %d: want the fold told, stored before the problem, and its boundary saved", told, stored, first)
			}
		})
	}
}

// TestAFoldATurnMeetsRidesOnItsAnswerButACompactIsSyncedAlone: a fold the
// turn makes writes nothing of its own (a write there would hold the
// mailbox, and the turn, while it waited for the writer): the turn's
// answer saves the boundary with the snapshot and stores the fold's
// activity, in one write, and the fold is told before the turn ends. Two
// writes, as any turn. A fold someone waits for (Compact) is synced
// before its answer, its boundary and item in one write.
func TestAFoldATurnMeetsRidesOnItsAnswerButACompactIsSyncedAlone(t *testing.T) {
	h := newHarness(t, 4096, nil)
	for i := range 12 {
		_, _ = h.store.Append(context.Background(), "c1",
			chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("words ", 300))},
			chat.Message{Role: chat.RoleAssistant, Content: strings.Repeat("answer ", 300)})
	}
	h.model.replies = []providers.Response{reply("ok"), reply("fine")}
	counts := func() (writes, unsynced int) {
		h.store.mu.Lock()
		defer h.store.mu.Unlock()
		return h.store.writes, h.store.unsynced
	}
	w0, u0 := counts()
	res, evs := h.turn("and now?")
	if res.Problem != nil {
		t.Fatalf("problem: %+v", res.Problem)
	}
	folds := 0 // told before the turn completed: evs ends there
	for _, ev := range evs {
		if ev.Type == chat.EventCompacted {
			folds++
		}
	}
	w1, u1 := counts()
	if folds != 1 || w1-w0 != 2 || u1-u0 != 0 {
		t.Fatalf("%d folds, %d synced writes and %d unsynced; want 1 fold, 2 synced (the message; the answer with the snapshot and the fold's activity) and none unsynced", folds, w1-w0, u1-u0)
	}
	h.store.mu.Lock()
	acts := slices.Clone(h.store.acts["c1"])
	h.store.mu.Unlock()
	if len(acts) != 1 || acts[0].Type != chat.EventCompacted || acts[0].TurnID != res.TurnID || acts[0].AfterSeq != 25 {
		t.Fatalf("activity %+v, want the turn's fold after its message (seq 25)", acts)
	}
	if first := h.store.snaps["c1"].FirstKeptSeq; first <= 1 {
		t.Fatalf("the answer's snapshot does not hold the fold's boundary: first kept %d", first)
	}
	if res, _ := h.turn("more?"); res.Problem != nil {
		t.Fatalf("problem: %+v", res.Problem)
	}
	w2, u2 := counts()
	if _, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &Compact{}}, time.Minute).Result(); err != nil {
		t.Fatalf("compact: %v", err)
	}
	if w3, u3 := counts(); w3-w2 != 1 || u3 != u2 {
		t.Fatalf("compact: %d synced writes and %d unsynced, want 1 (the boundary with its activity) and 0", w3-w2, u3-u2)
	}
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	if acts := h.store.acts["c1"]; len(acts) != 2 || acts[0].Type != chat.EventCompacted || acts[1].Type != chat.EventCompacted {
		t.Fatalf("activity %+v, want the two folds", acts)
	}
}

// TestACompactDuringABackgroundFoldWaitsForItAndFolds: /compact asked
// while the fold a turn left running is still being written waits for
// that fold, then folds all but the newest turn, instead of being refused
// as busy (a person asks to compact just when a long chat's background
// fold runs). A second /compact while one waits is refused, saying why.
func TestACompactDuringABackgroundFoldWaitsForItAndFolds(t *testing.T) {
	h, folds := heldFolds(t)
	if res, _ := h.turn("and now?"); res.Problem != nil {
		t.Fatalf("problem: %+v", res.Problem)
	}
	if res, _ := h.turn("and then?"); res.Problem != nil {
		t.Fatalf("problem: %+v", res.Problem)
	}
	bg := <-folds // the background fold, held
	var newest int64
	h.store.mu.Lock()
	for _, m := range h.store.msgs["c1"] {
		if m.Role == chat.RoleUser {
			newest = m.Seq
		}
	}
	h.store.mu.Unlock()
	if foldTo(bg.f) >= newest {
		t.Fatalf("the background fold covers up to %d; the test needs it to leave turns before %d", foldTo(bg.f), newest)
	}
	compact := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &Compact{Focus: "the questions"}}, time.Minute)
	second, err := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &Compact{}}, time.Minute).Result()
	if err != nil {
		t.Fatalf("second compact: %v", err)
	}
	if r, ok := second.(*Rejected); !ok || !errors.Is(r.Err, ErrBusy) || !strings.Contains(r.Err.Error(), "summarise") {
		t.Fatalf("a second compact while one waits got %#v; want it refused as busy, saying a summary is being written", second)
	}
	h.system.Root.Send(bg.from, &summarizer.Folded{ReqID: bg.f.ReqID, ChatID: bg.f.ChatID, OK: true, Summary: "the person asked questions"})
	var a askedFold
	select {
	case a = <-folds:
	case <-time.After(time.Minute):
		t.Fatal("no fold was asked for the waiting compact")
	}
	if a.f.Focus != "the questions" || foldTo(a.f) != newest {
		t.Fatalf("the compact's fold has focus %q and ends at %d; want the focus and the newest turn %d", a.f.Focus, foldTo(a.f), newest)
	}
	h.system.Root.Send(a.from, &summarizer.Folded{ReqID: a.f.ReqID, ChatID: a.f.ChatID, OK: true, Summary: "the person asked questions, then more"})
	res, err := compact.Result()
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	c, ok := res.(*Compacted)
	if !ok || c.View.FirstKeptSeq != newest || c.View.Summary != "the person asked questions, then more" {
		t.Fatalf("compact answered %#v; want everything before seq %d folded, with its summary", res, newest)
	}
}

// askedFold is a fold the session asked for, and who to answer.
type askedFold struct {
	f    *summarizer.Fold
	from *actor.PID
}

// heldFolds is a 4K chat whose summariser holds every fold it is asked
// for (on folds, for the test to answer), with nine long exchanges stored:
// past the soft threshold after its next turn, not before it.
func heldFolds(t *testing.T) (*harness, <-chan askedFold) {
	t.Helper()
	return heldFoldsWith(t, func(*harness, *Deps) {})
}

// heldFoldsWith is heldFolds with its deps changed by set.
func heldFoldsWith(t *testing.T, set func(*harness, *Deps)) (*harness, <-chan askedFold) {
	t.Helper()
	folds := make(chan askedFold, 2)
	h := newHarnessWith(t, 4096, nil, func(h *harness, d *Deps) {
		d.Summarizer = h.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if f, ok := c.Message().(*summarizer.Fold); ok {
				folds <- askedFold{f, c.Sender()}
			}
		}))
		set(h, d)
	}, reply("ok"), reply("fine"))
	for i := range 9 {
		_, _ = h.store.Append(context.Background(), "c1",
			chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("words ", 100))},
			chat.Message{Role: chat.RoleAssistant, Content: strings.Repeat("answer ", 100)})
	}
	return h, folds
}

// foldTo is the first seq a fold leaves kept, read off its request id.
func foldTo(f *summarizer.Fold) int64 {
	var to int64
	_, _ = fmt.Sscanf(f.ReqID[strings.LastIndexByte(f.ReqID, '-')+1:], "%d", &to)
	return to
}

// TestAFoldSaysWhatItsSummaryCost: a fold no turn waits for (the one a
// turn leaves running in the background, a /compact) tells what its
// summarising requests cost, in its compacted event, its stored activity
// and /compact's answer: no turn's summary_usage carries it.
func TestAFoldSaysWhatItsSummaryCost(t *testing.T) {
	h, folds := heldFolds(t)
	if res, _ := h.turn("and now?"); res.Problem != nil {
		t.Fatalf("problem: %+v", res.Problem)
	}
	bg := <-folds
	sub := h.bus.Subscribe("c1", 16)
	defer sub.Close()
	cost := chat.Usage{InputTokens: 1200, OutputTokens: 150, CachedTokens: 1000}
	h.system.Root.Send(bg.from, &summarizer.Folded{ReqID: bg.f.ReqID, ChatID: bg.f.ChatID, OK: true, Summary: "the person asked questions", Usage: cost})
	ev := <-sub.C
	if c, ok := ev.Data.(chat.Compacted); ev.Type != chat.EventCompacted || !ok || c.Usage != cost {
		t.Fatalf("event %s %+v; want compacted with usage %+v", ev.Type, ev.Data, cost)
	}
	h.store.mu.Lock()
	acts := slices.Clone(h.store.acts["c1"])
	h.store.mu.Unlock()
	if len(acts) != 1 || !strings.Contains(string(acts[0].Data), `"usage":{"input_tokens":1200,"output_tokens":150,"cached_tokens":1000}`) {
		t.Fatalf("activity %+v; want the fold with its usage", acts)
	}

	if res, _ := h.turn("and then?"); res.Problem != nil {
		t.Fatalf("problem: %+v", res.Problem)
	}
	compact := h.system.Root.RequestFuture(h.registry, &Envelope{ChatID: "c1", Msg: &Compact{}}, time.Minute)
	a := <-folds
	more := chat.Usage{InputTokens: 300, OutputTokens: 40}
	h.system.Root.Send(a.from, &summarizer.Folded{ReqID: a.f.ReqID, ChatID: a.f.ChatID, OK: true, Summary: "and then more", Usage: more})
	res, err := compact.Result()
	if c, ok := res.(*Compacted); err != nil || !ok || c.View.Usage != more {
		t.Fatalf("compact answered %#v, %v; want its fold's usage %+v", res, err, more)
	}
}

// TestAStopWhileACompactsWriteIsHeldCutsTheTurnWaitingForIt: a turn waits
// for the fold a /compact started; that fold's write is held when the
// session is stopped (the daemon shuts down, the chat is deleted). The
// fold is stored and told and the /compact answered, as any held write is,
// but the turn makes no model call: it ends as a stop ends a turn, with
// the stop's problem and a cut mark stored after its message.
func TestAStopWhileACompactsWriteIsHeldCutsTheTurnWaitingForIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		problem string
		// stop stops the session while its fold's write is held, and
		// says when it has stopped; stopping and stopped say when the
		// session took in its Stopping and its Stopped.
		stop func(h *harness, stopping, stopped <-chan struct{}) <-chan struct{}
	}{
		{name: "shut down", problem: chat.ProblemShutdown, stop: func(h *harness, stopping, _ <-chan struct{}) <-chan struct{} {
			stop := h.system.Root.StopFuture(h.registry)
			// The session's stop (a system message) runs while the write
			// is held: it settles it.
			wait(h.t, "the session's stop", stopping)
			done := make(chan struct{})
			go func() { _ = stop.Wait(); close(done) }()
			return done
		}},
		{name: "deleted", problem: chat.ProblemDeleted, stop: func(h *harness, _, _ <-chan struct{}) <-chan struct{} {
			retired := h.system.Root.RequestFuture(h.registry, &Retire{ChatID: "c1"}, patience)
			// The registry has sent the session its retire once it answers
			// what was sent after it: the retire waits behind the write.
			if _, err := h.system.Root.RequestFuture(h.registry, &CountActive{}, patience).Result(); err != nil {
				h.t.Fatalf("count the sessions: %v", err)
			}
			done := make(chan struct{})
			go func() { _, _ = retired.Result(); close(done) }()
			return done
		}},
		{name: "moved", problem: chat.ProblemMoved, stop: func(h *harness, _, stopped <-chan struct{}) <-chan struct{} {
			h.system.Root.Send(h.registry, &Moved{ChatID: "c1"})
			if _, err := h.system.Root.RequestFuture(h.registry, &CountActive{}, patience).Result(); err != nil {
				h.t.Fatalf("count the sessions: %v", err)
			}
			return stopped // the poison behind the write stops it
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			folds, stopping, stopped := make(chan askedFold, 2), make(chan struct{}, 1), make(chan struct{}, 1)
			h := newHarnessWith(t, 4096, nil, func(h *harness, d *Deps) {
				d.onReceive = func(_ string, msg any) {
					switch msg.(type) {
					case *actor.Stopping:
						stopping <- struct{}{}
					case *actor.Stopped:
						stopped <- struct{}{}
					}
				}
				d.Summarizer = h.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
					if f, ok := c.Message().(*summarizer.Fold); ok {
						folds <- askedFold{f, c.Sender()}
					}
				}))
			}, reply("ok"))
			for i := range 12 {
				_, _ = h.store.Append(context.Background(), "c1",
					chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("words ", 300))},
					chat.Message{Role: chat.RoleAssistant, Content: strings.Repeat("answer ", 300)})
			}
			compacted := h.resultOf("c1", &Compact{})
			fold := wait(t, "the compact's fold", folds)
			sub := h.bus.Subscribe("c1", 1024)
			defer sub.Close()
			if _, ok := wait(t, "the turn's acceptance", h.resultOf("c1", &SubmitTurn{TurnID: "t-1", Message: chat.Message{Content: "and now?"}})).(*TurnAccepted); !ok {
				t.Fatal("the turn was not accepted")
			}
			// Accepted, the turn waits for the compact's fold: it needs one
			// to fit and that one runs.
			if n := len(h.model.requests()); n != 0 {
				t.Fatalf("%d model calls before the fold; the test needs the turn to wait for it", n)
			}
			held, release := h.holdSaves(t)
			h.system.Root.Send(fold.from, &summarizer.Folded{ReqID: fold.f.ReqID, ChatID: fold.f.ChatID, OK: true, Summary: "the person asked questions"})
			wait(t, "the fold's write", held)
			done := tc.stop(h, stopping, stopped)
			release()
			wait(t, "the stop", done)
			if c, ok := wait(t, "the compact's answer", compacted).(*Compacted); !ok || c.View.FirstKeptSeq != foldTo(fold.f) {
				t.Fatalf("the compact's answer: %#v; want the fold's boundary %d", c, foldTo(fold.f))
			}
			var order []string
			var end chat.TurnResult
			for end.TurnID == "" {
				ev := wait(t, fmt.Sprintf("the turn's end (so far %q)", order), sub.C)
				order = append(order, ev.Type)
				if ev.Type == chat.EventTurnCompleted {
					end = ev.Data.(chat.TurnResult)
				}
			}
			if !slices.Contains(order, chat.EventCompacted) || end.Problem == nil || end.Problem.Kind != tc.problem {
				t.Fatalf("events %q, turn ended with %+v; want the fold told and the turn ended with %s", order, end.Problem, tc.problem)
			}
			if n := len(h.model.requests()); n != 0 {
				t.Fatalf("%d model calls: the stopped turn was planned and sent after the fold", n)
			}
			h.store.mu.Lock()
			defer h.store.mu.Unlock()
			if snap := h.store.snaps["c1"]; snap.FirstKeptSeq != foldTo(fold.f) || snap.Summary != "the person asked questions" {
				t.Fatalf("stored first kept %d, summary %q; want %d and the fold's summary", snap.FirstKeptSeq, snap.Summary, foldTo(fold.f))
			}
			log := h.store.msgs["c1"]
			want := 2 // the turn's message, then the cut mark
			if tc.problem == chat.ProblemMoved {
				want = 1 // the chat is another node's to write: no mark
			}
			if last := log[len(log)-1]; log[len(log)-want].Content != "and now?" || want == 2 && (!last.Partial || last.Problem != end.Problem.Message) {
				t.Fatalf("the log ends with %+v; want the turn's message, then the cut mark unless the chat moved", log[len(log)-2:])
			}
		})
	}
}

// vanishing is a catalog of one model that is gone once gone is set.
type vanishing struct {
	oneModel
	gone *atomic.Bool
}

func (c vanishing) Resolve(ref string) (providers.Client, providers.ModelInfo, error) {
	if c.gone.Load() {
		return nil, providers.ModelInfo{}, fmt.Errorf("model %s is gone", ref)
	}
	return c.oneModel.Resolve(ref)
}

// TestACompactFoldedAtOnceWaitsForTheWriteOfTheTurnBeforeIt: a /compact
// that waited for a turn's fold folds the moment that fold lands, with
// the digest alone when the summariser is paused, in the handler where
// the turn, going on after the fold, ended and started its snapshot's
// write. The /compact's own write waits for that one (afterWait): the
// turn ends (its problem told, turn.completed), then the /compact is
// stored and answered. Two writes at once, the turn's continuation was
// dropped and it never ended.
func TestACompactFoldedAtOnceWaitsForTheWriteOfTheTurnBeforeIt(t *testing.T) {
	folds, gone := make(chan askedFold, 2), &atomic.Bool{}
	h := newHarnessWith(t, 4096, nil, func(h *harness, d *Deps) {
		d.Summarizer = h.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if f, ok := c.Message().(*summarizer.Fold); ok {
				folds <- askedFold{f, c.Sender()}
			}
		}))
		d.Catalog = vanishing{d.Catalog.(oneModel), gone}
	})
	for i := range 12 {
		_, _ = h.store.Append(context.Background(), "c1",
			chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("words ", 300))},
			chat.Message{Role: chat.RoleAssistant, Content: strings.Repeat("answer ", 300)})
	}
	// One more failed fold pauses the summariser: the /compact's fold is
	// then made at once, with the digest.
	h.store.snaps["c1"] = persistence.Snapshot{FoldFailures: maxFoldFailures - 1}
	sub := h.bus.Subscribe("c1", 1024)
	defer sub.Close()
	if _, ok := wait(t, "the turn's acceptance", h.resultOf("c1", &SubmitTurn{TurnID: "t-1", Message: chat.Message{Content: "and now?"}})).(*TurnAccepted); !ok {
		t.Fatal("the turn was not accepted")
	}
	fold := wait(t, "the turn's fold", folds)
	compacted := h.resultOf("c1", &Compact{})
	// Answered after the /compact: it waits for the turn's fold now.
	if _, ok := wait(t, "the chat's context", h.resultOf("c1", &GetContext{})).(*chat.ContextView); !ok {
		t.Fatal("no context")
	}
	// Once the fold lands the turn goes on, finds its model gone and ends,
	// writing its snapshot; the /compact folds in the same handler.
	gone.Store(true)
	h.system.Root.Send(fold.from, &summarizer.Folded{ReqID: fold.f.ReqID, ChatID: fold.f.ChatID, Digest: "the person asked questions", Err: "the summariser failed"})
	var order []string
	for len(order) < 3 {
		if ev := wait(t, fmt.Sprintf("event %d of the folds and the turn's end (so far %q)", len(order)+1, order), sub.C); ev.Type == chat.EventCompacted || ev.Type == chat.EventTurnCompleted {
			order = append(order, ev.Type)
		}
	}
	if want := []string{chat.EventCompacted, chat.EventTurnCompleted, chat.EventCompacted}; !slices.Equal(order, want) {
		t.Fatalf("events %q, want %q: the turn's fold, its end, then the /compact's fold", order, want)
	}
	c, ok := wait(t, "the compact's answer", compacted).(*Compacted)
	if !ok {
		t.Fatalf("the compact's answer: %#v", c)
	}
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	if first := h.store.snaps["c1"].FirstKeptSeq; first != c.View.FirstKeptSeq || first <= foldTo(fold.f) {
		t.Fatalf("stored first kept %d, the compact answered %d; want both past the turn's fold (%d)", first, c.View.FirstKeptSeq, foldTo(fold.f))
	}
}
