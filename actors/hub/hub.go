// Package hub owns agentd's actor system: it spawns the top-level actors
// (the session registry, the summariser, the learner and the tool index),
// wires their shared dependencies, and is the one door the HTTP API knocks
// on. Every method checks the caller's tenant: a chat of another tenant is
// "not found".
package hub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/actors/cluster"
	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/session"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/actors/toolindex"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/attachments"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/eventbus"
	"github.com/agentd/agentd/memory"
	"github.com/agentd/agentd/modelcatalog"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/prompts"
	"github.com/agentd/agentd/recall"
	"github.com/agentd/agentd/redact"
	"github.com/agentd/agentd/telemetry"
	"github.com/agentd/agentd/tools"
)

// Errors the hub answers with; the HTTP API maps them to statuses.
var (
	ErrNotFound = errors.New("not found")
	ErrInvalid  = session.ErrInvalid
	ErrBusy     = session.ErrBusy
	ErrLimit    = errors.New("limit reached")
	ErrStopping = session.ErrStopping
	// ErrMoved: another node claimed the chat while this one held it (the
	// store's single-writer fence); nothing was stored, send it again.
	ErrMoved = session.ErrMoved
	// ErrFailed: the chat's session panicked (a bug, in the log with its
	// panic) and was restarted, or stopped after panicking too often;
	// the next message wakes it afresh.
	ErrFailed  = session.ErrFailed
	ErrTimeout = errors.New("timed out")
	// ErrIndexFailed: indexing a toolset put panicked (a bug, in the
	// error with its stack); nothing was stored.
	ErrIndexFailed = toolindex.ErrChangeFailed
	// ErrUnknownModel: a model no provider serves (with ErrInvalid).
	ErrUnknownModel = modelcatalog.ErrUnknownModel
	// ErrStorageFull: a file would pass attachments.max_bytes or the
	// tenant's attachments.max_bytes_per_tenant (with ErrInvalid).
	ErrStorageFull = attachments.ErrStorageFull
	// ErrStoreUnavailable is what an API says for an error StoreUnavailable
	// names; the store's own error (its host, SQL state) is the operator's.
	ErrStoreUnavailable = errors.New("the store is unavailable for a moment (its server restarting, a connection lost): " +
		"send the request again shortly; a message sent again under its Idempotency-Key is stored once")
)

// StoreUnavailable reports whether err is the store (Postgres) out of reach
// for a moment: a connection lost, the server restarting
// (persistence.Unavailable). The request was not acknowledged; sending it
// again shortly is the cure, so an API answers 503 with Retry-After, not an
// internal error.
func StoreUnavailable(err error) bool { return persistence.Unavailable(err) }

// StoreClosed reports whether err is the store's, closed as the daemon
// stops (a read its Close cut when the server did not answer): an API
// answers it as ErrStopping, not as its own failure.
func StoreClosed(err error) bool { return errors.Is(err, persistence.ErrClosed) }

// SettingError is a chat setting refused (with ErrInvalid): its Field
// names the setting, so an API can name its own request's field.
type SettingError = chat.SettingError

// CheckSettings checks settings against the ranges every protocol shares
// (a refusal is a *SettingError); a chat's model checks the rest when the
// chat takes them.
func CheckSettings(s api.Settings) error { return settingsOf(&s).Validate() }

// askTimeout bounds a question to a session (not a turn).
const askTimeout = 30 * time.Second

// watcherPatience is how long a watcher may stay behind its chat's events
// (token deltas dropped for it) before the bus drops it; one whose buffer
// is full is dropped at once. Nobody waits for a watcher (docs/design.md).
const watcherPatience = 10 * time.Second

// Hub is safe for concurrent use.
type Hub struct {
	cfg     configs.Config
	log     zerolog.Logger
	store   Store
	catalog *modelcatalog.Catalog
	tools   *tools.Registry
	bus     *eventbus.Bus
	turns   *tenantSlots
	ingest  *ingestLimits
	metrics *Metrics
	memory  *memory.Store
	files   *attachments.Store
	tracer  trace.Tracer
	// pgFailingAfter is store.failing_after: how long Postgres may not
	// answer before /healthz says failing.
	pgFailingAfter time.Duration
	// storeCloseWait is store.close_wait: how long the store's Close may
	// take, from its turn, before it gives up what is not committed.
	storeCloseWait time.Duration
	// totals counts the attachment bytes tenants hold, one by one and
	// together (attachments.max_bytes_per_tenant, max_bytes); toolsetPuts makes a
	// tenant's toolset PUTs take turns (toolsets.max_per_tenant);
	// connects bounds a tenant's MCP servers being connected at once.
	totals      attachTotals
	toolsetPuts tenantLocks
	connects    *tenantSlots
	// toolsetGates holds back what uses or changes a tenant's tools until
	// its stored toolsets, built at start, are registered (toolsetsReady).
	toolsetGates tenantGates

	system *actor.ActorSystem
	// sessions runs the session actors' mailboxes, and workers their calls
	// and awaited writes; Close stops both after them.
	sessions  *actors.Dispatcher
	workers   *actors.Dispatcher
	registry  *actor.PID
	summarize *actor.PID
	learner   *actor.PID
	toolIndex *actor.PID
	closeMCP  func() error
	// node is this process's cluster membership (cluster mode), else nil.
	node *cluster.Node

	// work owns the hub's own goroutines (background refreshes, submits
	// waiting for their turn, the stored toolsets' builds); cancel ends
	// the refreshes and the builds, Close waits.
	work   actors.Group
	ctx    context.Context
	cancel context.CancelFunc
}

// DefaultRefreshEvery is how often the providers' model lists are re-read
// while every provider answers.
const DefaultRefreshEvery = 5 * time.Minute

