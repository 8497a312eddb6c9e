// Package learner is the learner actor: it learns what the person said in a
// chat before the model forgets it (seed 0055 §4) and stores it through
// memory.Store. A fold fires a *Learn at it; a periodic sweep walks every
// chat for words no fold handed over. Only the person's own words are read,
// never a shared chat; what a chat that read untrusted text (or with
// remembering automatically off) teaches waits for an OK.
//
// Ownership: the actor owns every goroutine it starts (model calls, sweeps)
// and the sweep timer. It cancels them on *actor.Stopping and waits for them
// (at most Config.StopWait), so nothing writes to the store after the
// daemon closes it. Receive never blocks on a model or on Badger: a Learn
// send costs the session one enqueue, and the session never waits.
//
// No double reading: each chat has a read-until mark in memory.Store; a run
// reads only words past it and raises it when it is done. One run per chat
// at a time (a second Learn for a busy chat is merged into one queued
// entry), at most Config.MaxRuns runs at once, shared fairly between tenants
// (fairshare.Share): a tenant holds at most Config.PerTenant of them, and a
// run that ends goes to the waiting tenant holding fewest, so one tenant's
// many chats, or its provider hanging on them, hold no other tenant's
// learning for longer than one run. Without a model, or with an
// answer it cannot read, a run stores nothing and marks nothing read, so the
// next sweep tries those words again.
package learner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/fairshare"
	"github.com/agentd/agentd/memory"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/window"
)

// Catalog is what the learner needs of the model catalog.
type Catalog interface {
	Resolve(ref string) (providers.Client, providers.ModelInfo, error)
	// SummaryModels lists the models to summarise (and learn) with for a
	// chat's model, cheapest first.
	SummaryModels(ref string) []string
	// Learn records the window a refusal taught for ref (persisted, shared
	// with every chat on that model) and returns the window now believed.
	Learn(ctx context.Context, ref string, window int) (int, error)
}

// Chats is what the sweep needs of persistence (*persistence.Store).
type Chats interface {
	Chats(ctx context.Context, tenant string) ([]persistence.Chat, error)
	Messages(ctx context.Context, chatID string, from, to int64) ([]chat.Message, error)
	LoadSnapshot(ctx context.Context, chatID string) (persistence.Snapshot, bool, error)
}

// Config configures the learner. Store, Catalog and Chats are required.
type Config struct {
	Store   *memory.Store
	Catalog Catalog
	Chats   Chats
	Log     zerolog.Logger
	// SweepEvery is the period of the sweep over every chat. Optional.
	// Defaults to 24h; negative turns the periodic sweep off (Sweep still
	// works).
	SweepEvery time.Duration
	// MaxRuns bounds learning runs in flight across chats. Optional.
	// Defaults to 2: learning is background work and must not crowd out
	// turns at the provider.
	MaxRuns int
	// PerTenant bounds one tenant's runs in flight, so another tenant's
	// fold finds a run free or next to free. Optional. Defaults to
	// MaxRuns-1 (at least 1); at most MaxRuns (what the hub sets where the
	// daemon serves one tenant).
	PerTenant int
	// CallTimeout bounds one extraction request. Optional. Defaults to 2m.
	CallTimeout time.Duration
	// PieceBytes bounds the words sent in one extraction request, besides
	// the window of the model it goes to. Optional. Defaults to 24000 (the
	// seed's piece a small model reads whole).
	PieceBytes int
	// StopWait bounds how long stopping waits for runs in flight. Optional.
	// Defaults to 10s.
	StopWait time.Duration
	// Observe is told of every finished run, on the actor's goroutine (keep
	// it quick). Optional. For metrics and tests.
	Observe func(Outcome)
	// Learned is told of every run that stored memories, on the run's own
	// goroutine before Observe (it may write: the chat's activity log).
	// Optional.
	Learned func(ctx context.Context, o Outcome)
}

// Outcome reports one finished learning run.
type Outcome struct {
	ChatID string
	Tenant string
	Source string
	// Read is how many of the person's messages past the mark it had.
	Read int
	// Added lists the memories stored; Waiting tells they wait for an OK.
	Added   []string
	Waiting bool
	// ModelCalls counts extraction requests made, and Usage sums what
	// their providers reported.
	ModelCalls int
	Usage      chat.Usage
	// Mark is the chat's read-until mark afterwards; Marked says this run
	// raised it.
	Mark   int64
	Marked bool
	// Err is why the run stored nothing and left the words unread.
	Err error
}

