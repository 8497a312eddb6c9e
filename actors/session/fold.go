package session

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/chat"
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
}

// startFold asks the summariser to fold every message before seq to. The
// boundary is pinned now, so a turn that lands meanwhile is never covered.
func (s *session) startFold(ctx actor.Context, to int64, focus string, replyTo *actor.PID) {
	var folded []chat.Message
	for _, m := range s.msgs {
		if m.Seq >= to {
			break
		}
		folded = append(folded, m)
	}
	f := &foldState{reqID: fmt.Sprintf("%s/%d-%d", s.id, s.snap.FirstKeptSeq, to), from: s.snap.FirstKeptSeq, to: to, folded: folded, replyTo: replyTo, started: time.Now()}
	s.fold = f
	req := &summarizer.Fold{ReqID: f.reqID, ChatID: s.id, Model: s.snap.Model, Summary: s.snap.Summary, Digest: s.snap.Digest, Turns: folded, Focus: focus}
	if s.deps.Summarizer == nil || time.Now().Before(s.snap.FoldPaused) {
		// Not asking: fold with the digest alone, now.
		s.folded(ctx, &summarizer.Folded{ReqID: f.reqID, ChatID: s.id, Digest: summarizer.Digest(s.snap.Digest, folded), Err: "summariser paused after repeated failures"})
		return
	}
	ctx.Request(s.deps.Summarizer, req)
}

// folded applies a fold's result: the boundary moves whether or not a
// summary came back (a summary is a help, never a gate).
func (s *session) folded(ctx actor.Context, m *summarizer.Folded) {
	f := s.fold
	if f == nil || m.ReqID != f.reqID {
		return
	}
	s.fold = nil
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
		s.log.Warn().Str("error", m.Err).Msg("fold without a summary; the digest keeps the facts")
	}
	if s.deps.Metrics != nil {
		s.deps.Metrics.Fold(m.OK)
	}
	s.snap.FirstKeptSeq = f.to
	kept := 0
	for kept < len(s.msgs) && s.msgs[kept].Seq < f.to {
		kept++
	}
	s.msgs = append([]chat.Message(nil), s.msgs[kept:]...)
	if err := s.saveSnapshot(); err != nil {
		s.log.Error().Err(err).Msg("save snapshot after fold")
	}
	turnID := ""
	if s.turn != nil {
		turnID = s.turn.id
		s.turn.summaryUsage = s.turn.summaryUsage.Add(m.Usage)
	}
	view := chat.Compacted{FirstKeptSeq: f.to, Summary: s.snap.Summary, Model: s.snap.Model, Digest: s.snap.Digest}
	s.publish(chat.EventCompacted, turnID, view)
	s.learnFrom(ctx, f.folded)
	if f.replyTo != nil {
		ctx.Send(f.replyTo, &Compacted{View: view})
	}
	if t := s.turn; t != nil && t.waitFold {
		t.waitFold = false
		s.prepare(ctx)
	}
}

// maybeBackgroundFold folds after a turn when the kept part passed the soft
// threshold, so the next request fits without waiting.
func (s *session) maybeBackgroundFold(ctx actor.Context) {
	if s.fold != nil {
		return
	}
	_, info, err := s.deps.Catalog.Resolve(s.snap.Model)
	if err != nil {
		return
	}
	est, msgs, _, _ := s.planFor(info, false)
	soft := est.budget
	soft.Transcript = int(float64(soft.Transcript) * softFold)
	plan := window.Plan(window.PlanInput{Msgs: msgs, Budget: soft, Calibration: s.calibration(), Summary: s.snap.Summary, Digest: s.snap.Digest})
	if plan.Fold && plan.FirstKept > s.snap.FirstKeptSeq {
		s.startFold(ctx, plan.FirstKept, "", nil)
	}
}

// compact folds all but the newest turn now (POST /compact).
func (s *session) compact(ctx actor.Context, m *Compact) {
	if s.loadErr != nil {
		s.respond(ctx, nil)
		return
	}
	if s.fold != nil {
		ctx.Respond(&Rejected{Err: fmt.Errorf("%w: a fold is already running", ErrBusy)})
		return
	}
	var newest int64
	for _, msg := range s.msgs {
		if msg.Role == chat.RoleUser {
			newest = msg.Seq
		}
	}
	if newest <= s.snap.FirstKeptSeq {
		ctx.Respond(&Compacted{View: chat.Compacted{FirstKeptSeq: s.snap.FirstKeptSeq, Summary: s.snap.Summary, Model: s.snap.Model, Digest: s.snap.Digest}})
		return
	}
	s.startFold(ctx, newest, m.Focus, ctx.Sender())
}
