package summarizer

import (
	"context"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
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
	sems := make([]chan struct{}, len(models))
	for i, ref := range models {
		p, _, _ := strings.Cut(ref, "/")
		sems[i] = a.sem(p)
	}
	root, runCtx, cfg := ctx.ActorSystem().Root, a.ctx, a.cfg
	go func() { root.Send(sender, runCondense(runCtx, cfg, m, models, sems)) }()
}

func runCondense(ctx context.Context, cfg Config, m *Condense, models []string, sems []chan struct{}) *Condensed {
	res := &Condensed{ReqID: m.ReqID}
	lines := Lines(m.Turn)
	var errs []string
	for i, ref := range models {
		client, info, err := cfg.Catalog.Resolve(ref)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		state := m.Prior
		ok := true
		for _, p := range Pieces(lines, info.Window, "") {
			prompt := "State so far:\n" + orNone(state) + "\n\nTask and steps:\n" + strings.Join(p.Lines, "\n") + "\n\nWrite the five sections now."
			text, usage, err := callWith(ctx, cfg, sems[i], client, info.ID, CondenseInstructions, prompt)
			res.Usage = res.Usage.Add(usage)
			if err != nil || !strings.Contains(text, "REMAINING") {
				ok = false
				if err != nil {
					errs = append(errs, err.Error())
				}
				break
			}
			state = text
		}
		if ok {
			res.OK, res.Text = true, state
			return res
		}
	}
	res.Err = strings.Join(errs, "; ")
	return res
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(none yet)"
	}
	return s
}
