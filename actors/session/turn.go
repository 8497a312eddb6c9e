package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/telemetry"
)

// Bounds of one turn.
const (
	maxToolRounds = 100
	maxRetries    = 4
	retryBase     = 500 * time.Millisecond
	retryCap      = 20 * time.Second
	// maxContinues bounds how often a turn cut by its answer room continues.
	maxContinues     = 3
	contextFullSlack = 512
)

// turn is the state of the turn being answered.
type turn struct {
	id      string
	userSeq int64
	ctx     context.Context
	cancel  context.CancelFunc
	ended   func() // the SubmitTurn's Ended
	// log carries the turn's id and the id of the request that sent it.
	log zerolog.Logger

	call       int
	callCancel context.CancelFunc
	retries    int
	// timer is the turn's one timer: the retry's backoff, or the pause's
	// deadline.
	timer *time.Timer

	info      providers.ModelInfo
	ref       string
	maxTokens int // answer room of the last request; 0: computed
	estimate  int // anchored estimate of the in-flight request
	raw       int // its raw estimate, what calibration compares with the report
	// capped: the last request's answer room was the chat's
	// settings.max_output_tokens, not agentd's own.
	capped bool
	// baseRoom is maxTokens before growRoom grew it for the call after a
	// cut tool call (0: not grown); the room is back to it once that call
	// answers.
	baseRoom int

	turnState
	setup setup
	// plan is the request planned for the model call being made: planned
	// once per call, read by every step that needs it.
	plan *planned

	// The in-turn safety net: the turn's structured state, how many of its
	// messages it covers, and when the compaction being reported started
	// (zero once reported).
	lastReported int
	state        string
	stateCovers  int
	compactStart time.Time

	stored       []chat.Message
	usage        chat.Usage
	summaryUsage chat.Usage
	started      time.Time

	// What the turn waits for is timed from waitSince (enter); lastWord is
	// when the streaming call last sent a word (unix nanoseconds, written
	// by the call's goroutine); running names the tools of the round.
	waitSince time.Time
	lastWord  atomic.Int64
	running   []string
	progress  *time.Timer
	// words are what the call in flight has streamed, nil once its reply
	// is taken in: a stop keeps them in the mark it stores.
	words *streamed
	// announced, while set, is closed once turn.started and the message
	// are out: a call sent while the message was written waits for it to
	// publish a word.
	announced chan struct{}
	// folds are the background folds applied while the turn ran, not yet
	// stored or told: its last write carries them (foldsMet).
	folds []chat.Compacted
}

// storedMsg is the outcome of a turn's message's write: the message as
// stored when it was committed (with err if its sync failed: in the log,
// maybe not durable), else nil and err.
type storedMsg struct {
	stored []chat.Message
	err    error
}

// startNext starts the first queued turn unless one runs, once the
// tenant's memory map of the day is built (withMap).
func (s *session) startNext(ctx actor.Context) {
	if s.canStart() {
		s.withMap(ctx, s.startFirst)
	}
}

func (s *session) canStart() bool { return len(s.queue) > 0 && s.turn == nil && !s.stopping }

// popFirst takes the first queued turn out of the queue.
func (s *session) popFirst() pending {
	p := s.queue[0]
	s.queue = s.queue[1:]
	if s.deps.Metrics != nil {
		s.deps.Metrics.TurnsWaiting(-1)
	}
	return p
}

// startFirst starts the first queued turn. After a write that failed
// unseen (unsure), it reads what landed first (readTail), so the turn's
// message is numbered after it and its context holds it; a turn is
// refused when the log cannot be read.
func (s *session) startFirst(ctx actor.Context) {
	if !s.canStart() { // stopped while the map was built, or the log read
		return
	}
	if s.unsure {
		s.readTail(ctx, func(ctx actor.Context, err error) {
			if err != nil && s.canStart() {
				s.popFirst().refuse(ctx, err)
			}
			s.startFirst(ctx)
		})
		return
	}
	p := s.popFirst()
	if p.continues || p.msg.Continue || p.msg.Retry && s.endsUnanswered(p.msg.Message) {
		s.continueTurn(ctx, p)
		return
	}
	msg := p.msg.Message
	msg.Role = chat.RoleUser
	if msg.CreatedAt.IsZero() {
		msg.CreatedAt = time.Now().UTC() // as the store dates it, so both copies agree
	}
	kept, lastSeq := len(s.msgs), s.lastSeq
	msg.Seq = lastSeq + 1
	s.appendMsgs(msg)
	s.turn = s.newTurn(p, msg.Seq, []chat.Message{msg})
	// The message is written beside the turn's first step: that step is
	// planned, and its call sent, with the message numbered as the store
	// numbers it, the log's next seq (the session is its chat's one
	// writer). The rest waits for the write's commit and sync.
	store, chatID := s.deps.Store, s.id
	sg := &starting{p: p, kept: kept, lastSeq: lastSeq}
	await(s, ctx, func(done func(storedMsg)) {
		store.AppendThen(context.Background(), chatID, []chat.Message{msg}, func(stored []chat.Message, err error) {
			done(storedMsg{stored: stored, err: err})
		})
	}, func(ctx actor.Context, w storedMsg) { s.messageStored(ctx, sg, w) })
	// The write's outcome is taken in after this handler has returned (a
	// stopping session, whose await runs at once, starts no turn), so the
	// first step is known by then.
	sg.st, sg.warn = s.firstStep(ctx)
}