// ErrNoModel: no model to learn with; the words stay unread.
var ErrNoModel = errors.New("learner: no model to learn with")

// ErrUnreadable: the model's answer was not a JSON list of facts.
var ErrUnreadable = errors.New("learner: the answer was not a list of facts")

// Props returns the learner's props.
func Props(cfg Config) *actor.Props {
	if cfg.SweepEvery == 0 {
		cfg.SweepEvery = 24 * time.Hour
	}
	if cfg.MaxRuns <= 0 {
		cfg.MaxRuns = 2
	}
	if cfg.PerTenant <= 0 {
		cfg.PerTenant = max(cfg.MaxRuns-1, 1)
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	if cfg.PieceBytes <= 0 {
		cfg.PieceBytes = 24_000
	}
	if cfg.StopWait <= 0 {
		cfg.StopWait = 10 * time.Second
	}
	cfg.Log = cfg.Log.With().Str("component", "learner").Logger()
	return actors.Props(cfg.Log, func() actor.Actor {
		ctx, cancel := context.WithCancel(context.Background())
		return &learnerActor{cfg: cfg, ctx: ctx, cancel: cancel, runs: fairshare.New(cfg.MaxRuns, cfg.PerTenant),
			running: map[string]string{}, pending: map[string]*Learn{}, waiting: map[uint64]string{}}
	})
}

type learnerActor struct {
	cfg    Config
	ctx    context.Context // cancelled on Stopping; every run uses it
	cancel context.CancelFunc
	work   actors.Group // runs and sweeps in flight

	runs     *fairshare.Share  // the runs in flight, by tenant
	running  map[string]string // chat → its tenant, while a run is in flight
	pending  map[string]*Learn // chat → the merged Learn waiting to run
	waiting  map[uint64]string // a ticket waiting for a run → its chat
	sweeping bool
	stopTick scheduler.CancelFunc
}

var _ actor.Actor = (*learnerActor)(nil)

func (a *learnerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Learn:
		a.handleLearn(ctx, m)
	case *learnDone:
		a.handleDone(ctx, m)
	case *sweepTick:
		a.startSweep(ctx, nil)
	case *Sweep:
		a.startSweep(ctx, ctx.Sender())
	case *sweepDone:
		a.sweeping = false
	case *Status:
		ctx.Respond(&StatusReply{Running: len(a.running), Queued: len(a.pending), Sweeping: a.sweeping})
	case *actor.Started:
		a.startTimer(ctx)
	case *actor.Stopping, *actor.Restarting:
		// A restart replaces this instance: its runs and timer go with it,
		// and the sweep finds whatever they left unread.
		a.stop()
	case *actor.Stopped:
	default:
		a.cfg.Log.Warn().Type("type", m).Msg("learner: unknown message")
	}
}

// startTimer schedules the periodic sweep. The timer sends through the root
// context from its own goroutine, which is safe, unlike ReceiveTimeout
// (protoactor issue #1139).
func (a *learnerActor) startTimer(ctx actor.Context) {
	if a.cfg.SweepEvery < 0 {
		return
	}
	s := scheduler.NewTimerScheduler(ctx.ActorSystem().Root)
	a.stopTick = s.SendRepeatedly(a.cfg.SweepEvery, a.cfg.SweepEvery, ctx.Self(), &sweepTick{})
}

// stop cancels the timer and every run, then waits for them, so none
// writes to the store after the daemon closes it.
func (a *learnerActor) stop() {
	if a.stopTick != nil {
		a.stopTick()
	}
	a.cancel()
	if !a.work.Wait(a.cfg.StopWait) {
		a.cfg.Log.Warn().Dur("waited", a.cfg.StopWait).Msg("learner: runs still in flight at stop")
	}
}

// ready reports whether the required dependencies are set; without them the
// learner logs and learns nothing rather than panicking on a goroutine.
func (a *learnerActor) ready() bool {
	if a.cfg.Store == nil || a.cfg.Catalog == nil || a.cfg.Chats == nil {
		a.cfg.Log.Error().Msg("learner: Store, Catalog and Chats are required; learning is off")
		return false
	}
	return true
}

