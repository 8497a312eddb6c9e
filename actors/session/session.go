package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/eventbus"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/tools"
	"github.com/agentd/agentd/window"
)

// maxRequestLog is how many recent requests the context view keeps (in
// the snapshot, so they survive passivation and restarts).
const maxRequestLog = 50

// session is the actor of one chat.
type session struct {
	deps *Deps
	id   string
	log  zerolog.Logger
	// work owns the goroutines of model calls, tools and asks; stop
	// cancels the turn and waits for them (actors.Group's stop rule).
	work actors.Group

	meta persistence.Chat
	snap persistence.Snapshot
	msgs []chat.Message // every message with seq >= snap.FirstKeptSeq
	// win is msgs as the arithmetic reads them (view), nil until needed.
	win *window.Kept
	// sent is the last request's messages (fromWindow), dropped with win.
	sent       sentForm
	summaryEst summaryEstimate
	// cuts is the last cut of a turn too long for its window, which the
	// turn's later plans reuse.
	cuts    window.CutMemo
	cost    toolsCost
	lastSeq int64
	loadErr error
	// unsure: a write of messages (a person's, added ones, a turn's
	// answer or tool results) failed without the session taking in what
	// it stored (Postgres: a COMMIT whose answer a cut lost may have
	// landed), so the log may hold messages after lastSeq; findKey, the
	// next turn and the next add read them first (readTail).
	unsure bool
	// tailAnnounced are the seqs readTail announced since the last turn
	// was: a turn that continues from a message it took in does not
	// announce it again.
	tailAnnounced []int64

	queue []pending
	turn  *turn
	fold  *foldState
	// compactWaiting is a /compact asked while another fold ran; it folds
	// once that fold lands.
	compactWaiting *waitingCompact
	// awaiting is the write the mailbox is held for (await.go), and
	// mailbox the session's own process, which holds and resumes it.
	awaiting *awaiting
	mailbox  actor.Process

	lastActive time.Time
	stopTick   func()
	stopping   bool
	// moved: another node claimed the chat, or its grain left this node;
	// this session only refuses until the registry stops it.
	moved bool
}

type pending struct {
	msg    *SubmitTurn
	sender *actor.PID
	// continues: msg's message is the log's last, unanswered, under its
	// idempotency key; the turn answers it as stored.
	continues bool
}

// refuse answers a turn that will not run.
func (p pending) refuse(ctx actor.Context, err error) {
	ctx.Send(p.sender, &Rejected{Err: err})
	p.msg.ended()
}

var _ actor.Actor = (*session)(nil)

// props are the props of chat chatID's session; once v says the registry
// gave it up, its next instance is the stand-in that refuses.
func props(deps *Deps, chatID string, v *verdict) *actor.Props {
	log := deps.Log.With().Str("component", "session").Str("chat_id", chatID).Logger()
	return actors.Props(log, func() actor.Actor {
		if err := v.err(); err != nil {
			return &given{err: err}
		}
		return &session{deps: deps, id: chatID, log: log}
	}, actors.OnDispatcher(deps.Dispatcher))
}