// newTurn is the turn p asks for, starting at the person's message userSeq
// with stored its messages so far. Nothing is said of the turn, and no
// word of its answer goes out, before it is announced (announce): for a
// turn with a message, once the message is durable.
func (s *session) newTurn(p pending, userSeq int64, stored []chat.Message) *turn {
	// The turn's context carries its span: what the turn's goroutines
	// trace under it are its children.
	tctx, cancel := context.WithTimeout(trace.ContextWithSpanContext(context.Background(), p.msg.Trace), s.deps.TurnTimeout)
	lc := s.log.With().Str("turn_id", p.msg.TurnID)
	if p.msg.RequestID != "" {
		lc = lc.Str("request_id", p.msg.RequestID)
	}
	return &turn{id: p.msg.TurnID, userSeq: userSeq, ctx: tctx, cancel: cancel, started: time.Now(), stored: stored, ended: p.msg.ended,
		setup: s.currentSetup(), log: lc.Logger(), announced: make(chan struct{})}
}

// continueTurn starts a turn that answers the chat as its log stands,
// storing nothing first: the log must end with what no answer follows
// (tool results whose turn failed before it answered them, or a person's
// message whose turn failed), else it is refused with ErrNothingToAnswer.
// The turn counts from the person's last message, as the one it continues
// did.
func (s *session) continueTurn(ctx actor.Context, p pending) {
	n := len(s.msgs)
	if n == 0 || s.msgs[n-1].Role == chat.RoleAssistant {
		p.refuse(ctx, ErrNothingToAnswer)
		s.startNext(ctx)
		return
	}
	userSeq, user := s.msgs[n-1].Seq, -1
	for i := n - 1; i >= 0; i-- {
		if s.msgs[i].Role == chat.RoleUser {
			userSeq, user = s.msgs[i].Seq, i
			break
		}
	}
	var stored []chat.Message
	if p.continues && user >= 0 {
		// The keyed message, landed unseen when its send failed, is the
		// turn's as if stored now: its events and answer hold it, as
		// those of the send that stored it would have.
		stored = []chat.Message{s.msgs[user]}
	}
	s.turn = s.newTurn(p, userSeq, stored)
	st, warn := s.firstStep(ctx)
	s.announce(ctx, p, st, warn)
}

// endsUnanswered reports whether the log ends with the person's message
// m: the same words, origin, images and attachments, and no answer after.
func (s *session) endsUnanswered(m chat.Message) bool {
	n := len(s.msgs)
	return n > 0 && s.msgs[n-1].Role == chat.RoleUser && sameWords(&s.msgs[n-1], &m)
}

// sameWords reports whether two of a person's messages say the same: the
// same words, origin, images and attachments.
func sameWords(a, b *chat.Message) bool {
	return a.Content == b.Content && a.Origin == b.Origin &&
		slices.EqualFunc(a.Images, b.Images, func(x, y chat.Image) bool { return x.MediaType == y.MediaType && bytes.Equal(x.Data, y.Data) }) &&
		slices.EqualFunc(a.Attachments, b.Attachments, func(x, y chat.Attachment) bool { return x.ID == y.ID })
}

// starting is a turn whose message is being written: its caller, its first
// step and what warns of it, and the session's log before the message.
type starting struct {
	p       pending
	st      decision
	warn    *chat.Problem
	kept    int
	lastSeq int64
}

// messageStored goes on with a turn once its message's write has ended:
// refused if the message is not durable, else accepted and announced.
func (s *session) messageStored(ctx actor.Context, sg *starting, w storedMsg) {
	if w.stored != nil && w.stored[0].Seq != s.turn.userSeq {
		// The log holds messages this session does not (a write that
		// failed may yet have landed): they are read in with the message,
		// so the turn's context holds them, and the turn goes on with the
		// message as stored, planned again.
		s.turn.log.Warn().Int64("want_seq", s.turn.userSeq).Int64("stored_seq", w.stored[0].Seq).Msg("the chat's log moved under its session")
		s.cancelCall()
		s.unappend(sg.kept, sg.lastSeq)
		s.turn.stored = w.stored // announced by the turn, not the read
		s.readTailTwice(ctx, func(ctx actor.Context, err error) {
			if err != nil {
				s.logUnread(ctx, sg, w, err)
				return
			}
			s.turn.userSeq, s.turn.stored, s.turn.rounds = w.stored[0].Seq, w.stored, 0
			var again *chat.Problem
			if sg.st, again = s.firstStep(ctx); sg.warn == nil {
				sg.warn = again
			}
			s.messageTaken(ctx, sg, w)
		})
		return
	}
	s.messageTaken(ctx, sg, w)
}

// readTailTwice is readTail read again once when it fails: a moment's
// fault of the store does not end a turn.
func (s *session) readTailTwice(ctx actor.Context, then func(ctx actor.Context, err error)) {
	s.readTail(ctx, func(ctx actor.Context, err error) {
		if err == nil {
			then(ctx, nil)
			return
		}
		s.logger().Warn().Err(err).Msg("read the chat's log again")
		s.readTail(ctx, then)
	})
}

// logUnread ends the turn whose message w stored after messages the
// session could not read: its model is not asked with a gap in its
// context. The message is durable and stays in the log; the session
// stays at the log before it, unsure, so the next turn, or the message
// sent again under its key (which then continues it), reads the gap and
// the message in and announces them.
func (s *session) logUnread(ctx actor.Context, sg *starting, w storedMsg, err error) {
	s.turn.log.Error().Err(err).Msg("read the messages the log holds before the turn's")
	s.unsure = true
	s.turn.userSeq, s.turn.stored = w.stored[0].Seq, nil
	// The store's error stays in the operator's log: it may name what the
	// tenant has no business reading.
	problem := &chat.Problem{Kind: chat.ProblemInternal, Message: "your message is stored, but this chat's log before it could not be read, " +
		"so the model was not asked; send the message again under its Idempotency-Key, or ask again, to retry"}
	sg.st, sg.warn = decision{take: func(ctx actor.Context) { s.endTurn(ctx, problem) }}, nil
	s.messageTaken(ctx, sg, w)
}

