package summarizer

import (
	"context"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/redact"
	"github.com/agentd/agentd/window"
)

// CondenseInstructions asks for the state of a long-running turn. Exact ids
// and counts matter most: batch work resumes from them.
const CondenseInstructions = `You record the state of a task an assistant is in the middle of, so it can resume after its
working memory is cut. From the task and the steps so far, write exactly these five sections:
TASK: what the person asked for, in one or two lines.
PROGRESS: what is done, with exact ids, names and counts (e.g. "read mails 1-23 of 40").
REMAINING: what is left to do, with exact ids and counts.
DATA: the results gathered so far that the answer needs (exact values).
DECISIONS: choices made and why, briefly.
Keep every id, number, path and link exact. No preamble; no tool calls.`

// ContinuationNote follows the structured state in the request: without it
// models take a shortened context as "done" and drop the remaining work.
const ContinuationNote = "Your earlier steps in this task were compacted into the state above. Resume from REMAINING: " +
	"do not redo what PROGRESS lists, and do not stop before REMAINING is done."

func (a *summarizerActor) condense(ctx actor.Context, m *Condense) {
	sender := ctx.Sender()
	if sender == nil {
		return
	}
	models := a.cfg.Catalog.SummaryModels(m.Model)
	sems := a.lanes(models, m.Tenant)
	root, runCtx, cfg := ctx.ActorSystem().Root, a.ctx, a.cfg
	a.work.Go(func() {
		res := runCondense(runCtx, cfg, m, models, sems)
		cfg.spent(res.Usage)
		root.Send(sender, res)
	})
}

func runCondense(ctx context.Context, cfg Config, m *Condense, models []string, sems []lane) *Condensed {
	mk := redact.NewMasker()
	prior := mk.Mask(m.Prior)
	o := job{models: models, sems: sems, lines: Lines(WithoutRefused(m.Turn), mk), system: CondenseInstructions, start: prior, cal: window.Calibration{Factor: m.Factor},
		frame: func(state string) frame {
			return frame{head: "State so far:\n" + orNone(state) + "\n\nTask and steps:\n", tail: "\n\nWrite the five sections now."}
		},
		valid: func(text string) bool { return strings.Contains(text, "REMAINING") }}.do(ctx, cfg)
	res := &Condensed{ReqID: m.ReqID, OK: o.ok, Text: o.state, Usage: o.usage}
	if !o.ok {
		res.Err = strings.Join(o.errs, "; ")
	}
	return res
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(none yet)"
	}
	return s
}