func (s *session) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Restarting, *actor.Stopping, *retire:
		defer s.endAnyway(ctx)
	}
	if _, tick := ctx.Message().(*idleTick); !tick {
		s.lastActive = time.Now()
	}
	if s.deps.onReceive != nil {
		s.deps.onReceive(s.id, ctx.Message())
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.start(ctx)
	case *actor.Stopping, *actor.Restarting:
		// Restarting: this instance panicked; it ends what it owns so no
		// caller waits on it, and the new instance reloads the chat.
		s.stop(ctx, s.ending(m))
	case *leftNode:
		s.moved = true
	case *retire:
		s.stop(ctx, s.ending(m))
		ctx.Stop(ctx.Self())
	case *actor.Stopped:
	case *idleTick:
		s.checkIdle(ctx)
	case *Wake:
	case *SubmitTurn:
		s.submit(ctx, m)
	case *GetContext:
		sender := ctx.Sender()
		s.withMap(ctx, func(ctx actor.Context) { s.respondTo(ctx, sender, s.contextView()) })
	case *Patch:
		s.patch(ctx, m)
	case *Compact:
		s.compact(ctx, m)
	case *modelDone:
		s.modelDone(ctx, m)
	case *toolsDone:
		s.toolsDone(ctx, m)
	case *retryCall:
		s.retry(ctx, m)
	case *toolsNamed:
		s.toolsNamed(ctx, m)
	case *summarizer.Folded:
		s.folded(ctx, m)
	case *summarizer.Condensed:
		s.condensed(ctx, m)
	case *foldOverdue:
		s.overdue(ctx, m)
	case *foldResumed:
		s.foldResumedFor(ctx, m)
	case *CancelQueued:
		s.cancelQueued(ctx, m)
	case *SubmitToolResults:
		s.toolResults(ctx, m)
	case *AddMessages:
		s.addMessages(ctx, m)
	case *pauseOverdue:
		s.overduePause(ctx, m)
	case *progressTick:
		s.progressed(ctx, m)
	case *toolsReady:
		s.toolsAreReady(ctx, m)
	default:
		s.logger().Warn().Str("type", typeName(m)).Msg("session: unknown message")
	}
}

// logger is the running turn's logger (its request id and turn id on
// every line), or the session's between turns.
func (s *session) logger() *zerolog.Logger {
	if s.turn != nil {
		return &s.turn.log
	}
	return &s.log
}

func typeName(v any) string { return reflect.TypeOf(v).String() }

// respond answers the current request unless the session failed to load.
func (s *session) respond(ctx actor.Context, reply any) { s.respondTo(ctx, ctx.Sender(), reply) }

// respondTo answers a request whose sender was taken before a wait: a
// stop that settles the wait runs its continuation on another message.
func (s *session) respondTo(ctx actor.Context, sender *actor.PID, reply any) {
	if s.loadErr != nil {
		reply = &Rejected{Err: s.loadErr}
	}
	if sender != nil {
		ctx.Send(sender, reply)
	}
}

// start reads the chat off the mailbox, holding the mailbox until it has
// (await): 10,000 chats woken at once parked a worker each on Badger's reads.
func (s *session) start(ctx actor.Context) {
	store, id := s.deps.Store, s.id
	await(s, ctx, onWorker(s, func() chatRead { return readChat(store, id) }), func(ctx actor.Context, r chatRead) {
		if err := s.load(r); err != nil {
			s.loadErr = err
			s.logger().Error().Err(err).Msg("load chat")
		} else {
			s.resumePaused(ctx)
		}
	})
	s.armIdle(ctx)
}

// armIdle schedules the next idle check. A timer, not a goroutine, waits,
// so an idle chat costs no goroutine; protoactor's ReceiveTimeout is avoided
// for its data race (STYLE.md).
func (s *session) armIdle(ctx actor.Context) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	t := time.AfterFunc(max(s.deps.IdleAfter/2, 10*time.Millisecond), func() { root.Send(self, &idleTick{}) })
	s.stopTick = func() { t.Stop() }
}

// chatRead is what a session reads of its chat when it starts.
type chatRead struct {
	meta persistence.Chat
	snap persistence.Snapshot
	msgs []chat.Message
	err  error
}

// readChat reads the chat's record, snapshot and kept messages.
func readChat(store Store, id string) chatRead {
	bg := context.Background()
	meta, err := store.Chat(bg, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return chatRead{err: ErrNotFound}
	}
	if err != nil {
		return chatRead{err: err}
	}
	// Claim before reading: what this session reads is then all another
	// node's old session of the chat will ever have written.
	if err := store.Claim(bg, id); err != nil {
		return chatRead{err: err}
	}
	snap, _, err := store.LoadSnapshot(bg, id)
	if err != nil {
		return chatRead{err: err}
	}
	if snap.Model == "" {
		snap.Model = meta.Model
	}
	if snap.FirstKeptSeq == 0 {
		snap.FirstKeptSeq = 1
	}
	msgs, err := store.Messages(bg, id, snap.FirstKeptSeq, 0)
	if err != nil {
		return chatRead{err: err}
	}
	return chatRead{meta: meta, snap: snap, msgs: msgs}
}

