// Package summarizer is the summariser actor: it folds a chat's turns into
// the chat's one rolling summary with the cheapest model that will do, and
// never edits the transcript. Model calls run in goroutines the actor owns,
// bounded per provider and shared fairly between tenants (slots.go); one
// fold per chat runs at once. The pure parts
// (plain lines, secret masking, pieces sized to the window, the digest, the
// check that a reply is a summary) are plain functions beside it.
package summarizer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/fairshare"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/redact"
	"github.com/agentd/agentd/telemetry"
	"github.com/agentd/agentd/window"
)

// Catalog is what the summariser needs of the model catalog.
type Catalog interface {
	Resolve(ref string) (providers.Client, providers.ModelInfo, error)
	SummaryModels(ref string) []string
	// Learn records the window a refusal taught for ref (persisted, shared
	// with every chat on that model) and returns the window now believed.
	Learn(ctx context.Context, ref string, window int) (int, error)
}

// Config tunes the summariser.
type Config struct {
	Catalog Catalog
	Log     zerolog.Logger
	// PerProvider bounds summarising requests in flight per provider.
	// Optional. Defaults to 4.
	PerProvider int
	// PerTenant bounds one tenant's summarising requests in flight per
	// provider, so the others always find a slot free or next to free.
	// Optional. Defaults to PerProvider-1 (at least 1); at most PerProvider
	// (what the hub sets where the daemon serves one tenant).
	PerTenant int
	// CallTimeout bounds one summarising request. Optional. Defaults to 2m.
	CallTimeout time.Duration
	// StopWait bounds how long stopping waits for folds in flight (they
	// are cancelled first). Optional. Defaults to 10s.
	StopWait time.Duration
	// Traces gives folds and their model calls spans. Optional.
	Traces trace.TracerProvider
	// Spent is told the provider usage of every fold and condensed turn
	// state, whether or not a summary came back or its chat still waits
	// for it, on the goroutine that ran it (keep it quick; calls may be
	// concurrent). Optional. For metrics.
	Spent func(chat.Usage)
}

type summarizerActor struct {
	cfg      Config
	inFlight map[string]bool
	slots    map[string]*fairshare.Slots // per provider
	ctx      context.Context
	cancel   context.CancelFunc
	work     actors.Group // folds and condensations in flight
}

type foldFinished struct{ chatID string }

// Props returns the summariser's props.
func Props(cfg Config) *actor.Props {
	cfg = cfg.withDefaults()
	return actors.Props(cfg.Log, func() actor.Actor { return newSummarizer(cfg) })
}

func (cfg Config) withDefaults() Config {
	if cfg.PerProvider <= 0 {
		cfg.PerProvider = 4
	}
	if cfg.PerTenant <= 0 {
		cfg.PerTenant = max(cfg.PerProvider-1, 1)
	}
	cfg.PerTenant = min(cfg.PerTenant, cfg.PerProvider)
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	if cfg.StopWait <= 0 {
		cfg.StopWait = 10 * time.Second
	}
	cfg.Log = cfg.Log.With().Str("component", "summarizer").Logger()
	return cfg
}

func newSummarizer(cfg Config) *summarizerActor {
	ctx, cancel := context.WithCancel(context.Background())
	return &summarizerActor{cfg: cfg, inFlight: map[string]bool{}, slots: map[string]*fairshare.Slots{}, ctx: ctx, cancel: cancel}
}

func (a *summarizerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Fold:
		a.fold(ctx, m)
	case *Condense:
		a.condense(ctx, m)
	case *foldFinished:
		delete(a.inFlight, m.chatID)
	case *actor.Stopping:
		a.cancel()
		if !a.work.Wait(a.cfg.StopWait) {
			a.cfg.Log.Warn().Dur("waited", a.cfg.StopWait).Msg("summarizer: folds still in flight at stop")
		}
	case *actor.Started, *actor.Stopped, *actor.Restarting:
	default:
		a.cfg.Log.Warn().Type("type", m).Msg("summarizer: unknown message")
	}
}

func (cfg Config) spent(u chat.Usage) {
	if cfg.Spent != nil {
		cfg.Spent(u)
	}
}

// lanes are the slots of each model's provider, as tenant asks for them.
func (a *summarizerActor) lanes(models []string, tenant string) []lane {
	out := make([]lane, len(models))
	for i, ref := range models {
		p, _, _ := strings.Cut(ref, "/")
		s, ok := a.slots[p]
		if !ok {
			s = fairshare.NewSlots(a.cfg.PerProvider, a.cfg.PerTenant)
			a.slots[p] = s
		}
		out[i] = newLane(s, tenant)
	}
	return out
}

