package session

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/actors/toolindex"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/tools"
	"github.com/agentd/agentd/window"
)

// setup is what the application set for a chat, as one turn uses it: a
// turn keeps the setup it started with, so a change applies from the next.
type setup struct {
	instructions string
	version      int
	settings     chat.Settings
	// defaultThreshold is limits.compact_threshold, for a chat that sets
	// none (0: none, the whole window).
	defaultThreshold int
	scope            tools.Scope
}

// currentSetup is the chat's setup now; a chat without instructions of its
// own gets its tenant's default ones.
func (s *session) currentSetup() setup {
	su := setup{instructions: s.meta.Instructions, version: s.meta.InstructionsVersion, settings: s.meta.Settings,
		scope: tools.Scope{Tenant: s.meta.Tenant, Toolsets: s.meta.Toolsets, Inline: s.meta.Tools}}
	if su.instructions == "" {
		su.instructions = s.deps.TenantInstructions[s.meta.Tenant]
	}
	if t := s.deps.CompactThreshold; su.settings.CompactThreshold == nil && t > 0 {
		su.defaultThreshold = t
	}
	return su
}

// threshold is the most a request of the chat holds on a window (0: the
// window): its own compact_threshold, or the daemon's held to the working
// size of a small window (working then says so).
func (su setup) threshold(windowTokens int) (t int, working bool) {
	switch {
	case su.settings.CompactThreshold != nil:
		return *su.settings.CompactThreshold, false
	case su.defaultThreshold > 0:
		return window.WorkingSize(windowTokens, su.defaultThreshold)
	}
	return 0, false
}

// toolsOf is the registry as the setup's scope sees it.
func (s *session) toolsOf(su setup) tools.View { return s.deps.Tools.In(su.scope) }

// indexScopes names the tool-index scopes of the setup's toolsets.
func indexScopes(su setup) []string {
	out := make([]string, len(su.scope.Toolsets))
	for i, n := range su.scope.Toolsets {
		out[i] = toolindex.ToolsetScope(su.scope.Tenant, n)
	}
	return out
}

// withInstructions puts the application's words first, then agentd's own
// prompt: the stable prefix of every request.
func withInstructions(instructions, own string) string {
	if strings.TrimSpace(instructions) == "" {
		return own
	}
	return instructions + "\n\n" + own
}

// instructionsWarning says when the application's instructions alone take
// more than lean mode's share of a window, which lean mode never cuts.
func instructionsWarning(su setup, window int) string {
	n := windowTokens(su.instructions)
	if window <= 0 || float64(n) <= leanShare*float64(window) {
		return ""
	}
	return fmt.Sprintf("the application's instructions take %d tokens, more than %d%% of the %d-token window; they are sent whole, leaving less room for the chat",
		n, int(leanShare*100), window)
}

func windowTokens(text string) int {
	if text == "" {
		return 0
	}
	return window.EstimateText(text)
}

// patchSetup applies the application's part of a Patch to meta.
func (s *session) patchSetup(m *Patch, meta *persistence.Chat) error {
	if m.Instructions != nil && *m.Instructions != meta.Instructions {
		meta.Instructions = *m.Instructions
		meta.InstructionsVersion++
	}
	if m.Settings != nil {
		client, _, err := s.deps.Catalog.Resolve(meta.Model)
		if err != nil {
			return err
		}
		if err := providers.CheckSettings(client, *m.Settings); err != nil {
			return err
		}
		meta.Settings = *m.Settings
	}
	if m.Toolsets != nil {
		meta.Toolsets = slices.Clone(*m.Toolsets)
	}
	if m.Tools != nil {
		meta.Tools = slices.Clone(*m.Tools)
	}
	if m.Toolsets != nil || m.Tools != nil {
		return s.deps.Tools.CheckScope(tools.Scope{Tenant: meta.Tenant, Toolsets: meta.Toolsets, Inline: meta.Tools})
	}
	return nil
}

// clientCalls are the calls of a reply the application runs: those of
// its tools whose arguments their schema takes. The others run here as
// agentd's own calls do (runTools), where the model gets the refusal and
// the application is not asked. The check is CPU work with bounds
// (tools.Limits' MaxArgBytes; a schema's work, tools/argbound.go), so it
// is done in the mailbox.
func (s *session) clientCalls(su setup, calls []chat.ToolCall) []chat.ToolCall {
	view, lim := s.toolsOf(su), s.toolLimits()
	var out []chat.ToolCall
	for _, c := range calls {
		if t, ok := view.Get(c.Name); ok && t.Client {
			if _, refused := t.Refusal(c, lim); !refused {
				out = append(out, c)
			}
		}
	}
	return out
}