// load takes in what readChat read.
func (s *session) load(r chatRead) error {
	if r.err != nil {
		return r.err
	}
	s.meta, s.snap = r.meta, r.snap
	s.msgs, s.win, s.sent, s.cuts = r.msgs, nil, sentForm{}, window.CutMemo{}
	if len(r.msgs) > 0 {
		s.lastSeq = r.msgs[len(r.msgs)-1].Seq
	} else {
		s.lastSeq = r.snap.FirstKeptSeq - 1
	}
	return nil
}

// ending is why msg (Stopping, Restarting or retire) ends the chat's
// work: the running turn's problem, and what waiting callers are refused
// with.
func (s *session) ending(msg any) ending {
	switch msg.(type) {
	case *actor.Restarting:
		return ending{&chat.Problem{Kind: chat.ProblemInternal, Message: "an internal error ended this turn; send the message again to continue"}, ErrFailed}
	case *retire:
		return ending{&chat.Problem{Kind: chat.ProblemDeleted, Message: "this chat was deleted"}, ErrNotFound}
	}
	if s.moved {
		return ending{movedProblem(), ErrMoved}
	}
	return ending{&chat.Problem{Kind: chat.ProblemShutdown, Message: "agentd stopped while this turn ran; send the message again to continue"}, ErrStopping}
}

// ending: why the running turn ends, and what the waiting ones are
// refused with.
type ending struct {
	why    *chat.Problem
	refuse error
}

// stopWait bounds how long a stopping session waits for its cancelled calls.
const stopWait = 10 * time.Second

// stop ends the running turn and refuses the waiting ones, as e says.
func (s *session) stop(ctx actor.Context, e ending) {
	why := e.why
	s.stopping = true
	s.settle()
	if s.stopTick != nil {
		s.stopTick()
	}
	if t := s.turn; t != nil && t.phase == phasePaused {
		if why.Kind == chat.ProblemDeleted {
			// Its chat goes with it: whoever waits for its end (a watcher
			// that saw it pause) hears it ended so, before chat.deleted.
			// Nothing is stored, as the chat is being deleted.
			s.closeTurn(ctx, why)
		} else {
			// A paused turn is durable: the next start resumes it.
			t.halt()
			t.ended()
			s.turn = nil
		}
	}
	if s.turn != nil {
		// Mark the cut in the log, after the words of the answer already
		// streamed and with its reasoning streamed, as a whole answer
		// keeps it, so the person reads back what they saw and the next
		// turn sees it (unless the chat moved: it is another node's to
		// write now).
		content, thought := "[This answer was cut short: "+why.Message+"]", ""
		if w := s.turn.words; w != nil {
			var said string
			if said, thought = w.take(); said != "" {
				content = said + "\n\n" + content
			}
		}
		mark := chat.Message{Role: chat.RoleAssistant, Model: s.turn.ref, Partial: true, Problem: why.Message, Content: content, Thinking: thought}
		if !s.moved {
			if _, err := s.deps.Store.Append(context.Background(), s.id, mark); err != nil {
				s.logger().Error().Err(err).Msg("mark the cut turn")
			}
		}
		s.endTurn(ctx, why)
	}
	s.waitWork()
	s.refuseWaiting(ctx, e.refuse)
}

