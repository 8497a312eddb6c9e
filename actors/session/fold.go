package session

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/window"
)

// After this many failed folds in a row a chat stops asking the summariser
// for foldPause; its turns still leave the request, with a digest.
const (
	maxFoldFailures = 3
	foldPause       = 10 * time.Minute
)

// foldState is the one fold in flight for this chat.
type foldState struct {
	reqID    string
	from, to int64 // folds seqs from..to-1; to becomes the first kept seq
	folded   []chat.Message
	replyTo  *actor.PID // a Compact request waiting, or nil
	started  time.Time
	// applied: the boundary already moved (the turn could not wait); the
	// summary is still to come.
	applied bool
	timer   *time.Timer
	// usage is what the summariser's answer cost, told with the fold.
	usage chat.Usage
}

// foldOverdue fires when a turn has waited Deps.FoldWait for its fold.
type foldOverdue struct{ reqID string }

// foldResumed takes turnID's next step after the fold it waited for, once
// what the mailbox took in while the fold's own write was held has run
// (resumeAfterFold).
type foldResumed struct{ turnID string }

// startFold asks the summariser to fold every message before seq to. The
// boundary is pinned now, so a turn that lands meanwhile is never covered.
func (s *session) startFold(ctx actor.Context, to int64, focus string, replyTo *actor.PID) {
	cut := slices.IndexFunc(s.msgs, func(m chat.Message) bool { return m.Seq >= to })
	if cut < 0 {
		cut = len(s.msgs)
	}
	// One copy of its size: grown by append, a fold of hundreds of
	// messages was copied about twice over, on the mailbox.
	folded := append([]chat.Message(nil), s.msgs[:cut]...)
	f := &foldState{reqID: fmt.Sprintf("%s/%d-%d", s.id, s.snap.FirstKeptSeq, to), from: s.snap.FirstKeptSeq, to: to, folded: folded, replyTo: replyTo, started: time.Now()}
	s.fold = f
	req := &summarizer.Fold{ReqID: f.reqID, ChatID: s.id, Tenant: s.meta.Tenant, Model: s.snap.Model, Summary: s.snap.Summary, Digest: s.snap.Digest, Turns: folded, Focus: focus, Factor: s.snap.Factor,
		Prefix: s.foldPrefix(to)}
	if s.turn != nil && s.turn.phase == phaseFolding {
		// The turn waits for this fold: its span is the fold's parent.
		req.Trace = trace.SpanContextFromContext(s.turn.ctx)
	}
	if s.deps.Summarizer == nil || time.Now().Before(s.snap.FoldPaused) {
		// Not asking: fold with the digest alone, now, or once the write
		// this handler already awaits has run its continuation
		// (afterWait). That write's snapshot is a copy taken before the
		// fold (a turn's end, after the fold a /compact waited for), and
		// its continuation puts the copy back: applied meanwhile, the
		// fold's boundary and digest were lost, and the messages it took
		// out of the window with them.
		s.afterWait(ctx, func(ctx actor.Context) {
			s.folded(ctx, &summarizer.Folded{ReqID: f.reqID, ChatID: s.id, Digest: summarizer.Digest(s.snap.Digest, folded), Err: "summariser paused after repeated failures"})
		})
		return
	}
	ctx.Request(s.deps.Summarizer, req)
	if s.turn != nil && s.turn.phase == phaseFolding {
		s.awaitFold(ctx)
	}
}