func (a *learnerActor) handleLearn(ctx actor.Context, m *Learn) {
	if !a.ready() {
		return
	}
	if m.Shared {
		// Other people are in the chat: what they say is not the person's.
		a.cfg.Log.Debug().Str("chat_id", m.ChatID).Msg("learner: shared chat skipped")
		return
	}
	l := own(m)
	if p, ok := a.pending[l.ChatID]; ok {
		a.pending[l.ChatID] = merge(p, l)
		return
	}
	a.pending[l.ChatID] = l
	if _, ok := a.running[l.ChatID]; !ok {
		a.ask(ctx, l)
	}
}

func (a *learnerActor) handleDone(ctx actor.Context, m *learnDone) {
	tenant := a.running[m.out.ChatID]
	delete(a.running, m.out.ChatID)
	o := m.out
	ev := a.cfg.Log.Debug()
	if o.Err != nil {
		ev = a.cfg.Log.Warn().Err(o.Err)
	}
	ev.Str("chat_id", o.ChatID).Str("source", o.Source).Int("read", o.Read).Int("added", len(o.Added)).
		Bool("waiting", o.Waiting).Int64("mark", o.Mark).Msg("learner: run finished")
	if a.cfg.Observe != nil {
		a.cfg.Observe(o)
	}
	for _, g := range a.runs.Release(tenant) {
		a.start(ctx, a.waiting[g.Ticket])
		delete(a.waiting, g.Ticket)
	}
	// A Learn that came while the chat's run was in flight asks now: one
	// run per chat.
	if l, ok := a.pending[o.ChatID]; ok {
		a.ask(ctx, l)
	}
}

// ask starts l's run if its tenant may have one now, else queues it for
// the run that frees next.
func (a *learnerActor) ask(ctx actor.Context, l *Learn) {
	ticket, ok := a.runs.Ask(l.Tenant)
	if !ok {
		a.waiting[ticket] = l.ChatID
		return
	}
	a.start(ctx, l.ChatID)
}

// start runs the chat's pending Learn, whose tenant holds a run for it.
func (a *learnerActor) start(ctx actor.Context, chatID string) {
	l := a.pending[chatID]
	delete(a.pending, chatID)
	a.running[chatID] = l.Tenant
	a.launch(ctx, l)
}

func (a *learnerActor) launch(ctx actor.Context, l *Learn) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	runCtx, cfg := a.ctx, a.cfg
	a.work.Go(func() {
		out := learn(runCtx, cfg, l)
		if cfg.Learned != nil && len(out.Added) > 0 {
			cfg.Learned(runCtx, out)
		}
		root.Send(self, &learnDone{out: out})
	})
}

func (a *learnerActor) startSweep(ctx actor.Context, reply *actor.PID) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	if !a.ready() {
		if reply != nil {
			root.Send(reply, &Swept{Err: "learner is not configured"})
		}
		return
	}
	if a.sweeping {
		if reply != nil {
			root.Send(reply, &Swept{Busy: true})
		}
		return
	}
	a.sweeping = true
	runCtx, cfg := a.ctx, a.cfg
	a.work.Go(func() {
		queued, err := sweep(runCtx, cfg, func(l *Learn) { root.Send(self, l) })
		root.Send(self, &sweepDone{})
		if err != nil {
			cfg.Log.Warn().Err(err).Msg("learner: sweep")
		}
		if reply != nil {
			res := &Swept{Queued: queued}
			if err != nil {
				res.Err = err.Error()
			}
			root.Send(reply, res)
		}
	})
}

// own copies what the actor keeps of a Learn (a sent message is never
// mutated, by either side) and keeps only the person's own words.
func own(m *Learn) *Learn {
	l := *m
	l.Words = PersonWords(m.Words, 0)
	if l.Source == "" {
		l.Source = memory.SourceFold
	}
	return &l
}

// merge folds a later Learn for the same chat into a queued one: the words
// of both (each seq once, in order), the later stretch's end, and every
// reason to wait for an OK.
func merge(a, b *Learn) *Learn {
	out := *a
	out.Words = slices.Clone(a.Words)
	for _, w := range b.Words {
		if !slices.ContainsFunc(out.Words, func(x chat.Message) bool { return x.Seq == w.Seq }) {
			out.Words = append(out.Words, w)
		}
	}
	slices.SortFunc(out.Words, func(x, y chat.Message) int { return int(x.Seq - y.Seq) })
	out.ThroughSeq = max(a.ThroughSeq, b.ThroughSeq)
	out.Untrusted = a.Untrusted || b.Untrusted
	out.NoAuto = a.NoAuto || b.NoAuto
	if b.Model != "" {
		out.Model = b.Model
	}
	if b.Source == memory.SourceFold {
		out.Source = memory.SourceFold
	}
	return &out
}