// pause waits for the application's results of the calls the turn awaits.
// The pause is durable: a restart finds it in the snapshot.
func (s *session) pause(ctx actor.Context) {
	t := s.turn
	t.enter(phasePaused)
	if s.snap.Paused == nil || s.snap.Paused.TurnID != t.id {
		s.snap.Paused = &persistence.PausedTurn{TurnID: t.id, UserSeq: t.userSeq, Since: time.Now()}
	}
	s.snap.Paused.Calls = t.awaiting
	// The application hears of the pause once it is stored.
	s.saveTurnSnapshot(ctx, t, "save the paused turn", func(ctx actor.Context) {
		s.armPause(ctx, time.Until(s.snap.Paused.Since.Add(s.deps.ToolResultsWait)))
		s.refuseUnpaused(ctx, t.awaiting)
		s.publish(chat.EventTurnRequiresAction, t.id, chat.TurnResult{TurnID: t.id, Status: chat.StatusRequiresAction,
			ToolCalls: slices.Clone(t.awaiting), Messages: t.stored, Usage: t.usage, SummaryUsage: t.summaryUsage})
	})
}

func (s *session) armPause(ctx actor.Context, after time.Duration) {
	root, self, id := ctx.ActorSystem().Root, ctx.Self(), s.turn.id
	if s.turn.timer != nil {
		s.turn.timer.Stop()
	}
	s.turn.timer = time.AfterFunc(max(after, 0), func() { root.Send(self, &pauseOverdue{turnID: id}) })
}

// resumePaused brings back a turn a restart found paused in the snapshot.
func (s *session) resumePaused(ctx actor.Context) {
	p := s.snap.Paused
	if p == nil {
		return
	}
	tctx, cancel := context.WithCancel(context.Background())
	// No caller counts this turn any more: its slot went with the restart.
	t := &turn{id: p.TurnID, userSeq: p.UserSeq, ctx: tctx, cancel: cancel, started: p.Since, setup: s.currentSetup(), ended: func() {},
		log: s.log.With().Str("turn_id", p.TurnID).Logger()}
	t.enter(phasePaused)
	for _, m := range s.msgs {
		if m.Seq >= p.UserSeq {
			t.stored = append(t.stored, m)
		}
	}
	// The snapshot is written after the results it follows: a crash
	// between the two leaves calls listed whose results the log holds,
	// acknowledged to the application. They wait no more (a result sent
	// again would be a second one for its call).
	t.awaiting = slices.DeleteFunc(slices.Clone(p.Calls), func(c chat.ToolCall) bool {
		return slices.ContainsFunc(t.stored, func(m chat.Message) bool { return m.Role == chat.RoleTool && m.ToolCallID == c.ID })
	})
	p.Calls = slices.Clone(t.awaiting)
	s.turn = t
	s.armProgress(ctx)
	if len(t.awaiting) == 0 {
		s.resumeWhenToolsReady(ctx, t)
		return
	}
	s.armPause(ctx, time.Until(p.Since.Add(s.deps.ToolResultsWait)))
}

// resumeWhenToolsReady resumes t, paused on calls that all have their
// results, once the tenant's stored toolsets are registered: a start right
// after the daemon's, woken by what does not wait for them (a message
// added, a /compact, its grain activating), would call the model without
// them. Until then the turn stays paused, and durable (a stop halts it and
// the next start resumes it), while the mailbox runs on.
func (s *session) resumeWhenToolsReady(ctx actor.Context, t *turn) {
	var ready <-chan struct{}
	if s.deps.ToolsReady != nil {
		ready = s.deps.ToolsReady(s.meta.Tenant)
	}
	if ready == nil {
		s.resume(ctx, t)
		return
	}
	root, self, halted := ctx.ActorSystem().Root, ctx.Self(), t.ctx.Done()
	s.work.Go(func() {
		select {
		case <-ready:
			root.Send(self, &toolsReady{turn: t})
		case <-halted:
		}
	})
}

// toolsReady: the tenant's toolsets that turn's resume waited for are
// registered.
type toolsReady struct{ turn *turn }

// toolsAreReady resumes the turn that waited for its tenant's toolsets, if
// it still waits.
func (s *session) toolsAreReady(ctx actor.Context, m *toolsReady) {
	if t := s.turn; t == m.turn && t.phase == phasePaused && len(t.awaiting) == 0 {
		s.resume(ctx, t)
	}
}