// endAnyway is deferred around Stopping, Restarting and retire: a panic
// there is logged and stop's part left undone is dropped (abandon), so
// the instance is still replaced, or stopped. Escalated, such a panic
// keeps the old instance (protoactor makes the new one, or finishes the
// stop, only once the handler returns), and the supervisor's next restart
// ran the same panicking handler on it: past the bound the stop panicked
// too, and the child's failure count, reset by that stop, started over.
func (s *session) endAnyway(ctx actor.Context) {
	r := recover()
	if r == nil {
		return
	}
	s.log.Error().Str("panic", fmt.Sprint(r)).Str("message", typeName(ctx.Message())).Str("stack", string(debug.Stack())).
		Msg("session: ending the chat's work panicked; its turn is dropped")
	s.abandon(ctx, s.ending(ctx.Message()))
	if _, ok := ctx.Message().(*retire); ok {
		ctx.Stop(ctx.Self())
	}
}

// abandon is stop when stop itself panicked: the turn's work is cancelled
// and waited for, its watchers hear it ended with e's problem, and the
// callers waiting are refused. Nothing is stored, which may be what
// panicked.
func (s *session) abandon(ctx actor.Context, e ending) {
	s.stopping = true
	if s.stopTick != nil {
		s.stopTick()
	}
	if t := s.turn; t != nil {
		s.turn = nil
		t.halt()
		t.ended()
		s.deps.Bus.PublishMust(s.event(chat.EventTurnCompleted, t.id, chat.TurnResult{TurnID: t.id, Status: chat.StatusCompleted, Messages: t.stored, Problem: e.why}))
	}
	s.waitWork()
	s.refuseWaiting(ctx, e.refuse)
}

// waitWork waits, at most stopWait, for the cancelled calls to return.
func (s *session) waitWork() {
	if !s.work.Wait(stopWait) {
		s.logger().Warn().Dur("waited", stopWait).Msg("session: calls still in flight at stop")
	}
}

// refuseWaiting refuses the queued turns, and the /compacts waiting for
// the fold in flight, with refuse.
func (s *session) refuseWaiting(ctx actor.Context, refuse error) {
	for _, p := range s.queue {
		p.refuse(ctx, refuse)
	}
	if f := s.fold; f != nil && f.replyTo != nil {
		// A /compact waiting for the fold in flight is told now: the fold's
		// answer will find no session to land in.
		ctx.Send(f.replyTo, &Rejected{Err: refuse})
		f.replyTo = nil
	}
	if w := s.compactWaiting; w != nil {
		ctx.Send(w.replyTo, &Rejected{Err: refuse})
		s.compactWaiting = nil
	}
	if s.deps.Metrics != nil {
		s.deps.Metrics.TurnsWaiting(-len(s.queue))
	}
	s.queue = nil
}

// movedAway reports whether a store error says another node claimed the
// chat. The first time, the session gives the chat up: it refuses the
// turns waiting and asks the registry to stop it (as an idle one), so the
// next message starts a session that claims the chat again and reads the
// log as the other node left it. Its own state is never written again.
func (s *session) movedAway(ctx actor.Context, err error) bool {
	if !errors.Is(err, persistence.ErrChatMoved) {
		return false
	}
	if !s.moved {
		s.moved = true
		s.logger().Warn().Err(err).Msg("the chat moved to another node; this session stops")
		for _, p := range s.queue {
			p.refuse(ctx, ErrMoved)
		}
		if w := s.compactWaiting; w != nil {
			ctx.Send(w.replyTo, &Rejected{Err: ErrMoved})
			s.compactWaiting = nil
		}
		if s.deps.Metrics != nil {
			s.deps.Metrics.TurnsWaiting(-len(s.queue))
		}
		s.queue = nil
		ctx.Send(ctx.Parent(), &idle{chatID: s.id})
	}
	return true
}