// learn is one run: read past the mark, ask the cheapest model, store what
// it found, raise the mark. It runs on a goroutine the actor owns.
func learn(ctx context.Context, cfg Config, l *Learn) (out Outcome) {
	out = Outcome{ChatID: l.ChatID, Tenant: l.Tenant, Source: l.Source}
	mark, err := cfg.Store.ReadUntil(ctx, l.Tenant, l.ChatID)
	if err != nil {
		out.Err = err
		return out
	}
	out.Mark = mark
	words := PersonWords(l.Words, mark)
	out.Read = len(words)
	if len(words) == 0 {
		// Nothing of the person's past the mark: the stretch is read
		// without needing a model.
		return raise(ctx, cfg, out, l.ThroughSeq)
	}
	refs := cfg.Catalog.SummaryModels(l.Model)
	if len(refs) == 0 {
		out.Err = fmt.Errorf("%w for %q", ErrNoModel, l.Model)
		return out
	}
	client, info, err := cfg.Catalog.Resolve(refs[0])
	if err != nil {
		out.Err = fmt.Errorf("%w: %s: %w", ErrNoModel, refs[0], err)
		return out
	}
	facts, readTo, err := extractAll(ctx, cfg, client, refs[0], info, l, words, &out)
	if err != nil {
		out.Err = fmt.Errorf("learn from chat %s with %s: %w", l.ChatID, refs[0], err)
	}
	if readTo == 0 {
		return out
	}
	if out.Err == nil {
		readTo = max(readTo, l.ThroughSeq) // every piece read: the whole stretch is
	}
	wait := l.Untrusted || l.NoAuto
	// The memories and the raised mark are one write: one sync.
	run, _, err := cfg.Store.Add(ctx, memory.AddInput{Tenant: l.Tenant, ChatID: l.ChatID, Source: l.Source,
		FromSeq: words[0].Seq, ToSeq: readTo, Texts: facts, Wait: wait, ReadTo: readTo})
	if errors.Is(err, memory.ErrFull) {
		// The tenant keeps as many memories as it may: what these words
		// taught is not kept, and asking the model again at every sweep
		// would only pay for the same refusal. They are read.
		out.Err = errors.Join(out.Err, err)
		return raise(ctx, cfg, out, readTo)
	}
	if err != nil {
		// Not stored, so not read: the sweep tries again.
		out.Err = errors.Join(out.Err, err)
		return out
	}
	out.Added, out.Waiting = run.Added, wait && len(run.Added) > 0
	return out.raisedTo(readTo)
}

func raise(ctx context.Context, cfg Config, out Outcome, to int64) Outcome {
	if to <= out.Mark {
		return out
	}
	if err := cfg.Store.SetReadUntil(ctx, out.Tenant, out.ChatID, to); err != nil {
		out.Err = errors.Join(out.Err, err)
		return out
	}
	return out.raisedTo(to)
}

// raisedTo is o once the chat's mark is raised to to (stored).
func (o Outcome) raisedTo(to int64) Outcome {
	if to > o.Mark {
		o.Mark, o.Marked = to, true
	}
	return o
}