// messageTaken is messageStored once the session holds the log the
// message's write left.
func (s *session) messageTaken(ctx actor.Context, sg *starting, w storedMsg) {
	p, st, warn := sg.p, sg.st, sg.warn
	err := w.err
	if w.stored == nil {
		// Not committed: the message leaves s.msgs, as it is not in the
		// log. (Committed but maybe not durable, it stays in the log and
		// in s.msgs, unanswered, as the store holds it.)
		s.unappend(sg.kept, sg.lastSeq)
	}
	if err != nil {
		// The call's reply finds no turn.
		s.cancelCall()
		s.turn.cancel()
		s.turn = nil
		s.unsure = s.unsure || w.stored == nil
		p.refuse(ctx, fmt.Errorf("store message: %w", err))
		s.movedAway(ctx, err)
		s.startNext(ctx)
		return
	}
	s.announce(ctx, p, st, warn)
}

// announce tells a started turn: its caller, turn.started and the
// messages it stored first; then it takes the first step st, unless that
// is a model call, already sent.
func (s *session) announce(ctx actor.Context, p pending, st decision, warn *chat.Problem) {
	userSeq := s.turn.userSeq
	s.turn.log.Debug().Int64("user_seq", userSeq).Msg("turn started")
	ctx.Send(p.sender, &TurnAccepted{TurnID: p.msg.TurnID, UserSeq: userSeq})
	s.publish(chat.EventTurnStarted, p.msg.TurnID, map[string]int64{"user_seq": userSeq})
	for _, m := range s.turn.stored {
		if !slices.Contains(s.tailAnnounced, m.Seq) { // else readTail announced it
			s.publish(chat.EventMessage, p.msg.TurnID, m)
		}
	}
	s.tailAnnounced = nil
	s.armProgress(ctx)
	if warn != nil {
		s.publishInTurn(chat.EventTurnProblem, warn)
	}
	close(s.turn.announced)
	s.turn.announced = nil
	if st.call == nil {
		st.take(ctx)
	}
}

// firstStep decides a turn's first step and, for a model call, sends it
// (its words wait for the turn's announcement); warn is what the check of
// its instructions found, for the turn to publish once announced.
func (s *session) firstStep(ctx actor.Context) (st decision, warn *chat.Problem) {
	if st = s.decide(); st.call != nil {
		warn = s.instructionsProblem(s.turn)
		s.launch(ctx, st.call)
	}
	return st, warn
}

// cancelCall cancels the running turn's model call, if one is in flight.
func (s *session) cancelCall() {
	if s.turn.callCancel != nil {
		s.turn.callCancel()
		s.turn.callCancel = nil
	}
}

// unappend takes back what appendMsgs added after the first kept messages,
// the log's last seq being lastSeq again; the window's view is rebuilt when
// next needed.
func (s *session) unappend(kept int, lastSeq int64) {
	s.msgs, s.win, s.sent, s.lastSeq = s.msgs[:kept], nil, sentForm{}, lastSeq
}

func (s *session) appendMsgs(ms ...chat.Message) {
	s.msgs = append(s.msgs, ms...)
	if s.win != nil {
		s.win.Append(s.toWindow(ms)...)
	}
	s.lastSeq = ms[len(ms)-1].Seq
}

// prepare plans the next request, once the tenant's memory map of the day
// is built (withMap), and takes the step next decides: fold, preload
// tools, condense the turn, or call the model. A step that needs another
// actor returns; its reply prepares again.
func (s *session) prepare(ctx actor.Context) {
	t := s.turn
	s.withMap(ctx, func(ctx actor.Context) {
		if s.turn == t && !s.stopping { // else stopped while the map was built
			s.prepareNow(ctx)
		}
	})
}

// prepareNow is prepare with the map built.
func (s *session) prepareNow(ctx actor.Context) {
	if st := s.decide(); st.call != nil {
		if p := s.instructionsProblem(s.turn); p != nil {
			s.publishInTurn(chat.EventTurnProblem, p)
		}
		s.launch(ctx, st.call)
	} else {
		st.take(ctx)
	}
}

// decision is what decide chose: a model call with its request built, or
// another step to take.
type decision struct {
	call *modelCall
	take func(actor.Context)
}

// modelCall is a request built for a model.
type modelCall struct {
	client providers.Client
	req    providers.Request
	est    estimate
}

// decide is prepare's planning: it decides the step and, for a model call,
// builds the request. It says nothing and asks no one, so a turn's first
// decision is made while its message is written.
func (s *session) decide() decision {
	t := s.turn
	t.enter(phasePreparing)
	if s.snap.Model == "" {
		// A chat made before any model was known takes the default now.
		s.snap.Model = s.deps.Catalog.Default(s.deps.DefaultModel)
	}
	if s.snap.Model == "" {
		return decision{take: func(ctx actor.Context) {
			s.endTurn(ctx, &chat.Problem{Kind: chat.ProblemNoProvider, Message: "No model is available. " + s.noModelHelp()})
		}}
	}
	client, info, err := s.deps.Catalog.Resolve(s.snap.Model)
	if err != nil {
		return decision{take: func(ctx actor.Context) {
			s.endTurn(ctx, &chat.Problem{Kind: chat.ProblemNoProvider, Message: fmt.Sprintf("%v. %s", err, s.noModelHelp())})
		}}
	}
	t.info, t.ref = info, s.snap.Model
	t.plan = s.planFor(info, t.heal.harder(), t.setup)
	f := s.requestFacts(t)
	switch next(t.turnState, f) {
	case stepFold:
		return decision{take: func(ctx actor.Context) {
			t.enter(phaseFolding)
			s.startFold(ctx, f.foldTo, "", nil)
		}}
	case stepAwaitFold:
		return decision{take: func(ctx actor.Context) {
			t.enter(phaseFolding)
			s.awaitFold(ctx)
		}}
	case stepPreload:
		return decision{take: func(ctx actor.Context) {
			t.preloaded = true
			t.enter(phasePreloading)
			s.askNamedTools(ctx)
		}}
	case stepCondense:
		return decision{take: func(ctx actor.Context) {
			t.enter(phaseCondensing)
			s.startCondense(ctx)
		}}
	case stepPause:
		return decision{take: s.pause}
	default:
		req, est := s.buildRequest(t)
		return decision{call: &modelCall{client: client, req: req, est: est}}
	}
}