// Options are what New needs beyond the configuration.
type Options struct {
	// Tools registers extra tools, e.g. an embedding application's own.
	Tools func(*tools.Registry) error
	// HTTPClient is used for every provider. Optional.
	HTTPClient *http.Client
	// InMemory keeps Badger in memory (tests, benchmarks); a Postgres
	// store is unaffected.
	InMemory bool
	// RefreshEvery is how often the providers' lists are re-read while all
	// answer (the longest backoff while one does not). 0 means
	// DefaultRefreshEvery; negative: only when asked (Refresh), as tests
	// that script a provider's every request need.
	RefreshEvery time.Duration
	// TracerProvider gives turns, model calls, tools and folds their spans
	// (docs/tracing.md). Optional: nil traces nothing.
	TracerProvider trace.TracerProvider
	// AdvertiseHTTP is this node's HTTP base URL in cluster mode when
	// cluster.advertise_http is unset: the address the server really
	// listens on. Optional: http://<listen> otherwise.
	AdvertiseHTTP string
}

// New opens the store, builds the catalog and the tools, and starts the
// actors. The stored toolsets are built after it returns (loadToolsets).
// Close stops them.
func New(ctx context.Context, cfg configs.Config, log zerolog.Logger, opts Options) (*Hub, error) {
	metrics := newMetrics()
	store, err := openStore(ctx, cfg, log, opts.InMemory, metrics.storeDurable)
	if err != nil {
		return nil, err
	}
	return newOn(ctx, cfg, log, opts, store, metrics)
}

// newOn is New on an open store (a test's store wraps the one openStore
// opened). If it fails, it stops what it started and closes the store as
// Close does, the store within store.close_wait: a start that failed on a
// Postgres that stopped answering would otherwise wait for it as long as
// it takes, and the actors and their dispatchers would run on.
func newOn(ctx context.Context, cfg configs.Config, log zerolog.Logger, opts Options, store Store, metrics *Metrics) (*Hub, error) {
	h := &Hub{cfg: cfg, log: log, store: store, bus: eventbus.New(watcherPatience, wireEvent), turns: newTenantSlots(cfg.Limits.TurnsPerTenant), connects: newTenantSlots(mcpConnectsPerTenant), ingest: newIngestLimits(cfg.Limits.IngestBytesPerSecond), metrics: metrics, tracer: telemetry.Tracer(opts.TracerProvider),
		pgFailingAfter: cfg.Store.FailingAfterOrDefault(), storeCloseWait: cfg.Store.CloseWaitOrDefault()}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if _, ok := store.(*persistence.Store); ok {
		h.metrics.watchStore(h.badgerSizes)
	}
	if err := h.build(ctx, opts); err != nil {
		if cerr := h.Close(ctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("stop what the start began: %w", cerr))
		}
		return nil, err
	}
	return h, nil
}

func (h *Hub) build(ctx context.Context, opts Options) error {
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: ProviderTransport()}
	}
	cat, err := modelcatalog.New(ctx, h.cfg.Providers, h.store, hc, h.log.With().Str("component", "catalog").Logger())
	if err != nil {
		return err
	}
	h.catalog = cat
	h.tools = tools.NewRegistry()
	h.tools.LimitTenantTools(h.cfg.Toolsets.MaxToolsPerTenant)
	if err := tools.RegisterBuiltins(h.tools); err != nil {
		return fmt.Errorf("built-in tools: %w", err)
	}
	if err := recall.Register(h.tools, h.store); err != nil {
		return fmt.Errorf("recall tools: %w", err)
	}
	h.memory = memory.New(h.store, memory.Options{Mask: redact.Mask, MaxPerTenant: max(h.cfg.Limits.MemoriesPerTenant, 0)}) // -1: none
	if err := memory.RegisterTools(h.tools, h.memory); err != nil {
		return fmt.Errorf("memory tools: %w", err)
	}
	if h.files, err = attachments.NewStore(h.cfg.DataDir+"/attachments", h.cfg.Attachments.MaxBytes); err != nil {
		return err
	}
	if err := h.loadAttachTotals(ctx); err != nil {
		return err
	}
	if err := attachments.RegisterTools(h.tools, h.files, owners{h.store}); err != nil {
		return fmt.Errorf("attachment tools: %w", err)
	}
	if opts.Tools != nil {
		if err := opts.Tools(h.tools); err != nil {
			return fmt.Errorf("application tools: %w", err)
		}
	}
	h.closeMCP, err = tools.ConnectMCP(ctx, mcpServers(h.cfg.MCPServers, h.cfg.Limits.MaxToolResultBytes), h.tools, h.log.With().Str("component", "mcp").Logger())
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	h.startActors(opts)
	if err := h.loadToolsets(ctx); err != nil {
		return err
	}
	if err := h.joinCluster(ctx, opts); err != nil {
		return err
	}
	h.dropUnkeptAtStart(ctx)
	h.watch(opts.RefreshEvery)
	h.sweepFiles()
	return nil
}

// watch keeps the providers' lists fresh until Close, so a provider that
// comes up after agentd just works and health says what is true now.
func (h *Hub) watch(every time.Duration) {
	if every < 0 {
		return
	}
	if every == 0 {
		every = DefaultRefreshEvery
	}
	h.work.Go(func() { h.catalog.Watch(h.ctx, every) })
}

// mcpServers are the configured servers; each answer is bounded like any
// tool's result.
func mcpServers(cs []configs.MCPServer, maxResult int) []tools.MCPServer {
	out := make([]tools.MCPServer, len(cs))
	for i, c := range cs {
		out[i] = tools.MCPServer{Name: c.Name, Command: c.Command, Env: c.Env, URL: c.URL, Headers: c.Headers, BareNames: c.BareNames, MaxResultBytes: maxResult}
	}
	return out
}

// sessionWorkers bounds the goroutines that run the sessions' mailboxes:
// a run waits on no I/O of its own (a turn's writes and a chat's first read
// are awaited off the mailbox), so the cores stay busy with room for the
// runs that still wait on a write (a tool round's results, the day's memory
// map), and a burst of chats queues for warm workers.
const sessionWorkers = 64