// foldPrefix is the chat's request as it was last sent, up to seq to: the
// summariser asks the chat's own model after it, from the provider's prompt
// cache. Nil when there is nothing before to, or lines are asked for.
func (s *session) foldPrefix(to int64) *summarizer.Prefix {
	if s.deps.FoldAsLines {
		return nil
	}
	_, info, err := s.deps.Catalog.Resolve(s.snap.Model)
	if err != nil || info.ToolsInWords {
		return nil
	}
	p := s.planFor(info, false, s.currentSetup())
	sent := window.AssembleInto(assembled.Get(0), window.AssembleInput{Msgs: p.msgs, Plan: window.PlanResult{FirstKept: s.snap.FirstKeptSeq, Stale: p.budget.Stale}, Summary: s.snap.Summary, Digest: s.snap.Digest})
	defer assembled.Put(sent)
	cut := slices.IndexFunc(sent, func(m window.Msg) bool { return m.Seq >= to })
	if cut < 0 {
		cut = len(sent)
	}
	if cut == 0 {
		return nil
	}
	return &summarizer.Prefix{System: p.system, Tools: p.specs, Messages: mergeUserRuns(s.fromWindow(sent[:cut])),
		Tokens: s.calibration().Estimate(p.budget.System + p.budget.Tools + window.EstimateMsgs(sent[:cut])), CacheKey: s.id}
}

// awaitFold bounds the running turn's wait for the fold in flight, whether
// the turn started it or found a background fold running.
func (s *session) awaitFold(ctx actor.Context) {
	f := s.fold
	if f == nil || f.timer != nil || f.applied {
		return
	}
	root, self := ctx.ActorSystem().Root, ctx.Self()
	f.timer = time.AfterFunc(s.deps.FoldWait, func() { root.Send(self, &foldOverdue{reqID: f.reqID}) })
}

// overdue moves the boundary of a fold the turn can no longer wait for,
// with the digest of what it folds; the summary is applied when it comes.
func (s *session) overdue(ctx actor.Context, m *foldOverdue) {
	f := s.fold
	if f == nil || f.reqID != m.reqID || f.applied {
		return
	}
	f.applied = true
	s.snap.Digest = summarizer.Digest(s.snap.Digest, f.folded)
	s.moveBoundary(ctx, f, func(ctx actor.Context, held bool) {
		s.logger().Warn().Dur("waited", s.deps.FoldWait).Msg("the summariser is slow; folded with the digest, the summary follows")
		s.resumeAfterFold(ctx, held)
	})
}

// folded applies a fold's result: the boundary moves whether or not a
// summary came back (a summary is a help, never a gate).
func (s *session) folded(ctx actor.Context, m *summarizer.Folded) {
	f := s.fold
	if f == nil || m.ReqID != f.reqID {
		return
	}
	s.fold = nil
	if f.timer != nil {
		f.timer.Stop()
	}
	f.usage = m.Usage
	if f.applied {
		// The boundary moved already; only a summary is still news.
		if m.OK {
			s.snap.Summary, s.snap.SummaryModel, s.snap.Digest = m.Summary, m.Model, ""
			s.saveAndAnnounce(ctx, f, func(ctx actor.Context, _ chat.Compacted, _ bool) { s.compactAfterFold(ctx) })
			return
		}
		s.compactAfterFold(ctx)
		return
	}
	if m.OK {
		s.snap.Summary, s.snap.SummaryModel, s.snap.Digest = m.Summary, m.Model, ""
		s.snap.FoldFailures = 0
	} else {
		s.snap.Digest = m.Digest
		s.snap.FoldFailures++
		if s.snap.FoldFailures >= maxFoldFailures {
			s.snap.FoldFailures = 0
			s.snap.FoldPaused = time.Now().Add(foldPause)
		}
		s.logger().Warn().Str("error", m.Err).Msg("fold without a summary; the digest keeps the facts")
	}
	if s.deps.Metrics != nil {
		s.deps.Metrics.Fold(m.OK)
	}
	if s.turn != nil {
		s.turn.summaryUsage = s.turn.summaryUsage.Add(m.Usage)
	}
	s.moveBoundary(ctx, f, func(ctx actor.Context, held bool) {
		s.resumeAfterFold(ctx, held)
		s.compactAfterFold(ctx)
	})
}