// requestFacts are the facts of the planned request that next reads.
func (s *session) requestFacts(t *turn) facts {
	f := facts{lean: t.plan.lean, canPreload: s.deps.ToolIndex != nil, foldTo: s.foldNeeded(t)}
	switch {
	case s.fold == nil:
	case s.fold.applied:
		f.fold = foldApplied
	default:
		f.fold = foldRunning
	}
	f.condense = s.condenseNeeded(t)
	return f
}

// instructionsProblem warns, on a lean turn's first call, of instructions
// too big for the window; nil if none.
func (s *session) instructionsProblem(t *turn) *chat.Problem {
	if t.call == 0 && t.plan.lean {
		if w := instructionsWarning(t.setup, t.info.Window); w != "" {
			return &chat.Problem{Kind: chat.ProblemInstructions, Message: w}
		}
	}
	return nil
}

// launch sends c's request to the model on the session's dispatcher; the
// answer comes back as a modelDone. Its words go out once the turn is
// announced (t.announced).
func (s *session) launch(ctx actor.Context, c *modelCall) {
	t := s.turn
	t.enter(phaseCalling)
	client, req, est := c.client, c.req, c.est
	t.estimate, t.raw = est.total, est.raw
	s.logRequest(chat.RequestLog{At: time.Now(), Estimate: est.total, Budget: est.budget.Transcript, Window: t.info.Window, Kind: map[bool]string{true: "heal", false: "turn"}[t.heal.pending()]})
	t.call++
	t.rounds++
	callCtx, cancel := context.WithCancelCause(t.ctx)
	t.callCancel = func() { cancel(context.Canceled) }
	self, root := ctx.Self(), ctx.ActorSystem().Root
	turnID, call, idleAfter := t.id, t.call, s.deps.ModelIdle
	tracer, info, lastWord, announced := telemetry.Tracer(s.deps.Traces), t.info, &t.lastWord, t.announced
	// The call's words are placed after the message last stored when it
	// started, read here: the session's fields are its mailbox's alone.
	bus, at := s.deps.Bus, s.event("", turnID, nil)
	publish := func(ev string, data map[string]string) {
		at.Type, at.Data = ev, data
		bus.Publish(at)
	}
	words := &streamed{}
	t.words = words
	s.work.GoOn(s.deps.Workers, func() {
		defer cancel(nil)
		callCtx, span := telemetry.StartModelCall(callCtx, tracer, info.Provider, info.ID)
		// A provider that sends nothing for idleAfter is cut off.
		watchdog := time.AfterFunc(idleAfter, func() { cancel(errModelIdle) })
		defer watchdog.Stop()
		// spoke: a word went out. A watcher has seen it, so a failure
		// after it is not tried again: the retry's answer would be stored
		// alone, not what the watcher was streamed. Reasoning alone is
		// taken back (thinking.reset) and tried again (modelFailed).
		spoke := false
		emit := func(ev providers.Event) {
			if ev.Kind == providers.EventUsage {
				// Counts are not words: a stream of them alone (Anthropic's
				// message_delta) is a silent model, and is cut off.
				return
			}
			if announced != nil {
				// The model has spoken: the wait for the message's sync
				// is agentd's, not the model's silence.
				watchdog.Stop()
				select {
				case <-announced:
					announced = nil
				case <-callCtx.Done():
					return // cancelled before its turn was announced: refused
				}
			}
			watchdog.Reset(idleAfter)
			lastWord.Store(time.Now().UnixNano())
			switch ev.Kind {
			case providers.EventText:
				spoke = true
				words.say(ev.Text, func() { publish(chat.EventMessageDelta, map[string]string{"text": ev.Text}) })
			case providers.EventThinking:
				words.think(ev.Text, func() { publish(chat.EventThinkingDelta, map[string]string{"text": ev.Text}) })
			}
		}
		resp, err := client.Stream(callCtx, req, emit)
		if err != nil && context.Cause(callCtx) == errModelIdle {
			err = fmt.Errorf("%w: %w", errModelIdle, err)
		}
		telemetry.EndModelCall(span, resp.Usage, resp.FinishReason, err)
		said, thought := words.text()
		root.Send(self, &modelDone{turnID: turnID, call: call, resp: resp, err: err, spoke: spoke, partial: said, thought: thought})
	})
}

// streamed is the text and the reasoning a model call has published,
// shared by the call's goroutine and a stop of its session. A word goes out
// and is kept under one lock, so what a stop takes is exactly what the
// client saw. Both are bounded by the answer's budget
// (providers.AnswerBudget), which the provider spends before it emits.
type streamed struct {
	mu      sync.Mutex
	said    strings.Builder
	thought strings.Builder
	taken   bool
}

// say keeps text and publishes it, unless a stop took the words already.
func (w *streamed) say(text string, publish func()) { w.keep(&w.said, text, publish) }

// think is say for the model's reasoning.
func (w *streamed) think(text string, publish func()) { w.keep(&w.thought, text, publish) }