func (a *summarizerActor) fold(ctx actor.Context, m *Fold) {
	sender := ctx.Sender()
	if sender == nil {
		return
	}
	if a.inFlight[m.ChatID] {
		ctx.Respond(&Folded{ReqID: m.ReqID, ChatID: m.ChatID, Digest: Digest(m.Digest, m.Turns), Err: "a fold is already running for this chat"})
		return
	}
	a.inFlight[m.ChatID] = true
	models := a.cfg.Catalog.SummaryModels(m.Model)
	sems := a.lanes(models, m.Tenant)
	root, self := ctx.ActorSystem().Root, ctx.Self()
	runCtx, cfg := a.ctx, a.cfg
	a.work.Go(func() {
		ctx, span := telemetry.Tracer(cfg.Traces).Start(trace.ContextWithSpanContext(runCtx, m.Trace), "fold",
			trace.WithAttributes(telemetry.ChatIDKey.String(m.ChatID), attribute.Int("agentd.fold.messages", len(m.Turns))))
		res := run(ctx, cfg, m, models, sems)
		cfg.spent(res.Usage)
		span.SetAttributes(attribute.Bool("agentd.fold.summarised", res.OK), attribute.String("agentd.fold.model", res.Model),
			attribute.Int("agentd.fold.requests", res.Requests))
		if !res.OK {
			span.SetStatus(codes.Error, res.Err)
		}
		span.End()
		root.Send(sender, res)
		root.Send(self, &foldFinished{chatID: m.ChatID})
	})
}

// job is one piece-by-piece rewrite of a state (a summary, or a monster
// turn's structured state) by the first model that manages every piece.
type job struct {
	models []string
	sems   []lane
	lines  []string
	focus  string
	system string
	start  string
	// frame is the prompt's text around a piece, for the state so far.
	frame func(state string) frame
	valid func(text string) bool
	// cal corrects estimates the way the chat's turns are corrected.
	cal window.Calibration
}

// outcome is what a job produced.
type outcome struct {
	ok       bool
	state    string
	model    string
	usage    chat.Usage
	requests int
	errs     []string
}

// do tries each model in turn, folding every piece into the state; a model
// that fails a piece is dropped and the next starts again from the start.
func (j job) do(ctx context.Context, cfg Config) outcome {
	var o outcome
	for i, ref := range j.models {
		client, info, err := cfg.Catalog.Resolve(ref)
		if err != nil {
			o.errs = append(o.errs, err.Error())
			continue
		}
		if state, ok := j.fold(ctx, cfg, j.sems[i], client, ref, info, &o); ok {
			o.ok, o.state, o.model = true, state, ref
			return o
		}
		cfg.Log.Warn().Str("model", ref).Msg("summarising failed; trying the next model")
	}
	if len(o.errs) == 0 {
		o.errs = []string{"no model to summarise with"}
	}
	return o
}

// fold runs every piece through one model. Each request is fitted to the
// model's window with its own answer room and the chat's estimate
// correction; a refusal for length heals once: the window it teaches is
// learned for ref, what is left is cut again and the piece asked again.
func (j job) fold(ctx context.Context, cfg Config, sem lane, client providers.Client, ref string, info providers.ModelInfo, o *outcome) (string, bool) {
	state, healed := j.start, false
	system := window.EstimateText(j.system)
	queue := Pieces(j.lines, info.Window, j.focus)
	for len(queue) > 0 {
		p := queue[0]
		room := answerRoom(info.Window)
		f := j.frame(state)
		// The piece's lines were counted when it was cut (Pieces): the
		// request's estimate adds their counts, where estimating the whole
		// prompt read a fold's text a second time.
		raw := system + f.estimate(p)
		if raw > window.InputRoom(info.Window, room, j.cal) {
			if len(p.Lines) > 1 {
				half := len(p.Lines) / 2
				queue = append([]Piece{{Lines: p.Lines[:half]}, {Lines: p.Lines[half:]}}, queue[1:]...)
				continue
			}
			state, p = j.squeeze(state, p, room, info.Window)
			f = j.frame(state)
			raw = system + f.estimate(p)
		}
		sent := window.OneShotEstimate(raw, j.cal)
		text, usage, err := callWith(ctx, cfg, sem, client, info, j.system, framed(f, p), room, sent)
		o.usage = o.usage.Add(usage)
		o.requests++
		var pe *providers.Error
		if errors.As(err, &pe) && pe.TooLong && !healed {
			healed = true
			var lerr error
			info.Window, lerr = providers.RetryWindow(ctx, pe, sent, room, info.Window, func(ctx context.Context, w int) (int, error) {
				return cfg.Catalog.Learn(ctx, ref, w)
			})
			if lerr != nil {
				cfg.Log.Warn().Err(lerr).Str("model", ref).Msg("summarizer: learn window")
			}
			var rest []string
			for _, q := range queue {
				rest = append(rest, q.Lines...)
			}
			queue = Pieces(rest, info.Window, j.focus)
			continue
		}
		if err == nil && j.valid != nil && !j.valid(text) {
			err = errNotSummary
		}
		if err != nil {
			o.errs = append(o.errs, fmt.Sprintf("%s: %v", ref, err))
			return "", false
		}
		state = text
		queue = queue[1:]
	}
	return state, true
}