func (h *Hub) startActors(opts Options) {
	h.system = actors.NewSystem(h.log)
	h.sessions = actors.NewBoundedDispatcher(sessionWorkers)
	h.workers = actors.NewDispatcher(0, 0, 0)
	root := h.system.Root
	// What folds and learning cost reaches the metrics by the actors' own
	// callbacks, as a turn's tokens come by the sessions' Deps.Metrics.
	sumCfg := summarizer.Config{Catalog: h.catalog, Log: h.log, Traces: opts.TracerProvider,
		Spent: func(u chat.Usage) { h.metrics.Tokens(PurposeSummary, u) }}
	learnCfg := learner.Config{Store: h.memory, Catalog: h.catalog, Chats: h.store,
		Log: h.log, SweepEvery: h.cfg.Learner.SweepEvery.Duration, Learned: h.learned,
		Observe: func(o learner.Outcome) { h.metrics.Tokens(PurposeLearn, o.Usage) }}
	if soleTenant(h.cfg.Auth) {
		// No other tenant to keep a slot free for: the cap would only idle one.
		sumCfg.PerTenant, learnCfg.PerTenant = math.MaxInt, math.MaxInt
	}
	h.summarize = root.Spawn(summarizer.Props(sumCfg))
	h.learner = root.Spawn(learner.Props(learnCfg))
	// The index loads the registry when it starts and, after a restart, rebuilds only the scope a panic hit, both off its mailbox.
	h.toolIndex = root.Spawn(toolindex.Props(toolindex.Config{Log: h.log, Source: h.indexSource, Tools: h.indexScope}))
	// Prompts read the last map built; sessions have it built off their mailboxes (session.Deps.Maps).
	builder := &prompts.Builder{MemoryMap: h.memory.LastMap}
	deps := &session.Deps{
		Store: h.store, Catalog: h.catalog, Tools: h.tools, Bus: h.bus, Prompts: builder, Maps: h.memory, Metrics: h.metrics,
		Log: h.log, Traces: opts.TracerProvider,
		Summarizer: h.summarize, Learner: h.learner, ToolIndex: h.toolIndex, Dispatcher: h.sessions, Workers: h.workers,
		DefaultModel: h.cfg.DefaultModel, IdleAfter: h.cfg.IdleAfter.Duration, TurnsPerChat: h.cfg.Limits.TurnsPerChat,
		ToolTimeout: h.cfg.Limits.ToolTimeout.Duration, ToolResultBytes: h.cfg.Limits.ToolResultBytes,
		MaxToolResultBytes: h.cfg.Limits.MaxToolResultBytes, ToolArgBytes: h.cfg.Limits.ToolArgumentBytes,
		TurnTimeout: h.cfg.Limits.TurnTimeout.Duration, ModelIdle: h.cfg.Limits.ModelIdleTimeout.Duration,
		FoldWait: h.cfg.Limits.FoldWait.Duration, MaxAnswerBytes: h.cfg.Limits.MaxAnswerBytes, CompactThreshold: h.cfg.Limits.CompactThreshold,
		FoldAsLines:        h.cfg.Limits.FoldAsLines,
		NoModelHelp:        h.noModelHelp,
		TenantInstructions: tenantInstructions(h.cfg.Tenants), ToolResultsWait: h.cfg.Toolsets.ResultsWait.Duration,
		ToolsReady: h.toolsetGates.of,
	}
	h.registry = root.Spawn(session.Props(deps))
}

func tenantInstructions(ts map[string]configs.Tenant) map[string]string {
	out := make(map[string]string, len(ts))
	for name, t := range ts {
		out[name] = t.Instructions
	}
	return out
}

func indexTools(ts []tools.Tool) []toolindex.Tool {
	out := make([]toolindex.Tool, len(ts))
	for i, t := range ts {
		out[i] = toolindex.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
	}
	return out
}

// NoProviderHelp says how to configure a provider.
const NoProviderHelp = "Configure a model provider: run Ollama on this computer (https://ollama.com, it listens on 127.0.0.1:11434) " +
	"and pull a model, or add a providers entry to the yaml (see configs/agentd.yaml) and start agentd with --config FILE."

// noModelHelp says why no model is available: the providers that do not
// answer and why, or that they answer with no model; how to configure one
// when none is.
func (h *Hub) noModelHelp() string {
	errs := h.catalog.ProviderErrors()
	if len(h.cfg.Providers) == 0 {
		return NoProviderHelp
	}
	if len(errs) == 0 {
		return "The configured providers answer but serve no model: pull one (Ollama: ollama pull NAME) or name models in the config."
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(errs)) {
		fmt.Fprintf(&b, "Provider %s does not answer (%v). ", name, errs[name])
	}
	b.WriteString("Start it: agentd re-reads its providers by itself (POST /v1/models/refresh to check now).")
	if onlyDefaultOllama(h.cfg.Providers) {
		// Nothing was configured: the person may have no Ollama at all.
		b.WriteString(" " + NoProviderHelp)
	}
	return b.String()
}

// onlyDefaultOllama: the providers are the one agentd tries when none is
// configured.
func onlyDefaultOllama(ps []configs.Provider) bool {
	return len(ps) == 1 && ps[0].Kind == "ollama" && ps[0].BaseURL == configs.DefaultOllamaURL && len(ps[0].Models) == 0
}

// Refresh reads every provider's model list now (network I/O; call it
// outside actors) and returns what the catalog knows after it.
func (h *Hub) Refresh(ctx context.Context) api.Models {
	h.catalog.Refresh(ctx)
	return h.Models()
}