func (w *streamed) keep(b *strings.Builder, text string, publish func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.taken {
		return
	}
	b.WriteString(text)
	publish()
}

// take is the words and the reasoning published so far; nothing goes out
// after it.
func (w *streamed) take() (said, thought string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.taken = true
	return w.said.String(), w.thought.String()
}

func (w *streamed) text() (said, thought string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.said.String(), w.thought.String()
}

func (s *session) noModelHelp() string {
	if s.deps.NoModelHelp == nil {
		return ""
	}
	return s.deps.NoModelHelp()
}

var errModelIdle = errors.New("the model sent nothing for too long")

func (s *session) modelDone(ctx actor.Context, m *modelDone) {
	t := s.turn
	if t == nil || m.turnID != t.id || m.call != t.call {
		return // a reply to a turn or call that has ended
	}
	t.callCancel, t.words = nil, nil // the reply holds its words now
	if m.err != nil {
		s.modelFailed(ctx, m)
		return
	}
	t.retries = 0
	u := m.resp.Usage
	t.usage = t.usage.Add(u)
	t.lastReported = u.InputTokens
	s.calibrate(t.raw, u.InputTokens)
	s.publish(chat.EventUsage, t.id, u)
	if lengthWithoutAnswer(m) && (s.contextFull(t, u) || (u.OutputTokens == 0 && u.InputTokens > 0)) {
		// The prompt filled the window and nothing came back (LM Studio,
		// llama.cpp with context shift off): a refusal for length in all
		// but name. No output at all says the server's window was full
		// even when it is smaller than the one believed.
		s.tooLong(ctx, &providers.Error{Provider: t.info.Provider, Status: 200, TooLong: true, Requested: u.InputTokens,
			Body: fmt.Sprintf("finish_reason length with no answer; %d input tokens on a window of %d", u.InputTokens, t.info.Window)})
		return
	}
	room := t.maxTokens // the room this reply was written in
	if t.baseRoom > 0 {
		// The grown room fit this call's input; the turn's later
		// requests are planned for the base room.
		t.maxTokens, t.baseRoom = t.baseRoom, 0
	}
	if t.heal.pending() {
		t.heal = t.heal.answered()
		if s.deps.Metrics != nil {
			s.deps.Metrics.Heal()
		}
		s.publishInTurn(chat.EventHealed, chat.Healed{Model: t.ref, WindowLearnt: t.info.Window, FirstKeptSeq: s.snap.FirstKeptSeq})
	}
	reply := m.resp.Message
	reply.Role, reply.Model = chat.RoleAssistant, t.ref
	reply.Seq = 0
	if reply.Content == "" && reply.Thinking == "" && len(reply.ToolCalls) == 0 {
		reply.Content = m.partial
	}
	if t.info.ToolsInWords {
		var calls []chat.ToolCall
		reply.Content, calls = parseWordsCalls(reply.Content, t.id, t.call)
		reply.ToolCalls = append(reply.ToolCalls, calls...)
	}
	f := facts{calls: len(reply.ToolCalls), lengthStop: m.resp.FinishReason == providers.FinishLength, capped: t.capped, contextFull: s.contextFull(t, u),
		refused: m.resp.FinishReason == providers.FinishFilter}
	cut := cutCall(reply.ToolCalls, f.lengthStop)
	f.cutCall = cut != nil
	t.awaiting = s.clientCalls(t.setup, reply.ToolCalls)
	st := next(t.turnState, f)
	if f.cutCall && (st == stepRunTools || st == stepPause) {
		// The call's result tells the model its arguments were cut; the
		// next call gets the room to write them whole, if the window has it.
		t.cutCalls++
		s.growRoom(t, u, room)
	}
	reply.MaxOutputReached = st == stepFinish && f.lengthStop && f.capped
	reply.Refused = f.refused
	switch st {
	case stepTooManyRounds:
		s.endTurn(ctx, &chat.Problem{Kind: chat.ProblemProvider, Message: fmt.Sprintf("the model asked for tools %d times in one turn; stopped", maxToolRounds)}, reply)
		return
	case stepCutAgain:
		p := &chat.Problem{Kind: chat.ProblemProvider, Message: fmt.Sprintf("the model's tool call was cut twice by the room it had to write it in (%d tokens); "+
			"its arguments do not fit one answer, so the turn stopped. Ask for smaller steps (a file written in parts), or use a model with a bigger window", room)}
		reply.Partial, reply.Problem = true, p.Message
		s.endTurn(ctx, p, reply)
		return
	case stepRunTools, stepPause, stepContinue:
		// The turn goes on: a synced write follows (the answer with the
		// snapshot, or the paused turn's snapshot) and covers this one.
		if !s.storeUnsynced(ctx, reply) {
			return
		}
	default:
		// The last answer of the turn lands with the snapshot: one sync.
		s.endTurn(ctx, nil, reply)
		return
	}
	if st == stepRunTools || st == stepPause {
		for _, c := range reply.ToolCalls {
			s.publish(chat.EventToolCall, t.id, c)
		}
	}
	switch st {
	case stepRunTools:
		s.runTools(ctx, slices.DeleteFunc(slices.Clone(reply.ToolCalls), func(c chat.ToolCall) bool { return slices.Contains(t.awaiting, c) }), cut)
	case stepPause:
		s.pause(ctx)
	case stepContinue:
		// Cut off by the answer room with room to spare: ask for the rest.
		t.continues++
		s.prepare(ctx)
	}
}