func (s *session) checkIdle(ctx actor.Context) {
	busy := s.turn != nil || len(s.queue) > 0 || s.fold != nil
	if !busy && s.deps.Bus.Watchers(s.id) == 0 && time.Since(s.lastActive) >= s.deps.IdleAfter {
		ctx.Send(ctx.Parent(), &idle{chatID: s.id})
		return
	}
	if !busy && time.Since(s.lastActive) >= s.deps.IdleAfter/2 {
		s.win, s.sent, s.cuts = nil, sentForm{}, window.CutMemo{} // an idle chat keeps only its stored messages
	}
	s.armIdle(ctx)
}

// publish tells the chat's watchers of ev. An activity event is stored
// before (publishInTurn, or the awaited write that carries it).
func (s *session) publish(ev string, turnID string, data any) {
	e := s.event(ev, turnID, data)
	if ev == chat.EventMessageDelta || ev == chat.EventThinkingDelta || ev == chat.EventFoldWaiting {
		s.deps.Bus.Publish(e)
		return
	}
	s.deps.Bus.PublishMust(e)
}

// publishInTurn is publish for an event of the running turn before its end:
// its activity item takes no sync of its own, which would be one more on
// the turn's path, and the synced write that ends the turn (the answer with
// the snapshot, a pause, a problem's snapshot) covers it.
func (s *session) publishInTurn(ev string, data any) {
	if chat.Activity(ev) {
		s.record(ev, s.turn.id, data)
	}
	s.publish(ev, s.turn.id, data)
}

// event is the chat's event ev, placed after its last message.
func (s *session) event(ev string, turnID string, data any) eventbus.Event {
	return eventbus.Event{Type: ev, ChatID: s.id, TurnID: turnID, Seq: s.lastSeq, Data: data}
}

// record stores an event a person may need later in the chat's activity
// log, before anyone hears of it, for the next synced write to cover. A
// failure is logged: the event itself still goes out, and the turn goes on.
func (s *session) record(ev, turnID string, data any) {
	a, err := activity(ev, turnID, data)
	if err == nil {
		_, err = s.deps.Store.AppendActivityUnsynced(context.Background(), s.id, a)
	}
	if err != nil {
		s.log.Error().Err(err).Str("event", ev).Msg("store activity")
	}
}

// activity is the activity item of an event.
func activity(ev, turnID string, data any) (persistence.Activity, error) {
	raw, err := json.Marshal(data)
	return persistence.Activity{Type: ev, TurnID: turnID, Data: raw}, err
}

func (s *session) submit(ctx actor.Context, m *SubmitTurn) {
	p := pending{msg: m, sender: ctx.Sender()}
	switch {
	case s.refused(ctx, p):
	case m.Message.IdempotencyKey != "" && !m.KeyUnsought:
		s.submitKeyed(ctx, p)
	default:
		s.admit(ctx, p)
	}
}

// refused refuses p when the session takes no turn now (it failed to
// load, stops, or its chat moved), and reports whether it did.
func (s *session) refused(ctx actor.Context, p pending) bool {
	var err error
	switch {
	case s.loadErr != nil:
		err = s.loadErr
	case s.stopping:
		err = ErrStopping
	case s.moved:
		err = ErrMoved
	default:
		return false
	}
	p.refuse(ctx, err)
	return true
}

// admit queues p's turn, or refuses it: a message marked Unpaused while a
// turn waits for the application's calls, one past limits.turns_per_chat,
// or one its sender's Charge refuses.
func (s *session) admit(ctx actor.Context, p pending) {
	m := p.msg
	waiting := len(s.queue)
	if s.turn != nil {
		waiting++
	}
	switch {
	case m.Unpaused && s.turn != nil && s.turn.phase == phasePaused:
		p.refuse(ctx, &PausedError{Calls: callIDList(s.turn.awaiting)})
		return
	case waiting >= s.deps.TurnsPerChat:
		p.refuse(ctx, fmt.Errorf("%w (%d waiting or running; the limit is %d)", ErrBusy, waiting, s.deps.TurnsPerChat))
		return
	}
	if m.Charge != nil {
		if err := m.Charge(); err != nil {
			p.refuse(ctx, err)
			return
		}
	}
	s.queue = append(s.queue, p)
	if s.deps.Metrics != nil {
		s.deps.Metrics.TurnsWaiting(1)
	}
	switch {
	case s.turn == nil:
		s.startNext(ctx)
	case m.Queued != nil:
		m.Queued(s.turn.phase == phasePaused)
	}
}