// Close stops everything the hub started, in order, and honours ctx: in
// cluster mode it leaves the cluster first; the sessions next (each cancels its turn and waits for its calls; queued
// messages are refused), then the summariser, the learner and the tool
// index, then the hub's own goroutines, the MCP connections and the store.
// When ctx ends first, the actors not yet stopped are told to stop without
// waiting, the store still closes, and the error says what was left. A
// store on a server (Postgres) has storeCloseWait of its own to commit
// what was queued (store.close_wait); past it, it gives the rest up and
// the error says so. A start that failed closes what it got to (New).
func (h *Hub) Close(ctx context.Context) error {
	h.cancel()
	var errs []error
	if h.system != nil {
		errs = h.stopActors(ctx)
	} else if !h.work.WaitContext(ctx) {
		errs = append(errs, fmt.Errorf("hub goroutines still running: %w", ctx.Err()))
	}
	if h.closeMCP != nil {
		if err := h.closeMCP(); err != nil {
			errs = append(errs, fmt.Errorf("close mcp: %w", err))
		}
	}
	if h.tools != nil {
		if err := h.tools.CloseToolsets(); err != nil {
			errs = append(errs, fmt.Errorf("close toolsets: %w", err))
		}
	}
	errs = append(errs, closeStore(ctx, h.store, h.storeCloseWait))
	return errors.Join(errs...)
}

// stopActors stops the actors in Close's order, the hub's own goroutines
// after them, then the actor system and its dispatchers.
func (h *Hub) stopActors(ctx context.Context) []error {
	var errs []error
	root := h.system.Root
	if h.node != nil {
		// Leave first: the other nodes take this node's chats at once (a
		// claim each), while the sessions here stop below.
		h.node.Leave()
	}
	for _, pid := range []*actor.PID{h.registry, h.summarize, h.learner, h.toolIndex} {
		if pid == nil {
			continue
		}
		if ctx.Err() != nil {
			root.Poison(pid)
			continue
		}
		var stop actors.Group
		f := root.PoisonFuture(pid)
		stop.Go(func() { _ = f.Wait() })
		if !stop.WaitContext(ctx) {
			errs = append(errs, fmt.Errorf("stop %s: %w", pid.Id, ctx.Err()))
		}
	}
	if !h.work.WaitContext(ctx) {
		errs = append(errs, fmt.Errorf("hub goroutines still running: %w", ctx.Err()))
	}
	if h.node == nil {
		h.system.Shutdown() // Leave has shut it down in cluster mode
	}
	if err := h.sessions.Stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop sessions' dispatcher: %w", err))
	}
	if err := h.workers.Stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop sessions' workers: %w", err))
	}
	return errs
}

// boundedCloser is a store whose Close may wait on a server (Postgres):
// CloseContext gives up the writes not committed when ctx ends.
type boundedCloser interface {
	CloseContext(ctx context.Context) error
}