// growRoom gives the turn's next call twice the answer room a tool call
// was cut in, or what the window leaves past the reply's input, its cut
// call and contextFullSlack for the call's result, if that is less. Only
// that call: the turn's later requests are planned for the base room.
func (s *session) growRoom(t *turn, u chat.Usage, room int) {
	input, output := u.InputTokens, u.OutputTokens
	if input == 0 {
		input = t.estimate
	}
	if output == 0 {
		output = room
	}
	if free := t.info.Window - input - output - contextFullSlack; free > room {
		t.baseRoom, t.maxTokens = t.maxTokens, min(2*room, free)
	}
}

// cutCall is the call of calls the answer's length limit cut inside its
// arguments, or nil: the last call, when the answer stopped for length
// before its arguments were whole. An earlier call's broken arguments are
// the model's own, not the limit's.
func cutCall(calls []chat.ToolCall, lengthStop bool) *chat.ToolCall {
	if !lengthStop || len(calls) == 0 {
		return nil
	}
	last := &calls[len(calls)-1]
	if _, whole := providers.ToolArguments(last.Arguments); whole {
		return nil
	}
	return last
}

// lengthWithoutAnswer: the answer stopped for length before a word, a
// thought or a tool call.
func lengthWithoutAnswer(m *modelDone) bool {
	r := m.resp.Message
	return m.resp.FinishReason == providers.FinishLength && strings.TrimSpace(r.Content+m.partial) == "" &&
		r.Thinking == "" && len(r.ToolCalls) == 0
}

// contextFull is the context-full guard: when the input already fills the
// window (within contextFullSlack tokens), a length stop leaves no room to
// continue into, and asking again would spin forever.
func (s *session) contextFull(t *turn, u chat.Usage) bool {
	used := u.InputTokens + u.OutputTokens
	if u.InputTokens == 0 {
		used = t.estimate + u.OutputTokens
	}
	return used >= t.info.Window-contextFullSlack
}

// storeTurnMsgs makes messages of the running turn durable off the
// mailbox, held meanwhile (await: the application's tool results, or the
// error results of a pause left too long), announces them and runs then
// with stored; a failed write ends the turn first (stored false).
func (s *session) storeTurnMsgs(ctx actor.Context, msgs []chat.Message, then func(ctx actor.Context, stored bool)) {
	store, chatID := s.deps.Store, s.id
	await(s, ctx, func(done func(storedMsg)) {
		store.AppendThen(context.Background(), chatID, msgs, func(stored []chat.Message, err error) {
			done(storedMsg{stored: stored, err: err})
		})
	}, func(ctx actor.Context, w storedMsg) {
		if w.err != nil {
			s.unsure = true // what the session did not take in may have landed
			s.endTurn(ctx, s.storeProblem(ctx, w.err))
			then(ctx, false)
			return
		}
		s.announceTurnMsgs(w.stored)
		then(ctx, true)
	})
}

// storeUnsynced stores messages of the running turn that a later synced
// write of the turn covers (its tool calls and its tools' results), so a
// tool round adds no sync to the turn's path. A crash of the machine
// before that write may lose them: nothing about them was acknowledged,
// and a call left without its result is sent with a marked empty one
// (window.Assemble).
func (s *session) storeUnsynced(ctx actor.Context, msgs ...chat.Message) bool {
	return s.storeWith(ctx, s.deps.Store.AppendUnsynced, msgs)
}

func (s *session) storeWith(ctx actor.Context, store func(context.Context, string, ...chat.Message) ([]chat.Message, error), msgs []chat.Message) bool {
	stored, err := store(context.Background(), s.id, msgs...)
	if err != nil {
		s.unsure = true // the messages may have landed
		s.endTurn(ctx, s.storeProblem(ctx, err))
		return false
	}
	s.announceTurnMsgs(stored)
	return true
}

// announceTurnMsgs takes stored messages of the running turn in and
// publishes them.
func (s *session) announceTurnMsgs(stored []chat.Message) {
	t := s.turn
	s.appendMsgs(stored...)
	t.stored = append(t.stored, stored...)
	for _, m := range stored {
		s.publish(storedEvent(m), t.id, m)
	}
}

// storedEvent is the event that announces the stored message m.
func storedEvent(m chat.Message) string {
	if m.Role == chat.RoleTool {
		return chat.EventToolResult
	}
	return chat.EventMessage
}