// refuseUnpaused refuses the queued messages marked Unpaused: the turn
// before them paused on the calls, which they must not wait for.
func (s *session) refuseUnpaused(ctx actor.Context, calls []chat.ToolCall) {
	kept := s.queue[:0]
	for _, p := range s.queue {
		if !p.msg.Unpaused {
			kept = append(kept, p)
			continue
		}
		p.refuse(ctx, &PausedError{Calls: callIDList(calls)})
		if s.deps.Metrics != nil {
			s.deps.Metrics.TurnsWaiting(-1)
		}
	}
	clear(s.queue[len(kept):])
	s.queue = kept
}

// cancelQueued drops a turn whose caller went away before it started;
// once started, a turn goes on.
func (s *session) cancelQueued(ctx actor.Context, m *CancelQueued) {
	for i, p := range s.queue {
		if p.msg.TurnID == m.TurnID {
			p.refuse(ctx, ErrCancelled)
			s.queue = append(s.queue[:i:i], s.queue[i+1:]...)
			if s.deps.Metrics != nil {
				s.deps.Metrics.TurnsWaiting(-1)
			}
			return
		}
	}
}

// patch reads the chat's record and writes the patched record and
// snapshot off the mailbox, holding it meanwhile (await): a worker of the
// sessions' dispatcher parked on two synced writes is one fewer for every
// other chat.
func (s *session) patch(ctx actor.Context, m *Patch) {
	if s.loadErr != nil {
		s.respond(ctx, nil)
		return
	}
	store, id, sender := s.deps.Store, s.id, ctx.Sender()
	// The store keeps the record's title from the first message and its
	// last seq: start from what it holds, not from s.meta.
	type read struct {
		meta persistence.Chat
		err  error
	}
	await(s, ctx, onWorker(s, func() read {
		meta, err := store.Chat(context.Background(), id)
		return read{meta, err}
	}), func(ctx actor.Context, r read) {
		if r.err != nil {
			s.respondTo(ctx, sender, &Rejected{Err: r.err})
			return
		}
		meta, snap, err := s.patched(m, r.meta)
		if err != nil {
			s.respondTo(ctx, sender, &Rejected{Err: err})
			return
		}
		s.writeThen(ctx, func(bg context.Context) error {
			if err := store.UpdateChat(bg, meta); err != nil {
				return err
			}
			return store.SaveSnapshot(bg, id, snap)
		}, func(ctx actor.Context, err error) {
			if err != nil {
				s.respondTo(ctx, sender, &Rejected{Err: err})
				return
			}
			snap.Stored()
			s.meta, s.snap = meta, snap
			s.respondTo(ctx, sender, &Patched{})
		})
	})
}

