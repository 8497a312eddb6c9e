package session

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/window"
)

// minNewForCondense: the turn's state is rewritten only once this many
// messages have come since it was last written, so a long turn pays one
// summary call per stretch of work, not one per call.
const minNewForCondense = 4

// turnStart returns the index of the running turn's first message in ms.
func turnStart(ms []window.Msg, userSeq int64) int {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Seq == userSeq && ms[i].Role == window.User {
			return i
		}
	}
	return len(ms)
}

// pressure reports whether the planned request passes the in-turn trigger.
func (s *session) pressure(t *turn, p *planned) bool {
	b := p.budget
	return window.NeedsCompaction(p.conservative, b.System+b.Tools, t.lastReported, b.Window-b.Answer)
}

// turnMsgs returns the stored messages of the running turn, found from
// the end: the turn is the newest part of the kept messages.
func (s *session) turnMsgs(t *turn) []chat.Message {
	for i := len(s.msgs) - 1; i >= 0; i-- {
		if s.msgs[i].Seq == t.userSeq {
			return s.msgs[i:]
		}
	}
	return nil
}

// condenseNeeded: the turn is a monster (it has tool results and its
// planned request passes the trigger) and enough happened since its state
// was last written.
func (s *session) condenseNeeded(t *turn) bool {
	if s.deps.Summarizer == nil {
		return false
	}
	live := s.turnMsgs(t)
	results := 0
	for _, m := range live {
		if m.Role == chat.RoleTool {
			results++
		}
	}
	if results < 2 || len(live)-t.stateCovers < minNewForCondense {
		return false
	}
	return s.pressure(t, t.plan)
}

func (s *session) startCondense(ctx actor.Context) {
	t := s.turn
	live := s.turnMsgs(t)
	t.compactStart = time.Now()
	s.publish(chat.EventCompactionStarted, t.id, map[string]int{"targets": len(live)})
	ctx.Request(s.deps.Summarizer, &summarizer.Condense{ReqID: t.id, ChatID: s.id, Tenant: s.meta.Tenant, Model: s.snap.Model, Prior: t.state, Turn: append([]chat.Message(nil), live...), Factor: s.snap.Factor})
	t.stateCovers = len(live)
}

func (s *session) condensed(ctx actor.Context, m *summarizer.Condensed) {
	t := s.turn
	if t == nil || t.id != m.ReqID || t.phase != phaseCondensing {
		return
	}
	t.summaryUsage = t.summaryUsage.Add(m.Usage)
	if m.OK {
		t.state = m.Text
	} else {
		s.logger().Warn().Str("error", m.Err).Msg("in-turn summary failed; compacting by truncation alone")
	}
	s.prepare(ctx)
}

// compactLive applies the in-turn safety net to the messages of a request
// being built: truncation to the target, and the turn's state with the
// continuation note at the front of its task. It reports whether it
// changed the messages (they are then another transcript, to plan anew),
// and reports the compaction once per condense.
func (s *session) compactLive(t *turn, p *planned) ([]window.Msg, bool) {
	ms, b := p.msgs, p.budget
	if !s.pressure(t, p) && t.state == "" {
		return ms, false
	}
	start := turnStart(ms, t.userSeq)
	if start >= len(ms) {
		return ms, false
	}
	fixed := b.System + b.Tools
	out, rep := window.CompactTurn(ms, p.conservative, start, fixed, b.Window-b.Answer)
	changed := rep.Targets > 0 || rep.ImagesStripped > 0
	if t.state != "" {
		if !changed { // out is the kept messages themselves
			out = slices.Clone(ms)
		}
		out[start].Text += "\n\n<task-state>\n" + t.state + "\n</task-state>\n" + summarizer.ContinuationNote
		out[start].Tokens, out[start].Conservative = 0, 0
		changed = true
	}
	if !t.compactStart.IsZero() {
		s.publishInTurn(chat.EventCompactionApplied, chat.CompactionApplied{Targets: rep.Targets, TokensBefore: rep.Before, TokensAfter: rep.After,
			TokensSaved: rep.Before - rep.After, DurationMS: time.Since(t.compactStart).Milliseconds()})
		t.compactStart = time.Time{}
	}
	return out, changed
}