func (s *session) modelFailed(ctx actor.Context, m *modelDone) {
	t := s.turn
	var pe *providers.Error
	isPE := errors.As(m.err, &pe)
	// A refusal before any word or thought heals; so does a server that cut the
	// prompt silently and answered (Ollama: status 200), whatever it said.
	if isPE && pe.TooLong && ((!m.spoke && m.thought == "") || pe.Status == 200) {
		// What the cut prompt's answer streamed is dropped: the watchers
		// drop it too, and the retry's, streamed next, is the one stored.
		if m.thought != "" {
			s.publish(chat.EventThinkingReset, t.id, map[string]string{"reason": m.err.Error()})
		}
		if m.partial != "" {
			s.publish(chat.EventMessageReset, t.id, map[string]string{"reason": m.err.Error()})
		}
		s.tooLong(ctx, pe)
		return
	}
	// Why a failure worth another try was not tried again, for the problem.
	gaveUp := ""
	if isPE && pe.Retryable && !m.spoke {
		delay := min(retryBase<<t.retries, retryCap)
		if pe.RetryAfter > 0 {
			delay = pe.RetryAfter
		}
		dl, ok := t.ctx.Deadline()
		switch {
		case t.retries >= maxRetries:
			gaveUp = fmt.Sprintf(" (given up after %d tries)", t.retries+1)
		case !ok || time.Until(dl) > delay:
			t.retries++
			if m.thought != "" {
				// Cut while it reasoned: the watchers drop what they were
				// shown of it, and the retry's reasoning, streamed next,
				// is the one stored.
				s.publish(chat.EventThinkingReset, t.id, map[string]string{"reason": m.err.Error()})
			}
			t.enter(phaseBackoff)
			root, self, id, call := ctx.ActorSystem().Root, ctx.Self(), t.id, t.call
			t.timer = time.AfterFunc(delay, func() { root.Send(self, &retryCall{turnID: id, call: call}) })
			return
		default:
			gaveUp = fmt.Sprintf(" (not tried again: the wait before the next try, %s, ends past the turn's deadline, limits.turn_timeout)", delay)
		}
	}
	problem := &chat.Problem{Kind: chat.ProblemProvider, Message: m.err.Error() + gaveUp}
	switch {
	case errors.Is(m.err, providers.ErrAnswerTooLarge):
		problem.Kind = chat.ProblemAnswerTooLarge
		problem.Message = fmt.Sprintf("the model's answer passed the most kept of one answer (limits.max_answer_bytes); it was cut there and the part before the cut is kept: %v", m.err)
	case errors.Is(m.err, errModelIdle) || errors.Is(m.err, context.DeadlineExceeded):
		problem.Kind = chat.ProblemTimeout
	case providers.Unreachable(m.err):
		problem.Kind = chat.ProblemNoProvider
		problem.Message = fmt.Sprintf("%s could not be reached (%v). Is its server running? agentd re-reads its providers by itself "+
			"(and at POST /v1/models/refresh); send the message again once it answers.", t.ref, m.err)
	}
	if m.partial != "" || m.thought != "" {
		// The reasoning is kept as a whole answer keeps it: unsigned, so
		// it is shown and stored but never replayed where a signature is
		// needed (Anthropic).
		kept := chat.Message{Role: chat.RoleAssistant, Content: m.partial, Thinking: m.thought, Model: t.ref, Partial: true, Problem: problem.Message}
		s.endTurn(ctx, problem, kept)
		return
	}
	s.endTurn(ctx, problem)
}

// tooLong heals a refusal for length once: learn the window it names, give
// the answer less room when the refusal counted it, else fold everything but
// this turn and shorten the turn harder; a second refusal is a problem.
func (s *session) tooLong(ctx actor.Context, pe *providers.Error) {
	t := s.turn
	sent := t.maxTokens
	if t.baseRoom > 0 {
		// Refused with the room grown for a cut call: the heal starts
		// from the base room.
		t.maxTokens, t.baseRoom = t.baseRoom, 0
	}
	if learnt := providers.LearntWindow(pe, t.estimate, sent, t.info.Window); learnt > 0 {
		if kept, err := s.deps.Catalog.Learn(context.Background(), t.ref, learnt); err != nil {
			s.logger().Warn().Err(err).Msg("learn window")
		} else {
			t.info.Window = kept
		}
	}
	if t.heal.healed() {
		s.endTurn(ctx, s.tooLongProblem(t))
		return
	}
	t.heal = healingHarder
	if pe.CountsOutput && pe.Window > 0 && pe.Requested > 0 && sent > 0 {
		input := pe.Requested - sent
		if room := pe.Window - input - 64; room >= 256 {
			t.maxTokens = room
			t.heal = healingRoom
		}
	}
	if t.heal.harder() && s.snap.FirstKeptSeq < t.userSeq && s.fold == nil {
		t.enter(phaseFolding)
		s.startFold(ctx, t.userSeq, "", nil)
		return
	}
	s.prepare(ctx)
}

func (s *session) tooLongProblem(t *turn) *chat.Problem {
	p := &chat.Problem{Kind: chat.ProblemTooLong, Message: fmt.Sprintf("this message does not fit %s's window of %d tokens, even with the earlier chat summarised", t.ref, t.info.Window)}
	if ref, w, ok := s.deps.Catalog.Bigger(t.info.Window); ok {
		p.NextStep = &chat.NextStep{Action: "switch-model", Model: ref, Window: w}
	} else {
		text := ""
		for _, m := range s.msgs {
			if m.Seq == t.userSeq {
				text = m.Content
			}
		}
		p.NextStep = &chat.NextStep{Action: "new-chat", Message: text}
	}
	return p
}

func (s *session) retry(ctx actor.Context, m *retryCall) {
	t := s.turn
	if t == nil || t.id != m.turnID || t.call != m.call {
		return
	}
	t.timer = nil
	s.prepare(ctx)
}

// endTurn ends the running turn with problem (nil: it went well). The
// turn's last messages, final, are stored in one transaction with the
// snapshot; a turn that cannot store them ends with that problem instead.
func (s *session) endTurn(ctx actor.Context, problem *chat.Problem, final ...chat.Message) {
	t := s.turn
	if t == nil {
		return
	}
	s.snap.Paused = nil
	if len(final) > 0 {
		snap, acts := s.snap, s.foldsMet(t)
		store, chatID := s.deps.Store, s.id
		await(s, ctx, func(done func(answerStored)) {
			store.AppendWithSnapshotThen(context.Background(), chatID, func(last int64) persistence.Snapshot {
				snap.LastSeqSent = last
				return snap
			}, acts, final, func(stored []chat.Message, err error) { done(answerStored{stored: stored, err: err}) })
		}, func(ctx actor.Context, a answerStored) {
			if a.err != nil {
				s.unsure = true // the answer may have landed
				s.endTurn(ctx, s.storeProblem(ctx, a.err))
				return
			}
			snap.Stored()
			s.snap = snap
			s.foldsStored(t)
			s.announceTurnMsgs(a.stored)
			if problem == nil {
				s.closeTurn(ctx, problem)
				return
			}
			// The problem is stored after the answer, which it follows.
			s.writeThen(ctx, func(bg context.Context) error {
				pa, err := activity(chat.EventTurnProblem, t.id, problem)
				if err == nil {
					_, err = store.AppendActivity(bg, chatID, pa)
				}
				return err
			}, func(ctx actor.Context, err error) {
				if err != nil {
					s.logger().Error().Err(err).Msg("store the turn's problem")
				}
				s.closeTurn(ctx, problem)
			})
		})
		return
	}
	s.snap.LastSeqSent = s.lastSeq
	if s.moved { // another node writes the chat now
		s.foldsStored(t)
		s.closeTurn(ctx, problem)
		return
	}
	var acts []persistence.Activity
	if pa, err := activity(chat.EventTurnProblem, t.id, problem); problem != nil && err == nil {
		acts = append(acts, pa)
	}
	s.saveTurnSnapshot(ctx, t, "save snapshot", func(ctx actor.Context) { s.closeTurn(ctx, problem) }, acts...)
}