// moveBoundary makes f.to the first kept seq, durably, announces it,
// hands the folded words to the learner and runs then: once the fold's
// write is stored, when it has one of its own (saveAndAnnounce; held says
// so).
func (s *session) moveBoundary(ctx actor.Context, f *foldState, then func(ctx actor.Context, held bool)) {
	s.snap.FirstKeptSeq = f.to
	kept := 0
	for kept < len(s.msgs) && s.msgs[kept].Seq < f.to {
		kept++
	}
	s.msgs = append([]chat.Message(nil), s.msgs[kept:]...)
	if s.win != nil {
		s.win.DropBefore(f.to)
	}
	s.dropUncalledTools()
	s.saveAndAnnounce(ctx, f, func(ctx actor.Context, view chat.Compacted, held bool) {
		s.learnFrom(ctx, f.folded)
		if f.replyTo != nil {
			ctx.Send(f.replyTo, &Compacted{View: view})
		}
		then(ctx, held)
	})
}

// saveAndAnnounce saves the snapshot, publishes where the model's
// word-for-word memory starts and runs then with what it published, and
// whether the fold's own write held the mailbox (held). A
// fold someone waits for (POST /compact) is synced before it is told. A
// background fold writes nothing of its own while a turn runs (unless
// paused): a write would hold the turn's next step while it waited for
// the writer, and the turn's last write saves the snapshot anyway, so that
// write carries the fold's activity too, and the fold is told once it is
// stored (foldsMet); then runs at once. Between turns a background fold's
// snapshot and activity are one write with no sync of its own: the next
// synced write covers them. What a crash before then loses is a boundary
// the log rebuilds by folding again. A fold's own write runs on a worker,
// the mailbox held (writeThen), and then once it is stored: a store that
// hangs (a frozen Postgres, a stalled disk) holds this chat, never a
// worker of the sessions' dispatcher. No write is awaited when a fold
// lands: its message runs with the mailbox free, and a fold made at once
// waits for the write its handler awaits (startFold).
func (s *session) saveAndAnnounce(ctx actor.Context, f *foldState, then func(ctx actor.Context, view chat.Compacted, held bool)) {
	view := chat.Compacted{FirstKeptSeq: s.snap.FirstKeptSeq, Summary: s.snap.Summary, Model: s.snap.Model, Digest: s.snap.Digest, Usage: f.usage}
	t := s.turn
	if t != nil && t.phase != phasePaused && f.replyTo == nil {
		t.folds = append(t.folds, view)
		then(ctx, view, false)
		return
	}
	save := s.deps.Store.SaveSnapshotUnsynced
	if f.replyTo != nil {
		save = s.deps.Store.SaveSnapshot
	}
	turnID := ""
	if t != nil {
		s.tellFolds(t) // the folds before this one are told first
		turnID = t.id
	}
	// The boundary and the fold's item are one write: a second would
	// wait for the writer's cycle again (and, synced, for a second sync).
	a, err := activity(chat.EventCompacted, turnID, view)
	if err != nil {
		s.logger().Error().Err(err).Msg("save snapshot after fold")
		s.deps.Bus.PublishMust(s.event(chat.EventCompacted, turnID, view))
		then(ctx, view, false)
		return
	}
	snap, id := s.snap, s.id
	s.writeThen(ctx, func(bg context.Context) error { return save(bg, id, snap, a) }, func(ctx actor.Context, err error) {
		if err != nil {
			s.logger().Error().Err(err).Msg("save snapshot after fold")
		} else {
			s.snap.Stored()
		}
		s.deps.Bus.PublishMust(s.event(chat.EventCompacted, turnID, view))
		then(ctx, view, true)
	})
}

// tellFolds stores and tells the folds t met, for the write of a fold
// while t is paused to cover.
func (s *session) tellFolds(t *turn) {
	for _, f := range t.folds {
		s.record(chat.EventCompacted, t.id, f)
		s.publish(chat.EventCompacted, t.id, f)
	}
	t.folds = nil
}

// foldsMet is the activity of the folds t met, for its last write.
func (s *session) foldsMet(t *turn) []persistence.Activity {
	var acts []persistence.Activity
	for _, f := range t.folds {
		a, err := activity(chat.EventCompacted, t.id, f)
		if err != nil {
			s.logger().Error().Err(err).Msg("store the fold's activity")
			continue
		}
		acts = append(acts, a)
	}
	return acts
}