// closeStore closes st, within wait (store.close_wait) when it may wait on
// a server: a Postgres that stopped answering would hold it for its batch
// timeout and more. The wait runs from the store's turn, not from ctx: the
// writes the sessions queued as they stopped get their chance even when
// the actors used up ctx.
func closeStore(ctx context.Context, st Store, wait time.Duration) error {
	b, ok := st.(boundedCloser)
	if !ok {
		return st.Close()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	return b.CloseContext(ctx)
}

// Tools returns the tool registry (an embedding application adds its own).
func (h *Hub) Tools() *tools.Registry { return h.tools }

// Bus returns the event bus (an embedding application or a test publishes
// on it; watchers read the API's wire types).
func (h *Hub) Bus() *eventbus.Bus { return h.bus }

// Subscribe watches a chat's events, in the API's wire types; buf is the
// subscription's capacity, types (when given) the events it takes. Close
// the subscription when done.
func (h *Hub) Subscribe(chatID string, buf int, types ...string) *eventbus.Sub {
	return h.bus.Subscribe(chatID, buf, types...)
}

// Store returns the store (tests and the bench read it directly).
func (h *Hub) Store() Store { return h.store }

// NewID returns a random id.
func NewID() string {
	var b [idBytes]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// idBytes is the randomness of an id: 96 bits, 24 hex digits.
const idBytes = 12

// IsID reports whether s is shaped as NewID makes ids.
func IsID(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == idBytes && s == strings.ToLower(s)
}

// logFor is the hub's logger for what ctx's request causes: its lines
// carry the request's id.
func (h *Hub) logFor(ctx context.Context) *zerolog.Logger {
	l := h.log
	if id := telemetry.RequestID(ctx); id != "" {
		l = l.With().Str("request_id", id).Logger()
	}
	return &l
}

// chatOf returns a chat if it belongs to tenant.
// The read is tenant's (persistence.ReadsFor), the chat being another's
// or one this node has not read yet.
func (h *Hub) chatOf(ctx context.Context, tenant, id string) (persistence.Chat, error) {
	c, err := h.store.Chat(persistence.ReadsFor(ctx, tenant), id)
	return c, tenantsOwn(id, c.Tenant, tenant, err)
}

// checkChat is chatOf for a caller that needs no more of the chat than
// that it is tenant's: only the tenant is read (a turn's submit does this).
func (h *Hub) checkChat(ctx context.Context, tenant, id string) error {
	owner, err := h.store.ChatTenant(persistence.ReadsFor(ctx, tenant), id)
	return tenantsOwn(id, owner, tenant, err)
}

// tenantsOwn turns the read of chat id's owner into the answer a caller of
// tenant gets: a missing chat and another tenant's look the same,
// ErrNotFound, so ids of other tenants are never confirmed.
func tenantsOwn(id, owner, tenant string, err error) error {
	if errors.Is(err, persistence.ErrNotFound) || (err == nil && owner != tenant) {
		return fmt.Errorf("chat %s: %w", id, ErrNotFound)
	}
	return err
}

// CreateChat makes a chat for tenant.
func (h *Hub) CreateChat(ctx context.Context, tenant string, req api.CreateChatRequest) (api.Chat, error) {
	c, err := h.createChat(ctx, tenant, newChat(req), h.store.CreateChat)
	return wireChat(c, 0), err
}

// newChat is the chat req asks for, before createChat checks it.
func newChat(req api.CreateChatRequest) persistence.Chat {
	return persistence.Chat{Model: req.Model, Title: req.Title, NoAutoRemember: req.NoAutoRemember, Shared: req.Shared,
		Instructions: req.Instructions, Settings: settingsOf(req.Settings), Toolsets: req.Toolsets, Tools: specsOfWire(req.Tools)}
}

// createChat checks a new chat against the catalog, the tenant's limit and
// its tools, gives it an id, and stores it with write.
func (h *Hub) createChat(ctx context.Context, tenant string, c persistence.Chat, write func(context.Context, persistence.Chat) error) (persistence.Chat, error) {
	if c.Model == "" {
		c.Model = h.catalog.Default(h.cfg.DefaultModel)
	}
	if c.Model != "" {
		if err := h.catalog.Check(c.Model); err != nil {
			return c, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	n, err := h.store.CountChats(ctx, tenant)
	if err != nil {
		return c, err
	}
	if n >= h.cfg.Limits.ChatsPerTenant {
		// New chats a crash left unkept, past the grace, no longer count.
		gone, err := h.dropUnkept(ctx, tenant, time.Now().Add(-newChatGrace))
		if err != nil {
			return c, err
		}
		n -= gone
	}
	if n >= h.cfg.Limits.ChatsPerTenant {
		return c, fmt.Errorf("%w: this tenant has %d chats, the most allowed", ErrLimit, n)
	}
	c.ID, c.Tenant, c.CreatedAt = NewID(), tenant, time.Now().UTC()
	if err := h.toolsetsReady(ctx, tenant); err != nil {
		return c, err
	}
	if err := h.checkSetup(c); errors.Is(err, tools.ErrUnknownToolset) {
		return c, fmt.Errorf("%w: %v", ErrNotFound, err)
	} else if err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if c.Instructions != "" {
		c.InstructionsVersion = 1
	}
	if err := write(ctx, c); err != nil {
		return c, err
	}
	return c, nil
}

// Chats lists a tenant's chats with their last seqs.
func (h *Hub) Chats(ctx context.Context, tenant string) ([]api.Chat, error) {
	cs, err := h.store.Chats(ctx, tenant)
	out := make([]api.Chat, len(cs))
	for i, c := range cs {
		out[i] = wireChat(c, c.LastSeq)
	}
	return out, err
}

// ChatsPage lists a page of a tenant's chats in id order after the id
// after, and whether more follow; each carries its last seq from its record.
func (h *Hub) ChatsPage(ctx context.Context, tenant, after string, limit int) ([]api.Chat, bool, error) {
	cs, more, err := h.store.ChatsPage(ctx, tenant, after, limit)
	out := make([]api.Chat, len(cs))
	for i, c := range cs {
		out[i] = wireChat(c, c.LastSeq)
	}
	return out, more, err
}

// Chat returns one chat with its last seq.
func (h *Hub) Chat(ctx context.Context, tenant, id string) (api.Chat, error) {
	c, err := h.chatOf(ctx, tenant, id)
	if err != nil {
		return api.Chat{}, err
	}
	last, err := h.store.LastSeq(ctx, id)
	return wireChat(c, last), err
}

// DeleteChat deletes a tenant's chat. Its session is stopped first (a
// running or paused turn ends with problem deleted, its turn.completed
// told before chat.deleted; waiting ones refused) and refuses every message
// until the deletion is over; then its log, snapshot and records go
// (persistence.DeleteChat); then its watchers hear chat.deleted. The chat
// no longer counts against the tenant's limit.
func (h *Hub) DeleteChat(ctx context.Context, tenant, id string) error {
	if err := h.checkChat(ctx, tenant, id); err != nil {
		return err
	}
	root := h.system.Root
	defer root.Send(h.registry, &session.Retired{ChatID: id})
	res, err := root.RequestFuture(h.registry, &session.Retire{ChatID: id}, askTimeout).Result()
	if errors.Is(err, actor.ErrTimeout) {
		return fmt.Errorf("delete chat %s: its session did not stop: %w", id, ErrTimeout)
	}
	if err != nil {
		return fmt.Errorf("delete chat %s: %w", id, err)
	}
	if _, ok := res.(*session.RetireDone); !ok {
		return fmt.Errorf("delete chat %s: unexpected reply %T", id, res)
	}
	// Once begun, the deletion is finished even if the caller goes.
	ctx = context.WithoutCancel(ctx)
	records, dropped, err := h.attachmentRecords(ctx, tenant, id)
	if err != nil {
		return err
	}
	surface, err := h.surfaceRecords(ctx, tenant, id)
	if err != nil {
		return err
	}
	records = append(records, surface...)
	err = h.dropHolds(ctx, tenant, func() (int64, error) {
		return dropped, h.store.DeleteChat(ctx, id, append(records, memory.ChatRecords(id)...)...)
	})
	if errors.Is(err, persistence.ErrNotFound) {
		return fmt.Errorf("chat %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return err
	}
	h.bus.PublishMust(eventbus.Event{Type: api.EventChatDeleted, ChatID: id, Data: map[string]string{"chat_id": id}})
	return nil
}

// Transcript returns the stored messages of a chat from seq from to seq to
// (0: no bound), untouched.
func (h *Hub) Transcript(ctx context.Context, tenant, id string, from, to int64) ([]api.Message, error) {
	return h.transcript(ctx, tenant, id, from, to, 0)
}

// TranscriptPageBytes bounds a page of TranscriptPage: what a reader of a
// long transcript holds at once, beside one message past it.
const TranscriptPageBytes = 1 << 20

// TranscriptPage is Transcript read up to TranscriptPageBytes of stored
// messages: at least the first, none after the one that reaches the
// bound. A reader pages on from the seq after the last one returned.
func (h *Hub) TranscriptPage(ctx context.Context, tenant, id string, from, to int64) ([]api.Message, error) {
	return h.transcript(ctx, tenant, id, from, to, TranscriptPageBytes)
}

// AnsweredTurn reads back, a page at a time, the turn of the person's
// message stored as userSeq: that message and what the chat stored after
// it, up to the person's next message.
func (h *Hub) AnsweredTurn(ctx context.Context, tenant, id string, userSeq int64) ([]api.Message, error) {
	c, err := h.Chat(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	var out []api.Message
	for from := userSeq; from <= c.Messages; {
		page, err := h.TranscriptPage(ctx, tenant, id, from, c.Messages)
		if err != nil || len(page) == 0 {
			return out, err
		}
		if i := slices.IndexFunc(page, func(m api.Message) bool { return m.Seq > userSeq && m.Role == api.RoleUser }); i >= 0 {
			return append(out, page[:i]...), nil
		}
		out = append(out, page...)
		from = page[len(page)-1].Seq + 1
	}
	return out, nil
}

func (h *Hub) transcript(ctx context.Context, tenant, id string, from, to int64, maxBytes int) ([]api.Message, error) {
	if err := h.checkChat(ctx, tenant, id); err != nil {
		return nil, err
	}
	ms, err := h.store.MessagesWithin(ctx, id, from, to, maxBytes)
	return wireMessages(ms), err
}

// Activity returns one page of a chat's activity log: up to limit items
// with id > after, oldest first, and whether more follow. Export and the
// activity route read it the same way.
func (h *Hub) Activity(ctx context.Context, tenant, id string, after int64, limit int) ([]api.ActivityItem, bool, error) {
	if err := h.checkChat(ctx, tenant, id); err != nil {
		return nil, false, err
	}
	return h.activityPage(ctx, id, after, limit)
}

// activityPage reads a page of a chat already resolved in its tenant.
func (h *Hub) activityPage(ctx context.Context, id string, after int64, limit int) ([]api.ActivityItem, bool, error) {
	as, more, err := h.store.ActivityPage(ctx, id, after, limit)
	if err != nil {
		return nil, false, err
	}
	out := make([]api.ActivityItem, len(as))
	for i, a := range as {
		out[i] = api.ActivityItem(a)
	}
	return out, more, nil
}

// learned stores what the learner learned from a chat in its activity log
// and tells the chat's watchers.
func (h *Hub) learned(ctx context.Context, o learner.Outcome) {
	if _, err := h.store.Chat(ctx, o.ChatID); err != nil {
		return // deleted meanwhile: nothing to keep it with
	}
	data := chat.MemoriesLearned{IDs: o.Added, Waiting: o.Waiting}
	raw, err := json.Marshal(data)
	if err == nil {
		_, err = h.store.AppendActivity(ctx, o.ChatID, persistence.Activity{Type: chat.EventMemoriesLearned, Data: raw})
	}
	if err != nil {
		h.log.Error().Err(err).Str("chat_id", o.ChatID).Msg("store learned memories in the activity log")
	}
	h.bus.PublishMust(eventbus.Event{Type: chat.EventMemoriesLearned, ChatID: o.ChatID, Data: data})
}

// ask sends msg to a chat's session and waits for the reply.
func (h *Hub) ask(ctx context.Context, chatID string, msg any, timeout time.Duration) (any, error) {
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	res, err := h.system.Root.RequestFuture(h.registry, &session.Envelope{ChatID: chatID, Msg: msg}, timeout).Result()
	return answered(chatID, res, err)
}

// answered is a session's reply to the hub, or the wait's failure, with a
// refusal turned into the hub's errors.
func answered(chatID string, res any, err error) (any, error) {
	if errors.Is(err, actor.ErrTimeout) {
		return nil, fmt.Errorf("chat %s: %w", chatID, ErrTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("chat %s: %w", chatID, err)
	}
	if r, ok := res.(*session.Rejected); ok {
		if errors.Is(r.Err, session.ErrNotFound) {
			return nil, fmt.Errorf("chat %s: %w", chatID, ErrNotFound)
		}
		if errors.Is(r.Err, tools.ErrUnknownToolset) {
			return nil, fmt.Errorf("%w: %v", ErrNotFound, r.Err)
		}
		return nil, r.Err
	}
	return res, nil
}

// Submit hands a person's message, with its attachments resolved inside
// the tenant, to its chat. It returns the turn's id once the message is
// durable and its turn has started; the turn's events follow (Subscribe
// before calling, to miss none).
func (h *Hub) Submit(ctx context.Context, tenant, chatID string, req api.SendMessageRequest) (string, error) {
	return h.submitAs(ctx, tenant, chatID, req, &session.SubmitTurn{TurnID: NewID()})
}

// SubmitKeyed is Submit of a turn whose id (from NewID) the caller chose,
// so that it can watch that turn's events alone from before the turn is
// queued (eventbus.Sub.OfTurn), and of a message sent with an idempotency
// key, when key is set (the native API's Idempotency-Key): the chat stores
// and answers it once however often it comes. A key whose message's turn
// runs now joins that turn: joined gets the turn's id, before its next
// event, and it is returned. A key whose message's turn has ended is
// *AnsweredError; one waiting its turn, or whose turn waits for tool
// results, ErrKeyInProgress. A message the log ends with, unanswered, has
// its turn answer it as stored. queued, when set, hears (without
// blocking) that the message waits behind the chat's running turn, and
// whether that turn is paused for the application's tool results.
// unpaused refuses the message with *PausedError, at once, where it would
// wait behind a turn paused on the application's calls (now or once the
// turn before it pauses): a caller that can tell its client nothing while
// it waits (a JSON answer) says so rather than wait up to
// toolsets.results_wait.
func (h *Hub) SubmitKeyed(ctx context.Context, tenant, chatID, turnID, key string, req api.SendMessageRequest, joined func(turnID string), queued func(paused bool), unpaused bool) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return h.submitAs(ctx, tenant, chatID, req, &session.SubmitTurn{TurnID: turnID, Message: chat.Message{IdempotencyKey: key}, Joined: joined, Queued: queued, Unpaused: unpaused})
}

// SubmitUnpaused is SubmitKeyed for a surface whose clients must answer a
// paused turn's calls before they say more, and retry a request whose
// turn failed (the OpenAI-compatible one): a message that would wait
// behind a turn paused on them is refused at once with *PausedError, and
// the paused turn is untouched; a message the chat's log ends with,
// unanswered, when its turn starts is answered as stored, not stored
// twice (session.SubmitTurn.Retry). key, when set, is the message's
// idempotency key, as SubmitKeyed takes it (joined likewise), or agentd's
// own, stored and not looked for when Unsought. queued, when set, hears
// (without blocking) that the message waits behind the chat's running
// turn, as SubmitKeyed's.
func (h *Hub) SubmitUnpaused(ctx context.Context, tenant, chatID, turnID string, key Key, req api.SendMessageRequest, joined func(turnID string), queued func(paused bool)) (string, error) {
	if err := checkKey(key.Value); err != nil {
		return "", err
	}
	return h.submitAs(ctx, tenant, chatID, req, &session.SubmitTurn{TurnID: turnID, Message: chat.Message{IdempotencyKey: key.Value},
		KeyUnsought: key.Unsought, Joined: joined, Queued: queued, Unpaused: true, Retry: true})
}

// submitAs submits m with req's message (its attachments resolved inside
// the tenant) as m.Message, whose idempotency key it keeps. The message's
// bytes are charged to the tenant's ingest rate once its session admits
// it to a turn (session.SubmitTurn.Charge): one its key answers from the
// log, or joins to its running turn, adds nothing and is not charged.
func (h *Hub) submitAs(ctx context.Context, tenant, chatID string, req api.SendMessageRequest, m *session.SubmitTurn) (string, error) {
	if err := h.checkChat(ctx, tenant, chatID); err != nil {
		return "", err
	}
	m.Message = chat.Message{Role: chat.RoleUser, Content: req.Content, Origin: req.Origin, IdempotencyKey: m.Message.IdempotencyKey}
	size := messageBytes(m.Message)
	m.Charge = func() error { return h.ingest.take(tenant, size) }
	if err := h.attach(ctx, tenant, chatID, &m.Message, req); err != nil {
		return "", err
	}
	return h.submit(ctx, tenant, chatID, m)
}

// SubmitContinue starts turn turnID (from NewID), which stores no message
// and answers the chat as its log stands: for a client's retry of tool
// results, or of a message, whose turn failed after they were stored. A
// chat whose log ends with an answer refuses it with ErrNothingToAnswer.
// queued, when set, hears (without blocking) that the turn waits behind
// the chat's running turn, as SubmitKeyed's.
func (h *Hub) SubmitContinue(ctx context.Context, tenant, chatID, turnID string, queued func(paused bool)) (string, error) {
	if err := h.checkChat(ctx, tenant, chatID); err != nil {
		return "", err
	}
	return h.submit(ctx, tenant, chatID, &session.SubmitTurn{TurnID: turnID, Continue: true, Unpaused: true, Queued: queued})
}

// submit asks the chat's session to start the turn m, in a slot of the
// tenant's turns; the slot is freed when the turn ends (or at once if it
// never starts). The turn's span starts here, a child of the request's,
// and ends in a goroutine of the hub once the session says the turn is
// over: never in a mailbox. It returns the turn's id.
func (h *Hub) submit(ctx context.Context, tenant, chatID string, m *session.SubmitTurn) (string, error) {
	if err := h.toolsetsReady(ctx, tenant); err != nil { // before the slot: the wait holds none of the tenant's turns
		return "", err
	}
	release, ok := h.turns.take(tenant)
	if !ok {
		return "", fmt.Errorf("%w: this tenant has %d turns waiting or running, the most allowed", ErrTenantBusy, h.cfg.Limits.TurnsPerTenant)
	}
	turnID := m.TurnID
	_, span := h.tracer.Start(ctx, "turn", trace.WithAttributes(telemetry.ChatIDKey.String(chatID), telemetry.TurnIDKey.String(turnID)))
	over := make(chan struct{}, 1)
	ended := func() {
		release()
		select {
		case over <- struct{}{}:
		default:
		}
	}
	if span.IsRecording() {
		h.work.Go(func() { <-over; span.End() })
	}
	m.Ended, m.RequestID, m.Trace = ended, telemetry.RequestID(ctx), span.SpanContext()
	// A queued message waits for the turns before it; the wait ends with
	// the caller, not only with the timeout, and a refusal frees the slot
	// even when the caller has gone (replyBox).
	box := newReplyBox(h.system, h.cfg.Limits.TurnTimeout.Duration*time.Duration(h.cfg.Limits.TurnsPerChat+1), ended)
	h.system.Root.RequestWithCustomSender(h.registry, &session.Envelope{ChatID: chatID, Msg: m}, box.pid)
	var r reply
	select {
	case r = <-box.c:
	case <-ctx.Done():
		h.system.Root.Send(h.registry, &session.Envelope{ChatID: chatID, Msg: &session.CancelQueued{TurnID: turnID}})
		return "", fmt.Errorf("chat %s: the caller went away before the message's turn started: %w", chatID, ctx.Err())
	}
	res, err := answered(chatID, r.res, r.err)
	if err != nil {
		return "", err
	}
	switch res := res.(type) {
	case *session.TurnAccepted:
		return res.TurnID, nil
	case *session.Answered:
		return "", &AnsweredError{UserSeq: res.UserSeq}
	}
	return "", fmt.Errorf("submit: unexpected reply %T", res)
}

// Context returns what a chat's model is sent now.
func (h *Hub) Context(ctx context.Context, tenant, chatID string) (api.Context, error) {
	if err := h.checkChat(ctx, tenant, chatID); err != nil {
		return api.Context{}, err
	}
	if err := h.toolsetsReady(ctx, tenant); err != nil {
		return api.Context{}, err
	}
	res, err := h.ask(ctx, chatID, &session.GetContext{}, askTimeout)
	if err != nil {
		return api.Context{}, err
	}
	v, ok := res.(*chat.ContextView)
	if !ok {
		return api.Context{}, fmt.Errorf("context: unexpected reply %T", res)
	}
	return wireContext(v), nil
}

// Patch changes a chat's model (between turns), title, instructions,
// settings or tools, all or nothing.
func (h *Hub) Patch(ctx context.Context, tenant, chatID string, req api.PatchChatRequest) error {
	if err := h.checkChat(ctx, tenant, chatID); err != nil {
		return err
	}
	if req.Model != nil {
		if err := h.catalog.Check(*req.Model); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if err := h.toolsetsReady(ctx, tenant); err != nil { // a chat's new tools are checked against the registry
		return err
	}
	_, err := h.ask(ctx, chatID, patchOf(req), askTimeout)
	return err
}

// MaxFocusRunes bounds /compact's focus: it is asked with every piece the
// summariser reads, so a long one crowds the chat out of a small window's
// pieces, and one past the window ended the fold with no summary, silently.
const MaxFocusRunes = 2000

// Compact folds all but the newest turn of a chat now.
func (h *Hub) Compact(ctx context.Context, tenant, chatID, focus string) (api.Compacted, error) {
	if err := h.checkChat(ctx, tenant, chatID); err != nil {
		return api.Compacted{}, err
	}
	if n := utf8.RuneCountInString(focus); n > MaxFocusRunes {
		return api.Compacted{}, fmt.Errorf("%w: focus is %d characters, at most %d: say in a few words what to keep", ErrInvalid, n, MaxFocusRunes)
	}
	// As a turn does: the summary request carries the chat's tools (its
	// cached prefix), which a fold asked before the start's build would lack.
	if err := h.toolsetsReady(ctx, tenant); err != nil {
		return api.Compacted{}, err
	}
	res, err := h.ask(ctx, chatID, &session.Compact{Focus: focus}, 5*time.Minute)
	if err != nil {
		return api.Compacted{}, err
	}
	c, ok := res.(*session.Compacted)
	if !ok {
		return api.Compacted{}, fmt.Errorf("compact: unexpected reply %T", res)
	}
	return wireCompacted(c.View), nil
}

// Models lists what the catalog knows, and which providers did not answer.
func (h *Hub) Models() api.Models {
	out := api.Models{Object: "list", Models: []api.Model{}, ProviderErrors: wireErrors(h.catalog.ProviderErrors())}
	for _, m := range h.catalog.Models() {
		out.Models = append(out.Models, wireModel(m))
	}
	return out
}

// Health reports whether the daemon works and what it has done: degraded
// when no configured provider answers.
func (h *Hub) Health() api.Health {
	errs := wireErrors(h.catalog.ProviderErrors())
	lsm, vlog := h.badgerSizes()
	status, storeErr := api.HealthOK, ""
	if len(errs) > 0 && len(errs) == len(h.cfg.Providers) {
		status = api.HealthDegraded
	}
	if b, ok := h.store.(*persistence.Store); ok && b.Failure() != nil {
		// The cause (paths, errno) is in the failed writes' errors and the
		// log; /healthz answers without a token.
		status, storeErr = api.HealthFailing, "a sync of the store failed: it refuses writes until agentd restarts"
	}
	if r, ok := h.store.(unreachable); ok {
		if since := r.Unreached(); !since.IsZero() {
			// A Postgres restart or failover ends by itself, and a restart of
			// every node would not hasten it: degraded (200) for a while, so
			// the probes keep the nodes; failing (503) once it has lasted
			// past what a restart of the server takes (store.failing_after),
			// so a node whose own connections or network went bad is
			// restarted.
			out := time.Since(since).Round(time.Second)
			status, storeErr = api.HealthDegraded, fmt.Sprintf("postgres has not answered for %s: writes fail until it does", out)
			if out >= h.pgFailingAfter {
				status = api.HealthFailing
			}
		}
	}
	return api.Health{Status: status, StoreError: storeErr, ProviderErrors: errs, Heals: h.metrics.Heals(), ActiveSessions: h.ActiveSessions(),
		BadgerLSMBytes: lsm, BadgerVlogBytes: vlog, EventsDropped: h.bus.Dropped(), WatchersDropped: h.bus.DroppedWatchers(),
		// One tenant's MCP server that hangs at start holds only that
		// tenant's requests: the status stays what it is, so a readiness
		// probe keeps the node that serves every other tenant.
		ToolsetsBuilding: h.toolsetGates.building(), Cluster: h.clusterHealth()}
}

// unreachable is a store on a server that may stop answering (Postgres):
// Unreached says since when it has not answered, zero while it does.
type unreachable interface {
	Unreached() time.Time
}

// badgerSizes reports Badger's LSM and value-log sizes; Postgres has
// neither (its sizes are the database's own to report).
func (h *Hub) badgerSizes() (lsm, vlog int64) {
	if b, ok := h.store.(*persistence.Store); ok {
		return b.Sizes()
	}
	return 0, 0
}

// ActiveSessions counts live session actors.
func (h *Hub) ActiveSessions() int {
	res, err := h.system.Root.RequestFuture(h.registry, &session.CountActive{}, 5*time.Second).Result()
	if err != nil {
		return -1
	}
	if c, ok := res.(*session.ActiveCount); ok {
		return c.N
	}
	return -1
}

// Metrics returns the Prometheus metrics.
func (h *Hub) Metrics() *Metrics { return h.metrics }

// Gatherer returns the registry /metrics serves.
func (h *Hub) Gatherer() prometheus.Gatherer { return h.metrics.Registry }

// ProviderErrors says which providers did not answer their model list.
func (h *Hub) ProviderErrors() map[string]error { return h.catalog.ProviderErrors() }

// soleTenant reports whether the daemon serves one tenant at most: no
// tokens (the loopback's "default"), or every token one tenant's.
func soleTenant(a configs.Auth) bool {
	for _, t := range a.Tokens {
		if t.Tenant != a.Tokens[0].Tenant {
			return false
		}
	}
	return true
}