// saveTurnSnapshot saves the snapshot, the folds t met and acts in one
// write, off the mailbox (writeThen), tells the folds once it is stored
// and runs then. A failed write is logged as what; the turn goes on.
func (s *session) saveTurnSnapshot(ctx actor.Context, t *turn, what string, then func(ctx actor.Context), acts ...persistence.Activity) {
	snap, store, id := s.snap, s.deps.Store, s.id
	acts = append(s.foldsMet(t), acts...)
	s.writeThen(ctx, func(bg context.Context) error { return store.SaveSnapshot(bg, id, snap, acts...) }, func(ctx actor.Context, err error) {
		if err != nil {
			s.logger().Error().Err(err).Msg(what)
		} else {
			snap.Stored()
			s.snap = snap
		}
		s.foldsStored(t)
		then(ctx)
	})
}

// answerStored is the outcome of a turn's last write: its answer with the
// snapshot.
type answerStored struct {
	stored []chat.Message
	err    error
}

// storeProblem is the problem a turn whose answer could not be stored
// ends with: the chat moved to another node, or the store failed.
func (s *session) storeProblem(ctx actor.Context, err error) *chat.Problem {
	if s.movedAway(ctx, err) {
		return movedProblem()
	}
	return &chat.Problem{Kind: chat.ProblemInternal, Message: "could not store the answer: " + err.Error()}
}

// movedProblem is the problem of a turn cut because its chat moved to
// another node.
func movedProblem() *chat.Problem {
	return &chat.Problem{Kind: chat.ProblemMoved, Message: "this chat moved to another agentd node while it answered; the answer was not stored (ask again)"}
}

// closeTurn stops what the turn still runs and announces its end; its state,
// and its problem, are already stored.
func (s *session) closeTurn(ctx actor.Context, problem *chat.Problem) {
	t := s.turn
	// Gone before anyone hears of its end: a panic from here on (a
	// counter) restarts a session that holds no turn to cut again.
	s.turn = nil
	t.halt()
	res := chat.TurnResult{TurnID: t.id, Status: chat.StatusCompleted, Messages: t.stored, Usage: t.usage, SummaryUsage: t.summaryUsage, Problem: problem}
	if n := len(t.stored); n > 0 {
		res.MaxOutputReached, res.Refused = t.stored[n-1].MaxOutputReached, t.stored[n-1].Refused
	}
	// Logged before anyone hears the turn is over, so whoever reads the
	// log after the end finds its line; counted after, so a panic in the
	// counter cannot keep the end from its caller.
	ev := t.log.Debug()
	if failed(problem) {
		ev = t.log.Warn().Str("error", problem.Message)
	}
	ev = ev.Int("rounds", t.rounds).Int("input_tokens", t.usage.InputTokens).Int("output_tokens", t.usage.OutputTokens).
		Dur("took", time.Since(t.started))
	if problem != nil {
		ev = ev.Str("problem", problem.Kind)
	}
	ev.Msg("turn ended")
	if problem != nil {
		s.publish(chat.EventTurnProblem, t.id, problem)
	}
	// Free the tenant's slot before anyone hears the turn is over.
	t.ended()
	s.publish(chat.EventTurnCompleted, t.id, res)
	if s.deps.Metrics != nil {
		kind := ""
		if problem != nil {
			kind = problem.Kind
		}
		s.deps.Metrics.TurnDone(kind, t.usage)
	}
	if s.stopping {
		return
	}
	// A fold with nothing to ask (no summariser, or paused) saves now,
	// the mailbox held: the next turn starts once it is stored.
	s.maybeBackgroundFold(ctx)
	s.afterWait(ctx, s.startNext)
}

// failed reports whether a turn ending with problem failed, as its
// client sees it, for a reason the operator's log must say at the default
// level (a provider refusing or out of reach, a timeout, a store error):
// not a stop, a deletion or a move, which are no failure of the turn.
func failed(problem *chat.Problem) bool {
	if problem == nil {
		return false
	}
	switch problem.Kind {
	case chat.ProblemShutdown, chat.ProblemDeleted, chat.ProblemMoved:
		return false
	}
	return true
}

// halt stops what the turn still runs: its call, its timers, its work.
func (t *turn) halt() {
	if t.callCancel != nil {
		t.callCancel()
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	if t.progress != nil {
		t.progress.Stop()
	}
	t.cancel()
}

// learnFrom fires the person's own words of folded messages at the learner.
func (s *session) learnFrom(ctx actor.Context, folded []chat.Message) {
	if s.deps.Learner == nil || len(folded) == 0 {
		return
	}
	ctx.Send(s.deps.Learner, &learner.Learn{
		ChatID: s.id, Tenant: s.meta.Tenant, Words: learner.PersonWords(folded, 0),
		ThroughSeq: folded[len(folded)-1].Seq, Model: s.snap.Model, Factor: s.snap.Factor,
		Untrusted: s.snap.Untrusted, NoAuto: s.meta.NoAutoRemember, Shared: s.meta.Shared,
	})
}