// patched is the chat's record and snapshot with m applied, or why m is
// refused.
func (s *session) patched(m *Patch, meta persistence.Chat) (persistence.Chat, persistence.Snapshot, error) {
	snap := s.snap
	if m.Model != nil && *m.Model != snap.Model {
		if _, _, err := s.deps.Catalog.Resolve(*m.Model); err != nil {
			return meta, snap, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		meta.Model, snap.Model = *m.Model, *m.Model
		// The last report was counted by another tokenizer.
		c := s.calibration()
		c.Unanchor()
		snap.LastReported, snap.LastEstimate = c.LastReported, c.LastEstimate
	}
	if m.Title != nil {
		meta.Title = *m.Title
	}
	if m.NoAutoRemember != nil {
		meta.NoAutoRemember = *m.NoAutoRemember
	}
	if err := s.patchSetup(m, &meta); errors.Is(err, tools.ErrUnknownToolset) {
		return meta, snap, err
	} else if err != nil {
		return meta, snap, fmt.Errorf("%w: %w", ErrInvalid, err) // a *chat.SettingError still names its field
	}
	return meta, snap, nil
}

// addBatchBytes and addBatchCount bound one transaction of an
// AddMessages: a long history is stored in several, each synced, so none
// outgrows Badger's batch (15% of the 32 MiB memtable, about 4.8 MB,
// counting every entry's key and encoded value). Bytes alone do not bound
// it: a stored message costs about 150 bytes beyond its texts, so tens of
// thousands of one-letter messages overflow a batch that 2 MiB of text
// fits. 4096 entries cost at most about 0.6 MB beyond their texts.
const (
	addBatchBytes = 2 << 20
	addBatchCount = 4096
)

// storedText is what of m's size grows with what a client sends: its
// texts, its reasoning and its calls' arguments.
func storedText(m chat.Message) int {
	n := len(m.Content) + len(m.Thinking) + len(m.ThinkingSignature)
	for _, c := range m.ToolCalls {
		n += len(c.Arguments)
	}
	return n
}

// addMessages stores messages between turns and announces them, after
// what a write that failed unseen landed (whole). Messages under a key
// (AddMessages.Key) the chat's log holds are not stored again (addedAgain).
func (s *session) addMessages(ctx actor.Context, m *AddMessages) {
	switch {
	case s.loadErr != nil || len(m.Messages) == 0:
		s.respond(ctx, &Added{})
		return
	case s.stopping:
		ctx.Respond(&Rejected{Err: ErrStopping})
		return
	case s.turn != nil || len(s.queue) > 0:
		ctx.Respond(&Rejected{Err: fmt.Errorf("%w: a turn of this chat runs or waits; add messages once it ends", ErrBusy)})
		return
	}
	sender, msgs := ctx.Sender(), m.Messages
	if m.Key == "" {
		s.whole(ctx, func(ctx actor.Context, err error) {
			switch {
			case s.stopping:
				ctx.Send(sender, &Rejected{Err: ErrStopping})
			case err != nil:
				ctx.Send(sender, &Rejected{Err: err})
			default:
				s.storeAdded(ctx, sender, nil, msgs, m.Charge)
			}
		})
		return
	}
	s.findKey(ctx, m.Key, func(ctx actor.Context, f keyFound) {
		if f.held { // no turn continues an add
			s.announceTaken(*f.m)
		}
		switch {
		case s.stopping:
			ctx.Send(sender, &Rejected{Err: ErrStopping})
		case f.err != nil:
			ctx.Send(sender, &Rejected{Err: fmt.Errorf("find the idempotency key: %w", f.err)})
		case f.m != nil:
			s.addedAgain(ctx, sender, msgs, f)
		default:
			msgs = slices.Clone(msgs)
			msgs[0].IdempotencyKey, msgs[0].KeyedCount = m.Key, len(msgs)
			s.storeAdded(ctx, sender, nil, msgs, m.Charge)
		}
	})
}

// addedAgain answers msgs added again under the key the log holds on f.m,
// from the log's messages from f.m on: the kept ones, or, when f.m was
// folded, those the store reads.
func (s *session) addedAgain(ctx actor.Context, sender *actor.PID, msgs []chat.Message, f keyFound) {
	if f.m.Seq >= s.snap.FirstKeptSeq {
		s.answerAdded(ctx, sender, msgs, append([]chat.Message{*f.m}, f.after...), true)
		return
	}
	store, id, from := s.deps.Store, s.id, f.m.Seq
	await(s, ctx, onWorker(s, func() tail {
		ms, err := store.Messages(context.Background(), id, from, from+int64(len(msgs))-1)
		return tail{msgs: ms, err: err}
	}), func(ctx actor.Context, t tail) {
		if t.err != nil {
			ctx.Send(sender, &Rejected{Err: fmt.Errorf("read the messages under the idempotency key: %w", t.err)})
			return
		}
		s.answerAdded(ctx, sender, msgs, t.msgs, false)
	})
}

// answerAdded answers msgs added again under the key of log[0], log being
// the chat's log from there (all of it after, when ends). All stored, in
// order: *Answered. An add whose later batches failed, which the log ends
// with, is completed: the rest is stored after it, and *Added holds them
// all. Otherwise it is refused ErrKeyReused, never answered as whole: the
// messages stored under the key are others, an add cut partway that the
// chat went on after, or an add of another length (log[0].KeyedCount; a
// whole add the log ends with is no cut one to complete with more).
func (s *session) answerAdded(ctx actor.Context, sender *actor.PID, msgs, log []chat.Message, ends bool) {
	if len(log) > 0 && log[0].KeyedCount > 0 && log[0].KeyedCount != len(msgs) {
		ctx.Send(sender, &Rejected{Err: fmt.Errorf("%w: the chat stored an add of %d messages under it, not %d", ErrKeyReused, log[0].KeyedCount, len(msgs))})
		return
	}
	n := 0
	for n < len(msgs) && n < len(log) && chat.SameAdded(&log[n], &msgs[n]) {
		n++
	}
	switch {
	case n == len(msgs):
		ctx.Send(sender, &Answered{UserSeq: log[0].Seq})
	case n > 0 && n == len(log) && ends:
		// Not charged again: the add was, whole, when first sent.
		s.storeAdded(ctx, sender, slices.Clone(log), msgs[n:], nil)
	default:
		ctx.Send(sender, &Rejected{Err: fmt.Errorf("%w: the chat stored %d of these %d messages under it, then others", ErrKeyReused, n, len(msgs))})
	}
}

// storeAdded stores msgs in batches, once charge (if any) allows them,
// announces them, and answers sender with them stored after done (the
// part of the add stored before). The batches are written off the mailbox
// while it is held (await): a long history is several synced writes, and
// a worker of the sessions' dispatcher parked on them is one fewer for
// every other chat. What was stored is kept and announced even when a
// later batch fails; the add sent again under its key stores the rest
// (answerAdded).
func (s *session) storeAdded(ctx actor.Context, sender *actor.PID, done, msgs []chat.Message, charge func() error) {
	if charge != nil {
		if err := charge(); err != nil {
			ctx.Send(sender, &Rejected{Err: err})
			return
		}
	}
	store, id := s.deps.Store, s.id
	type added struct {
		stored []chat.Message
		err    error
	}
	await(s, ctx, onWorker(s, func() added {
		var out []chat.Message
		for rest := msgs; len(rest) > 0; {
			n, size := 0, 0
			for n < len(rest) && (n == 0 || n < addBatchCount && size+storedText(rest[n]) <= addBatchBytes) {
				size += storedText(rest[n])
				n++
			}
			stored, err := store.Append(context.Background(), id, rest[:n]...)
			if err != nil {
				return added{out, fmt.Errorf("store messages (%d of %d stored): %w", len(out), len(msgs), err)}
			}
			out, rest = append(out, stored...), rest[n:]
		}
		return added{out, nil}
	}), func(ctx actor.Context, r added) {
		if len(r.stored) > 0 { // none when the first batch failed
			s.appendMsgs(r.stored...)
		}
		for _, st := range r.stored {
			s.publish(chat.EventMessage, "", st)
		}
		if r.err != nil {
			s.unsure = true // the failed batch may have landed
			s.respondTo(ctx, sender, &Rejected{Err: r.err})
			return
		}
		s.respondTo(ctx, sender, &Added{Messages: append(done, r.stored...)})
	})
}

// logRequest keeps r as the newest of the last requests; the snapshot the
// turn saves writes the new ones.
func (s *session) logRequest(r chat.RequestLog) { s.snap.LogRequest(r, maxRequestLog) }