// toolResults stores the application's results and resumes the turn once
// every awaited call has one.
func (s *session) toolResults(ctx actor.Context, m *SubmitToolResults) {
	t := s.turn
	if s.loadErr != nil || t == nil || t.phase != phasePaused {
		s.respond(ctx, &Rejected{Err: ErrNotPaused})
		return
	}
	msgs, rest, err := answer(t.awaiting, m.Results)
	if err == nil && len(m.Then) > 0 && len(rest) > 0 {
		err = fmt.Errorf("messages after tool results need a result for every call the turn waits for (%s lack one)", callIDs(rest))
	}
	if err != nil {
		ctx.Respond(&Rejected{Err: fmt.Errorf("%w: %v", ErrInvalid, err)})
		return
	}
	// The messages after the results are stored with them, in one write:
	// the resumed turn answers them.
	sender := ctx.Sender()
	s.storeTurnMsgs(ctx, append(msgs, m.Then...), func(ctx actor.Context, stored bool) {
		if !stored {
			s.respondTo(ctx, sender, &Rejected{Err: fmt.Errorf("store the tool results: the turn ended")})
			return
		}
		s.respondTo(ctx, sender, &TurnAccepted{TurnID: t.id, UserSeq: t.userSeq})
		t.awaiting = rest
		if len(rest) > 0 {
			s.pause(ctx)
			return
		}
		s.resume(ctx, t)
	})
}

// resume goes on with the paused turn t once every call it awaited has its
// result in the log.
func (s *session) resume(ctx actor.Context, t *turn) {
	if t.timer != nil {
		t.timer.Stop()
	}
	s.snap.Paused = nil
	// The turn's clock starts again: the pause is the application's time.
	t.cancel()
	t.ctx, t.cancel = context.WithTimeout(context.Background(), s.deps.TurnTimeout)
	s.prepare(ctx)
}

// answer pairs results with the calls awaiting them; it refuses a result
// for a call not awaited, or two for one call.
func answer(awaiting []chat.ToolCall, results []ToolResult) ([]chat.Message, []chat.ToolCall, error) {
	if len(results) == 0 {
		return nil, nil, fmt.Errorf("no results")
	}
	rest := slices.Clone(awaiting)
	msgs := make([]chat.Message, 0, len(results))
	for _, r := range results {
		i := slices.IndexFunc(rest, func(c chat.ToolCall) bool { return c.ID == r.CallID })
		if i < 0 && slices.ContainsFunc(awaiting, func(c chat.ToolCall) bool { return c.ID == r.CallID }) {
			return nil, nil, fmt.Errorf("call_id %q: its result is given twice; send one result a call", r.CallID)
		}
		if i < 0 {
			return nil, nil, fmt.Errorf("call_id %q: the turn waits for no such call (it waits for %s)", r.CallID, callIDs(awaiting))
		}
		msgs = append(msgs, chat.Message{Role: chat.RoleTool, ToolCallID: r.CallID, ToolName: rest[i].Name, Content: r.Output, IsError: r.IsError})
		rest = slices.Delete(rest, i, i+1)
	}
	return msgs, rest, nil
}

func callIDs(calls []chat.ToolCall) string { return strings.Join(callIDList(calls), ", ") }

func callIDList(calls []chat.ToolCall) []string {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.ID
	}
	return ids
}

// overduePause ends a turn the application left paused too long. The calls
// get error results, so the log stays a valid conversation and the next
// message goes on from it.
func (s *session) overduePause(ctx actor.Context, m *pauseOverdue) {
	t := s.turn
	if t == nil || t.id != m.turnID || t.phase != phasePaused {
		return
	}
	wait := s.deps.ToolResultsWait
	msgs := make([]chat.Message, len(t.awaiting))
	for i, c := range t.awaiting {
		msgs[i] = chat.Message{Role: chat.RoleTool, ToolCallID: c.ID, ToolName: c.Name, IsError: true,
			Content: fmt.Sprintf("No result: the application did not send one within %s.", wait)}
	}
	s.storeTurnMsgs(ctx, msgs, func(ctx actor.Context, stored bool) {
		if stored {
			s.endTurn(ctx, &chat.Problem{Kind: chat.ProblemToolResults, Message: fmt.Sprintf(
				"the application sent no results for %s within %s; the turn ended, and the next message goes on from here", callIDs(t.awaiting), wait)})
		}
	})
}