// squeeze cuts a one-line piece, and the state when it alone leaves too
// little room, until the request fits the window.
func (j job) squeeze(state string, p Piece, answer, windowTokens int) (string, Piece) {
	total := window.InputRoom(windowTokens, answer, j.cal)
	system := window.EstimateText(j.system)
	for range 8 {
		lineRoom := total - system - j.frame(state).estimate(Piece{})
		if lineRoom < total/4 {
			state = cutMiddle(state, max(total/4, 64))
			continue
		}
		if len(p.Lines) == 1 {
			p = Piece{Lines: []string{cutMiddle(p.Lines[0], lineRoom)}}
		}
		if system+j.frame(state).estimate(p) <= window.InputRoom(windowTokens, answer, j.cal) {
			break
		}
		total = total * 3 / 4
	}
	return state, p
}

// run folds a chat's turns into its summary. With no model succeeding, the
// old summary stays and the digest grows.
func run(ctx context.Context, cfg Config, m *Fold, models []string, sems []lane) *Folded {
	res := &Folded{ReqID: m.ReqID, ChatID: m.ChatID}
	// One masker for all the model reads, in the prompt's order: summary,
	// focus, lines. Earlier placeholders keep their numbers.
	mk := redact.NewMasker()
	start := mk.Mask(m.Summary)
	if m.Digest != "" {
		start = strings.TrimSpace(start + "\nFacts noted without a summary:\n" + mk.Mask(m.Digest))
	}
	focus := mk.Mask(m.Focus)
	var first outcome
	if len(models) > 0 {
		if text, ok := prefixFold(ctx, cfg, m, models[0], sems[0], &first); ok {
			res.OK, res.Summary, res.Model = true, text, models[0]
			res.Usage, res.Requests = first.usage, first.requests
			return res
		}
	}
	o := job{models: models, sems: sems, lines: Lines(WithoutRefused(m.Turns), mk), focus: focus, system: Instructions, start: start, cal: window.Calibration{Factor: m.Factor},
		frame: func(state string) frame { return userFrame(state, focus) }}.do(ctx, cfg)
	o.usage, o.requests, o.errs = o.usage.Add(first.usage), o.requests+first.requests, append(first.errs, o.errs...)
	res.Usage, res.Requests = o.usage, o.requests
	if o.ok {
		res.OK, res.Summary, res.Model = true, o.state, o.model
		return res
	}
	// The digest stands in for a summary that did not come, so it is made
	// only then: it was two thirds of a successful fold's CPU.
	res.Err, res.Digest = strings.Join(o.errs, "; "), Digest(m.Digest, m.Turns)
	return res
}

var errNotSummary = errors.New("the reply was not a summary")

// callWith makes one summarising request with the given instructions;
// sent is its estimate (window.OneShotEstimate).
func callWith(ctx context.Context, cfg Config, sem lane, client providers.Client, info providers.ModelInfo, system, prompt string, room, sent int) (string, chat.Usage, error) {
	return ask(ctx, cfg, sem, client, info, providers.Request{
		Model: info.ID, System: system, MaxTokens: room,
		Messages: []chat.Message{{Role: chat.RoleUser, Content: prompt}},
		NumCtx:   info.Window, EstimatedInput: sent,
	})
}

// ask makes one summarising request and accepts only a summary back.
func ask(ctx context.Context, cfg Config, sem lane, client providers.Client, info providers.ModelInfo, req providers.Request) (string, chat.Usage, error) {
	release, err := sem.acquire(ctx)
	if err != nil {
		return "", chat.Usage{}, err
	}
	defer release()
	cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
	defer cancel()
	cctx, span := telemetry.StartModelCall(cctx, telemetry.Tracer(cfg.Traces), info.Provider, info.ID)
	resp, err := client.Stream(cctx, req, func(providers.Event) {})
	telemetry.EndModelCall(span, resp.Usage, string(resp.FinishReason), err)
	if err != nil {
		return "", resp.Usage, err
	}
	text, ok := Accept(resp.Message.Content, len(resp.Message.ToolCalls))
	if !ok {
		return "", resp.Usage, errNotSummary
	}
	return text, resp.Usage, nil
}