// foldsStored tells the folds t met, once its last write stored them.
func (s *session) foldsStored(t *turn) {
	for _, f := range t.folds {
		s.deps.Bus.PublishMust(s.event(chat.EventCompacted, t.id, f))
	}
	t.folds = nil
}

// resumeAfterFold takes the next step of the turn waiting for the fold
// just applied. After the fold's own write (held: a /compact's) it steps
// behind what the mailbox took in while that write was held: a deletion
// or a move of the chat queued then (a user message, where a shutdown's
// stop is not) cuts the turn before it plans a request or calls a model
// for a chat that is gone.
func (s *session) resumeAfterFold(ctx actor.Context, held bool) {
	t := s.turn
	if t == nil || t.phase != phaseFolding {
		return
	}
	if held && !s.stopping {
		ctx.Send(ctx.Self(), &foldResumed{turnID: t.id})
		return
	}
	s.prepare(ctx)
}

// foldResumedFor takes the step resumeAfterFold left to the mailbox, if
// the turn still waits.
func (s *session) foldResumedFor(ctx actor.Context, m *foldResumed) {
	if t := s.turn; t != nil && t.id == m.turnID && t.phase == phaseFolding {
		s.prepare(ctx)
	}
}

// maybeBackgroundFold folds after a turn when the kept part passed the soft
// threshold of the budget, or of the message or byte limits, so the next
// request fits without waiting.
func (s *session) maybeBackgroundFold(ctx actor.Context) {
	if s.fold != nil {
		return
	}
	_, info, err := s.deps.Catalog.Resolve(s.snap.Model)
	if err != nil {
		return
	}
	p := s.frameFor(info, false, s.currentSetup())
	soft := p.budget
	soft.Transcript = int(float64(soft.Transcript) * softFold)
	if s.view().NoFold(soft, s.calibration(), s.summaryTokens(), softFold) {
		// The turn planned the kept messages; far from a fold they need
		// no second plan.
		return
	}
	plan := s.planEarly(p.msgs, soft, p.lean, softFold).plan
	if plan.Fold && plan.FirstKept > s.snap.FirstKeptSeq {
		s.startFold(ctx, plan.FirstKept, "", nil)
	}
}

// waitingCompact is a /compact waiting for the fold in flight.
type waitingCompact struct {
	focus   string
	replyTo *actor.PID
}

// compact folds all but the newest turn now (POST /compact).
func (s *session) compact(ctx actor.Context, m *Compact) {
	if s.loadErr != nil {
		s.respond(ctx, nil)
		return
	}
	s.compactNow(ctx, m.Focus, ctx.Sender())
}

// compactNow folds all but the newest turn for replyTo. A fold in flight
// (one a turn left running in the background, mostly: long chats are
// the ones people compact) is waited for, then this one folds what it
// left: one /compact waits at a time.
func (s *session) compactNow(ctx actor.Context, focus string, replyTo *actor.PID) {
	if s.fold != nil {
		if s.compactWaiting != nil {
			ctx.Send(replyTo, &Rejected{Err: fmt.Errorf("%w: the start of this chat is being summarised, and another /compact waits for it; ask again once it is done", ErrBusy)})
			return
		}
		s.compactWaiting = &waitingCompact{focus: focus, replyTo: replyTo}
		return
	}
	var newest int64
	for _, msg := range s.msgs {
		if msg.Role == chat.RoleUser {
			newest = msg.Seq
		}
	}
	if newest <= s.snap.FirstKeptSeq {
		ctx.Send(replyTo, &Compacted{View: chat.Compacted{FirstKeptSeq: s.snap.FirstKeptSeq, Summary: s.snap.Summary, Model: s.snap.Model, Digest: s.snap.Digest}})
		return
	}
	s.startFold(ctx, newest, focus, replyTo)
}

// compactAfterFold runs the /compact that waited for the fold just landed
// (which may have started another: it then waits again).
func (s *session) compactAfterFold(ctx actor.Context) {
	if w := s.compactWaiting; w != nil && s.fold == nil {
		s.compactWaiting = nil
		s.compactNow(ctx, w.focus, w.replyTo)
	}
}
