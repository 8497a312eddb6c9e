package session

import (
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/eventbus"
	"github.com/agentd/agentd/tools"
)

// progressEvery is how often a waiting turn says what it waits for: a wait
// shorter than this says nothing, a longer one is told at least once a
// second (the first at most twice this after it began).
const progressEvery = 500 * time.Millisecond

// progressTick asks the session to report what its turn waits for.
type progressTick struct{ turnID string }

// enter moves the turn to phase p; what it waits for is timed from now.
func (t *turn) enter(p phase) {
	t.phase, t.waitSince = p, time.Now()
}

// armProgress schedules the running turn's next progress check; a timer,
// not a goroutine, waits, and closeTurn stops it.
func (s *session) armProgress(ctx actor.Context) {
	t := s.turn
	root, self, id := ctx.ActorSystem().Root, ctx.Self(), t.id
	t.progress = time.AfterFunc(progressEvery, func() { root.Send(self, &progressTick{turnID: id}) })
}

// progressed publishes fold.waiting when the turn has waited at least
// progressEvery for one thing, then checks again.
func (s *session) progressed(ctx actor.Context, m *progressTick) {
	t := s.turn
	if t == nil || t.id != m.turnID {
		return
	}
	if w, ok := t.waiting(time.Now()); ok && w.ElapsedMS >= progressEvery.Milliseconds() {
		s.publish(chat.EventFoldWaiting, t.id, w)
	}
	s.armProgress(ctx)
}

// waiting says what the turn waits for at now, and since when; ok is
// false while it decides, or waits for the application (which knows).
func (t *turn) waiting(now time.Time) (w chat.Waiting, ok bool) {
	since := t.waitSince
	switch t.phase {
	case phaseFolding:
		w = chat.Waiting{WaitingFor: chat.WaitingSummary, Detail: "summarising the start of this chat"}
	case phaseCondensing:
		w = chat.Waiting{WaitingFor: chat.WaitingCompaction, Detail: "condensing this turn's tool results"}
	case phasePreloading:
		w = chat.Waiting{WaitingFor: chat.WaitingToolIndex, Detail: "loading the tools the message names"}
	case phaseCalling:
		w = chat.Waiting{WaitingFor: chat.WaitingModel, Detail: t.ref}
		// A streaming answer is no wait: time the silence since its last word.
		if word := time.Unix(0, t.lastWord.Load()); word.After(since) {
			since = word
		}
	case phaseBackoff:
		w = chat.Waiting{WaitingFor: chat.WaitingRetry, Detail: t.ref + " had a passing fault; retrying"}
	case phaseTools:
		w = chat.Waiting{WaitingFor: chat.WaitingTools, Detail: strings.Join(t.running, ", ")}
	default:
		return w, false
	}
	w.ElapsedMS = now.Sub(since).Milliseconds()
	return w, true
}

// toolReporter publishes a call's own progress reports on the chat's
// stream. It runs on the tool's goroutine, so it reads only what it was
// given.
func toolReporter(bus *eventbus.Bus, chatID, turnID string, seq int64, c chat.ToolCall) func(tools.Progress) {
	return func(p tools.Progress) {
		bus.Publish(eventbus.Event{Type: chat.EventToolProgress, ChatID: chatID, TurnID: turnID, Seq: seq,
			Data: chat.ToolProgress{Tool: c.Name, CallID: c.ID, Message: p.Message, Done: p.Done, Total: p.Total}})
	}
}
