package session

import (
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/telemetry"
	"github.com/agentd/agentd/tools"
)

// toolOutcome is one call's result and the tools it loaded.
type toolOutcome struct {
	call chat.ToolCall
	res  tools.Result
	load []string
}

// toolLimits bound each tool call of the chat.
func (s *session) toolLimits() tools.Limits {
	return tools.Limits{Timeout: s.deps.ToolTimeout, MaxResultBytes: s.deps.MaxToolResultBytes, MaxArgBytes: s.deps.ToolArgBytes}
}

// cutCallResult is what a call cut by its answer's length limit gets
// instead of running: the truth, so the model sends less rather than
// mending JSON it never got wrong.
func cutCallResult(name string) tools.Result {
	return tools.Result{IsError: true, Text: fmt.Sprintf("Your call to %s was cut off: your answer reached its length limit while writing "+
		"the call's arguments, so they were incomplete and the call did not run. Send shorter arguments, or split the work into several smaller calls.", name)}
}

// runTools runs a round of calls in parallel, outside the mailbox; the
// results come back as one toolsDone. cut, if not nil, is the call the
// answer's length limit cut (cutCall): it is answered cutCallResult.
func (s *session) runTools(ctx actor.Context, calls []chat.ToolCall, cut *chat.ToolCall) {
	t := s.turn
	isCut := func(chat.ToolCall) bool { return false }
	if cut != nil {
		cutCopy := *cut
		isCut = func(c chat.ToolCall) bool { return c == cutCopy }
	}
	root, self := ctx.ActorSystem().Root, ctx.Self()
	view, index, scopes := s.toolsOf(t.setup), s.deps.ToolIndex, indexScopes(t.setup)
	lim := s.toolLimits()
	info := tools.CallInfo{Tenant: s.meta.Tenant, ChatID: s.id, Seq: s.lastSeq, WaitForOK: s.snap.Untrusted || s.meta.NoAutoRemember, SentBytes: s.deps.ToolResultBytes}
	turnCtx, turnID, log, tracer := t.ctx, t.id, t.log, telemetry.Tracer(s.deps.Traces)
	findRoom := int(findToolsShare * float64(t.info.Window))
	t.enter(phaseTools)
	t.running = t.running[:0]
	for _, c := range calls {
		t.running = append(t.running, c.Name)
	}
	bus, chatID, seq := s.deps.Bus, s.id, s.lastSeq
	s.work.Go(func() {
		out := make([]toolOutcome, len(calls))
		var wg sync.WaitGroup
		for i, c := range calls {
			wg.Go(func() {
				callCtx, span := telemetry.StartTool(turnCtx, tracer, c.Name, c.ID)
				var err error
				defer func() { telemetry.EndTool(span, out[i].res.IsError, err) }()
				if isCut(c) {
					out[i] = toolOutcome{call: c, res: cutCallResult(c.Name)}
					return
				}
				if res, over := lim.TooLong(c); over {
					out[i] = toolOutcome{call: c, res: res}
					return
				}
				if c.Name == findToolsName {
					text, load, isErr := findTools(callCtx, root, index, scopes, view.Specs, c.Arguments, findRoom)
					out[i] = toolOutcome{call: c, res: tools.Result{Text: text, IsError: isErr}, load: load}
					return
				}
				ci := info
				ci.CallID = c.ID
				// A tool called by name without being loaded simply runs, and is loaded.
				var res tools.Result
				res, err = view.Call(tools.WithProgress(tools.WithCallInfo(callCtx, ci), toolReporter(bus, chatID, turnID, seq, c)), c, lim)
				if err != nil {
					// Logged once, here: the model sees only res.
					log.Error().Err(err).Str("tool", c.Name).Str("call_id", c.ID).Msg("tool failed")
				}
				out[i] = toolOutcome{call: c, res: res, load: []string{c.Name}}
			})
		}
		wg.Wait()
		root.Send(self, &toolsDone{turnID: turnID, results: out})
	})
}

func (s *session) toolsDone(ctx actor.Context, m *toolsDone) {
	t := s.turn
	if t == nil || t.id != m.turnID || t.phase != phaseTools {
		return
	}
	msgs := make([]chat.Message, len(m.results))
	var load []string
	for i, o := range m.results {
		msgs[i] = chat.Message{Role: chat.RoleTool, ToolCallID: o.call.ID, ToolName: o.call.Name, Content: o.res.Text,
			IsError: o.res.IsError, Untrusted: o.res.Untrusted, Images: o.res.Images}
		if o.res.Untrusted {
			s.snap.Untrusted = true
		}
		load = append(load, o.load...)
	}
	if !s.storeUnsynced(ctx, msgs...) {
		return
	}
	if t.info.Window > 0 && t.plan.lean {
		s.toolsUsed(load)
		if added := s.loadTools(t.setup, load...); len(added) > 0 {
			s.publishInTurn(chat.EventToolsLoaded, map[string][]string{"names": added})
		}
	}
	s.prepare(ctx)
}