// extractAll reads words piece by piece, each sized to the window of the
// model (info) with the chat's estimate corrections, and returns the facts
// found and the last seq read. A refusal for length heals once: the window
// it teaches is learned for ref (every chat on that model gains), the piece
// is cut smaller and asked again. The requests made and their usage are
// counted in out.
func extractAll(ctx context.Context, cfg Config, client providers.Client, ref string, info providers.ModelInfo,
	l *Learn, words []chat.Message, out *Outcome) ([]string, int64, error) {
	cal := window.Calibration{Factor: l.Factor}
	var facts []string
	readTo := int64(0)
	healed := false
	answer := window.OneShotAnswer(info.Window, answerRoom)
	ps := pieces(words, cfg.PieceBytes, pieceRoom(info.Window, answer, cal))
	for len(ps) > 0 {
		p := ps[0]
		got, usage, err := extract(ctx, cfg, client, info, p, answer, cal)
		out.ModelCalls++
		out.Usage = out.Usage.Add(usage)
		var pe *providers.Error
		if errors.As(err, &pe) && pe.TooLong && !healed {
			healed = true
			sent := window.OneShotEstimate(rawEstimate(p), cal)
			var lerr error
			info.Window, lerr = providers.RetryWindow(ctx, pe, sent, answer, info.Window, func(ctx context.Context, w int) (int, error) {
				return cfg.Catalog.Learn(ctx, ref, w)
			})
			if lerr != nil {
				cfg.Log.Warn().Err(lerr).Str("model", ref).Msg("learner: learn window")
			}
			answer = window.OneShotAnswer(info.Window, answerRoom)
			rest := slices.DeleteFunc(slices.Clone(words), func(m chat.Message) bool { return m.Seq <= readTo })
			ps = pieces(rest, cfg.PieceBytes, pieceRoom(info.Window, answer, cal))
			continue
		}
		if err != nil {
			return facts, readTo, err
		}
		facts = append(facts, got...)
		readTo = p.lastSeq
		ps = ps[1:]
	}
	return facts, readTo, nil
}

// pieceRoom is the estimated tokens of words one extraction request may
// carry on a window, besides its instructions and framing.
func pieceRoom(windowTokens, answer int, cal window.Calibration) int {
	fixed := rawEstimate(piece{}) + 16
	return max(window.InputRoom(windowTokens, answer, cal)-fixed, 64)
}

// extract asks the model for the facts in one piece, and returns them
// with the usage the provider reported, which a failed request may have
// too.
func extract(ctx context.Context, cfg Config, client providers.Client, info providers.ModelInfo, p piece, answer int, cal window.Calibration) ([]string, chat.Usage, error) {
	cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
	defer cancel()
	resp, err := client.Stream(cctx, providers.Request{
		Model: info.ID, System: Instructions, MaxTokens: answer,
		Messages:       []chat.Message{{Role: chat.RoleUser, Content: userPrompt(p)}},
		NumCtx:         info.Window,
		EstimatedInput: window.OneShotEstimate(rawEstimate(p), cal),
	}, func(providers.Event) {})
	if err != nil {
		return nil, resp.Usage, err
	}
	if len(resp.Message.ToolCalls) > 0 {
		return nil, resp.Usage, ErrUnreadable
	}
	facts, ok := ParseFacts(resp.Message.Content)
	if !ok {
		return nil, resp.Usage, ErrUnreadable
	}
	return facts, resp.Usage, nil
}

// sweep walks every chat that is not shared and queues, through send, the
// person's words past its read-until mark. It returns the chats it queued.
func sweep(ctx context.Context, cfg Config, send func(*Learn)) ([]string, error) {
	chats, err := cfg.Chats.Chats(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("sweep: list chats: %w", err)
	}
	var queued []string
	var errs []error
	for _, c := range chats {
		if ctx.Err() != nil {
			return queued, ctx.Err()
		}
		if c.Shared {
			continue
		}
		l, err := sweepChat(ctx, cfg, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if l != nil {
			send(l)
			queued = append(queued, c.ID)
		}
	}
	return queued, errors.Join(errs...)
}

// sweepChat reads one chat past its mark; nil when there is nothing new.
func sweepChat(ctx context.Context, cfg Config, c persistence.Chat) (*Learn, error) {
	mark, err := cfg.Store.ReadUntil(ctx, c.Tenant, c.ID)
	if err != nil {
		return nil, fmt.Errorf("sweep chat %s: %w", c.ID, err)
	}
	msgs, err := cfg.Chats.Messages(ctx, c.ID, mark+1, 0)
	if err != nil {
		return nil, fmt.Errorf("sweep chat %s: %w", c.ID, err)
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	snap, _, err := cfg.Chats.LoadSnapshot(ctx, c.ID)
	if err != nil {
		return nil, fmt.Errorf("sweep chat %s: %w", c.ID, err)
	}
	model := snap.Model
	if model == "" {
		model = c.Model
	}
	return &Learn{ChatID: c.ID, Tenant: c.Tenant, Words: PersonWords(msgs, mark),
		ThroughSeq: msgs[len(msgs)-1].Seq, Model: model, Factor: snap.Factor,
		Untrusted: snap.Untrusted || slices.ContainsFunc(msgs, func(m chat.Message) bool { return m.Untrusted }),
		NoAuto:    c.NoAutoRemember, Source: memory.SourceSweep}, nil
}
