package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/agentd/agentd/actors/session"
	"github.com/agentd/agentd/actors/toolindex"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/tools"
)

// Executor kinds of a toolset.
const (
	ExecClient  = "client"
	ExecWebhook = "webhook"
	ExecMCP     = "mcp"
)

// maxToolsetTools bounds one toolset.
const maxToolsetTools = 10_000

// recordToolset is the record kind of toolsets; the id is tenant/name.
const recordToolset = "toolset"

// Toolset is an application's toolset as stored. Secrets are never stored:
// only the names of the environment variables that hold them.
type Toolset struct {
	Tenant    string          `json:"tenant"`
	Name      string          `json:"name"`
	Tools     []chat.ToolSpec `json:"tools,omitempty"`
	Executor  Executor        `json:"executor"`
	Version   int             `json:"version"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// Executor says who runs a toolset's calls.
type Executor struct {
	Kind       string            `json:"kind"`
	URL        string            `json:"url,omitempty"`
	SecretEnv  string            `json:"secret_env,omitempty"`
	Timeout    time.Duration     `json:"timeout,omitempty"`
	HeadersEnv map[string]string `json:"headers_env,omitempty"`
}

// ErrNotPaused: no turn of the chat waits for tool results.
var ErrNotPaused = session.ErrNotPaused

// ErrNothingToAnswer refuses SubmitContinue: the chat's log ends with an
// answer.
var ErrNothingToAnswer = session.ErrNothingToAnswer

// PausedError refuses SubmitUnpaused's message, or SubmitKeyed's marked
// unpaused: a turn of the chat waits for the results of its Calls.
type PausedError = session.PausedError

// env reads a variable a tenant's toolset names, if the operator allows
// that tenant to: the tenant's own tenants.<name>.allowed_env, or the
// shared toolsets.allowed_env. One list for all would let any tenant send
// another's secret to a server of its own.
func (h *Hub) env(tenant, name string) (string, error) {
	if !slices.Contains(h.cfg.Tenants[tenant].AllowedEnv, name) && !slices.Contains(h.cfg.Toolsets.AllowedEnv, name) {
		return "", fmt.Errorf("%w: environment variable %s is not allowed for this tenant: the operator adds it to the yaml's tenants.%s.allowed_env (or, for every tenant, toolsets.allowed_env)", ErrInvalid, name, tenant)
	}
	v := os.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("%w: environment variable %s is empty", ErrInvalid, name)
	}
	return v, nil
}

// buildToolset turns a stored toolset into registry tools and the close of
// what they hold; the variables it names are read as ts.Tenant's.
func (h *Hub) buildToolset(ctx context.Context, ts Toolset) ([]tools.Tool, func() error, error) {
	allowPrivate := h.cfg.Toolsets.WebhooksAllowPrivate
	source := "toolset:" + ts.Name
	out := make([]tools.Tool, len(ts.Tools))
	for i, sp := range ts.Tools {
		out[i] = tools.Tool{Name: sp.Name, Description: sp.Description, Parameters: sp.Parameters, Source: source}
	}
	switch ts.Executor.Kind {
	case ExecClient:
		if len(ts.Tools) == 0 {
			return nil, nil, fmt.Errorf("%w: a client toolset lists its tools", ErrInvalid)
		}
		for i := range out {
			out[i].Client = true
		}
		return checkingArgs(out)
	case ExecWebhook:
		if len(ts.Tools) == 0 {
			return nil, nil, fmt.Errorf("%w: a webhook toolset lists its tools", ErrInvalid)
		}
		if err := tools.CheckWebhookURL(ts.Executor.URL, allowPrivate); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if ts.Executor.SecretEnv == "" {
			return nil, nil, fmt.Errorf("%w: a webhook toolset names its secret_env", ErrInvalid)
		}
		secret, err := h.env(ts.Tenant, ts.Executor.SecretEnv)
		if err != nil {
			return nil, nil, err
		}
		for i := range out {
			out[i].Run = tools.WebhookRunner(out[i].Name, tools.Webhook{URL: ts.Executor.URL, Secret: secret, Timeout: ts.Executor.Timeout, AllowPrivate: allowPrivate})
		}
		return checkingArgs(out)
	case ExecMCP:
		if len(ts.Tools) > 0 {
			return nil, nil, fmt.Errorf("%w: an MCP toolset's tools are the server's; list none", ErrInvalid)
		}
		headers := map[string]string{}
		for k, name := range ts.Executor.HeadersEnv {
			v, err := h.env(ts.Tenant, name)
			if err != nil {
				return nil, nil, err
			}
			headers[k] = v
		}
		// Its tools are held to what a client or webhook toolset's could
		// take: the request body that brings them.
		srv := tools.MCPServer{Name: ts.Name, URL: ts.Executor.URL, Headers: headers, MaxResultBytes: h.cfg.Limits.MaxToolResultBytes,
			MaxTools: maxToolsetTools, MaxToolBytes: int(h.cfg.Limits.MaxBodyBytes)}
		mt, closeFn, err := tools.ConnectMCPToolset(ctx, srv, allowPrivate, h.log)
		if err != nil {
			bound := ""
			if errors.Is(err, tools.ErrToolsTooLarge) {
				bound = " (limits.max_body_bytes, a toolset's most however it is put)"
			}
			return nil, nil, fmt.Errorf("%w: mcp server of toolset %s: %v%s", ErrInvalid, ts.Name, err, bound)
		}
		return mt, closeFn, nil
	}
	return nil, nil, fmt.Errorf("%w: executor kind %q: use client, webhook or mcp", ErrInvalid, ts.Executor.Kind)
}

// checkingArgs has every call of an application's tools checked against
// their schemas, compiled here, once (tools.CheckingArgs); a schema it
// cannot compile refuses the toolset.
func checkingArgs(ts []tools.Tool) ([]tools.Tool, func() error, error) {
	for i := range ts {
		var err error
		if ts[i], err = tools.CheckingArgs(ts[i]); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	return ts, nil, nil
}

// mcpConnectsPerTenant bounds a tenant's toolset PUTs connecting an MCP
// server at once: each may take the whole connect timeout and hold a whole
// tool list, and the tenant's lock is not held meanwhile to bound them.
const mcpConnectsPerTenant = 4

// ErrConnectsBusy refuses a PUT of an MCP toolset while its tenant has
// mcpConnectsPerTenant servers being connected.
var ErrConnectsBusy = errors.New("too many MCP servers being connected")

// PutToolset registers or replaces a tenant's toolset: it is checked and
// built (an MCP server is connected), then indexed, stored and registered,
// and the index installs it. A refused toolset changes nothing (one the
// tool index fails to index wraps ErrIndexFailed); a new name
// past toolsets.max_per_tenant, or tools past
// toolsets.max_tools_per_tenant, is ErrLimit, refused before any MCP
// server is connected as far as it is known then; a tenant with
// mcpConnectsPerTenant MCP servers being connected is ErrConnectsBusy. A
// tenant's PUTs take turns (on this node) once built, so its count is
// exact and its versions follow each other; other tenants' never wait,
// and its own do not wait for an MCP server being connected.
func (h *Hub) PutToolset(ctx context.Context, tenant string, ts Toolset) (Toolset, error) {
	if err := tools.CheckToolsetName(ts.Name); err != nil {
		return ts, fmt.Errorf("%w: %w", ErrInvalid, err) // before the tenant's limit: a bad name is 400 at it too
	}
	if len(ts.Tools) > maxToolsetTools {
		return ts, fmt.Errorf("%w: %d tools; a toolset holds at most %d", ErrInvalid, len(ts.Tools), maxToolsetTools)
	}
	ts.Tenant = tenant
	if err := h.toolsetsReady(ctx, tenant); err != nil {
		return ts, err
	}
	// Checked before building too, so a tenant at its limits makes agentd
	// connect to no server.
	if _, err := h.toolsetFits(ctx, ts); err != nil {
		return ts, err
	}
	if ts.Executor.Kind == ExecMCP {
		release, ok := h.connects.take(tenant)
		if !ok {
			return ts, fmt.Errorf("%w: this tenant has %d toolsets' MCP servers being connected, the most at once; put this one again once one is done", ErrConnectsBusy, mcpConnectsPerTenant)
		}
		defer release()
	}
	built, closeFn, err := h.buildToolset(ctx, ts)
	if err != nil {
		return ts, err
	}
	registered := false
	defer func() {
		if !registered && closeFn != nil {
			_ = closeFn()
		}
	}()
	unlock := h.toolsetPuts.lock(tenant)
	defer unlock()
	old, err := h.toolsetFits(ctx, ts) // again: the tenant's other PUTs may have taken the room meanwhile
	if err != nil {
		return ts, err
	}
	ts.UpdatedAt = time.Now().UTC()
	ts.Version = old.Version + 1
	// Checked, indexed, stored, then registered: a failed write leaves the
	// toolset in use as it was (its connection open), and nothing to
	// rebuild; indexing that fails (a bug) stores nothing, where the store
	// and registry held a version the index missed until a restart.
	if err := h.tools.CheckToolset(tenant, ts.Name, built); err != nil {
		return ts, toolsErr(err)
	}
	reg, err := toolsetRegister(tenant, ts.Name, built)
	if err != nil {
		return ts, err // ErrIndexFailed: a 500, logged with its stack by the API
	}
	if err := h.store.PutRecord(ctx, recordToolset, tenant+"/"+ts.Name, ts); err != nil {
		return ts, fmt.Errorf("store toolset %s: %w", ts.Name, err)
	}
	if err := h.tools.PutToolset(tenant, ts.Name, built, closeFn); err != nil {
		// Another node's toolset, installed meanwhile, took the room or a
		// name: the store goes back to what is registered.
		h.unstoreToolset(ctx, ts, old)
		return ts, toolsErr(err)
	}
	registered = true // the registry closes it when it is replaced or removed
	if ts.Executor.Kind == ExecMCP {
		ts.Tools = specsOf(built)
	}
	h.indexToolset(reg)
	h.announceToolset(tenant, ts.Name)
	return ts, nil
}

// toolsetFits returns the stored version of ts (a zero Toolset when it is
// new) if its tenant has room for ts: a new name within
// toolsets.max_per_tenant, and its tools within
// toolsets.max_tools_per_tenant as far as they are known before it is
// built (an MCP server's are not yet: at least one).
func (h *Hub) toolsetFits(ctx context.Context, ts Toolset) (Toolset, error) {
	old, err := h.toolset(ctx, ts.Tenant, ts.Name)
	switch {
	case errors.Is(err, ErrNotFound):
		if err := h.toolsetRoom(ctx, ts.Tenant); err != nil {
			return Toolset{}, err
		}
	case err != nil:
		return Toolset{}, err
	}
	n := len(ts.Tools)
	if ts.Executor.Kind == ExecMCP {
		n = 1
	}
	if err := h.tools.CheckTenantTools(ts.Tenant, ts.Name, n); err != nil {
		return Toolset{}, toolsErr(err)
	}
	return old, nil
}

// toolsErr is the hub's error for the registry refusing a toolset.
func toolsErr(err error) error {
	if errors.Is(err, tools.ErrTenantTools) {
		return fmt.Errorf("%w: %w (toolsets.max_tools_per_tenant)", ErrLimit, err)
	}
	return fmt.Errorf("%w: %v", ErrInvalid, err)
}

// unstoreToolset puts back what the record of ts held before its write,
// old (a zero Toolset: nothing), when the registry then refused ts.
func (h *Hub) unstoreToolset(ctx context.Context, ts, old Toolset) {
	key := ts.Tenant + "/" + ts.Name
	var err error
	switch {
	case old.Name == "":
		err = h.store.DeleteRecord(ctx, recordToolset, key)
	default:
		if old.Executor.Kind == ExecMCP {
			old.Tools = nil // read from the registry; the record holds none
		}
		err = h.store.PutRecord(ctx, recordToolset, key, old)
	}
	if err != nil {
		h.logFor(ctx).Error().Err(err).Str("toolset", ts.Name).Msg("put back the stored toolset")
	}
}

func specsOf(ts []tools.Tool) []chat.ToolSpec {
	out := make([]chat.ToolSpec, len(ts))
	for i, t := range ts {
		out[i] = t.Spec()
	}
	return out
}

// indexToolset has the tool index install reg (toolsetRegister's).
func (h *Hub) indexToolset(reg *toolindex.Register) {
	h.system.Root.Send(h.toolIndex, reg)
}

// unindexToolset empties a removed toolset's scope in the tool index.
func (h *Hub) unindexToolset(tenant, name string) {
	reg, err := toolsetRegister(tenant, name, nil)
	if err != nil {
		h.log.Error().Err(err).Str("tenant", tenant).Str("toolset", name).Msg("a removed toolset stays in the tool index until a restart")
		return
	}
	h.indexToolset(reg)
}

// toolsetRegister indexes a toolset's tools on the caller's goroutine, for
// the tool index to install.
func toolsetRegister(tenant, name string, ts []tools.Tool) (*toolindex.Register, error) {
	reg, err := replaceScope(toolindex.ToolsetScope(tenant, name), indexTools(ts))
	if err != nil {
		return nil, fmt.Errorf("index toolset %s: %w", name, err)
	}
	return reg, nil
}

// replaceScope is toolindex.ReplaceScope; tests make it fail as a panic
// in it does.
var replaceScope = toolindex.ReplaceScope

// indexSource is every toolset the tool index holds, read when the index
// starts; the index reads the daemon's own tools apart (indexScope), so
// that no search waits for the toolsets' indexing but a search of them.
// Once ctx is done (the index stops) it indexes no more toolsets.
func (h *Hub) indexSource(ctx context.Context) []*toolindex.Register {
	var out []*toolindex.Register
	for k, ts := range h.tools.Toolsets() {
		if ctx.Err() != nil {
			break
		}
		reg, err := toolsetRegister(k[0], k[1], ts)
		if err != nil {
			h.log.Error().Err(err).Str("tenant", k[0]).Msg("toolset left out of the tool index")
			continue
		}
		out = append(out, reg)
	}
	return out
}

// indexScope is what one scope of the tool index holds now: the daemon's
// tools, or a toolset's (none once deleted), for the index to rebuild a
// scope a panic hit. It reads the registry in memory: ctx is not needed.
func (h *Hub) indexScope(_ context.Context, scope string) []toolindex.Tool {
	if scope == "" {
		return indexTools(h.tools.List())
	}
	ts, _ := h.tools.Toolset(toolindex.ToolsetOfScope(scope))
	return indexTools(ts)
}

// Toolset returns one of a tenant's toolsets; an MCP toolset lists the
// tools its server offers now.
func (h *Hub) Toolset(ctx context.Context, tenant, name string) (Toolset, error) {
	if err := h.toolsetsReady(ctx, tenant); err != nil {
		return Toolset{}, err
	}
	return h.toolset(ctx, tenant, name)
}

// toolset is Toolset for a caller that has waited for the tenant's stored
// toolsets (toolsetsReady).
func (h *Hub) toolset(ctx context.Context, tenant, name string) (Toolset, error) {
	var ts Toolset
	// An escaped slash in the path decodes into name: "b/x" would read the
	// record of tenant "<tenant>/b"'s toolset x, so such a name, and a
	// record of another tenant, answer as unknown.
	if !tools.ValidName(name) {
		return ts, fmt.Errorf("toolset %s: %w", name, ErrNotFound)
	}
	err := h.store.Record(persistence.ReadsFor(ctx, tenant), recordToolset, tenant+"/"+name, &ts)
	if err == nil && ts.Tenant != tenant {
		err = persistence.ErrNotFound
	}
	if errors.Is(err, persistence.ErrNotFound) {
		return Toolset{}, fmt.Errorf("toolset %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return ts, err
	}
	if live, ok := h.tools.Toolset(tenant, name); ok && ts.Executor.Kind == ExecMCP {
		ts.Tools = specsOf(live)
	}
	return ts, nil
}

// Toolsets lists a tenant's toolsets, by name.
func (h *Hub) Toolsets(ctx context.Context, tenant string) ([]Toolset, error) {
	if err := h.toolsetsReady(ctx, tenant); err != nil {
		return nil, err
	}
	var out []Toolset
	err := h.store.RecordsPrefix(persistence.ReadsFor(ctx, tenant), recordToolset, tenant+"/", func(_ string, decode func(any) error) error {
		var ts Toolset
		if err := decode(&ts); err != nil {
			return err
		}
		if ts.Tenant == tenant {
			out = append(out, ts)
		}
		return nil
	})
	return out, err
}

// DeleteToolset removes a tenant's toolset; chats that name it go on
// without it.
func (h *Hub) DeleteToolset(ctx context.Context, tenant, name string) error {
	if err := h.toolsetsReady(ctx, tenant); err != nil {
		return err
	}
	if _, err := h.toolset(ctx, tenant, name); err != nil {
		return err
	}
	if err := h.store.DeleteRecord(ctx, recordToolset, tenant+"/"+name); err != nil {
		return fmt.Errorf("delete toolset %s: %w", name, err)
	}
	if _, err := h.tools.RemoveToolset(tenant, name); err != nil {
		h.logFor(ctx).Warn().Err(err).Str("toolset", name).Msg("close toolset")
	}
	h.unindexToolset(tenant, name)
	h.announceToolset(tenant, name)
	return nil
}

// loadToolsets reads every stored toolset at start and has them built and
// registered on goroutines of the hub, at most toolsetConnects at once: each
// MCP server may take its whole connect timeout, and one tenant's hanging
// server must hold up neither the start nor any other tenant. Until a
// tenant's are registered, what uses or changes its tools waits for them
// (toolsetsReady). One that cannot be built (an MCP server down, a variable
// unset) is logged and left out until it is put again; its record stays.
func (h *Hub) loadToolsets(ctx context.Context) error {
	byTenant := map[string][]Toolset{}
	err := h.store.Records(ctx, recordToolset, func(_ string, decode func(any) error) error {
		var ts Toolset
		if err := decode(&ts); err != nil {
			return err
		}
		byTenant[ts.Tenant] = append(byTenant[ts.Tenant], ts)
		return nil
	})
	if err != nil {
		return fmt.Errorf("load toolsets: %w", err)
	}
	sem := make(chan struct{}, toolsetConnects)
	for tenant, all := range byTenant {
		open := h.toolsetGates.shut(tenant, len(all))
		h.work.Go(func() {
			defer open()
			h.buildStored(sem, all)
		})
	}
	return nil
}

// buildStored builds a tenant's stored toolsets at once, each in a place of
// sem, and registers them in order; Close's cancel ends the builds.
func (h *Hub) buildStored(sem chan struct{}, all []Toolset) {
	type builtSet struct {
		tools   []tools.Tool
		closeFn func() error
		err     error
	}
	built := make([]builtSet, len(all))
	var wg sync.WaitGroup
	for i, ts := range all {
		wg.Go(func() {
			b := &built[i]
			select {
			case sem <- struct{}{}:
			case <-h.ctx.Done():
				b.err = fmt.Errorf("build toolset %s at start: %w", ts.Name, h.ctx.Err())
				return
			}
			defer func() { <-sem }()
			b.tools, b.closeFn, b.err = h.buildToolset(h.ctx, ts)
			h.toolsetGates.built(ts.Tenant)
		})
	}
	wg.Wait()
	for i, ts := range all {
		if built[i].err != nil && h.ctx.Err() != nil {
			continue // the hub is closing: nothing is left out
		}
		h.registerToolset(ts, built[i].tools, built[i].closeFn, built[i].err)
	}
}

// toolsetsReady waits until the tenant's stored toolsets, built at start,
// are registered (or left out), or ctx ends: a turn, a chat's setup and the
// toolset API then see them, and a PUT or DELETE is not overtaken by the
// start's build of the version stored before it. Other tenants never wait.
func (h *Hub) toolsetsReady(ctx context.Context, tenant string) error {
	ready := h.toolsetGates.of(tenant)
	if ready == nil {
		return nil
	}
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the caller went away while this tenant's stored toolsets were being built at start: %w", ctx.Err())
	}
}

// tenantGates are tenants' gates, each closed (and forgotten) once its
// tenant's stored toolsets are registered, with the count of its toolsets
// not yet built (/healthz's toolsets_building).
type tenantGates struct {
	mu sync.Mutex
	m  map[string]*gate
}

type gate struct {
	c    chan struct{}
	left int
}

// shut shuts tenant's gate, with n toolsets to build, and returns what
// opens it.
func (g *tenantGates) shut(tenant string, n int) (open func()) {
	c := make(chan struct{})
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]*gate{}
	}
	g.m[tenant] = &gate{c: c, left: n}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		delete(g.m, tenant)
		g.mu.Unlock()
		close(c)
	}
}

// built counts one of tenant's toolsets built (or given up).
func (g *tenantGates) built(tenant string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gt := g.m[tenant]; gt != nil {
		gt.left--
	}
}

// of is tenant's closed gate, nil when it is open.
func (g *tenantGates) of(tenant string) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gt := g.m[tenant]; gt != nil {
		return gt.c
	}
	return nil
}

// building counts the tenants whose gates are closed and their toolsets
// not yet built; nil once every gate is open.
func (g *tenantGates) building() *api.ToolsetsBuilding {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.m) == 0 {
		return nil
	}
	out := &api.ToolsetsBuilding{Tenants: len(g.m)}
	for _, gt := range g.m {
		out.Toolsets += gt.left
	}
	return out
}

// toolsetConnects bounds the stored toolsets built at once at start.
const toolsetConnects = 256

// installToolset builds a stored toolset, registers and indexes it; one
// that cannot be built now is logged and left out.
func (h *Hub) installToolset(ctx context.Context, ts Toolset) {
	built, closeFn, err := h.buildToolset(ctx, ts)
	h.registerToolset(ts, built, closeFn, err)
}

// registerToolset indexes and registers a built toolset; one that could
// not be built (err), indexed or registered is logged and left out.
func (h *Hub) registerToolset(ts Toolset, built []tools.Tool, closeFn func() error, err error) {
	var reg *toolindex.Register
	if err == nil {
		reg, err = toolsetRegister(ts.Tenant, ts.Name, built)
	}
	if err == nil {
		err = h.tools.PutToolset(ts.Tenant, ts.Name, built, closeFn)
	}
	if err != nil {
		if closeFn != nil {
			_ = closeFn()
		}
		h.log.Error().Err(err).Str("tenant", ts.Tenant).Str("toolset", ts.Name).Msg("toolset left out")
		return
	}
	h.indexToolset(reg)
}

// SubmitToolResults hands the application's results to the chat's paused
// turn and returns the turn's id once they are durable; the resumed turn's
// events follow (subscribe before calling).
func (h *Hub) SubmitToolResults(ctx context.Context, tenant, chatID string, req api.ToolResultsRequest) (string, error) {
	return h.SubmitToolResultsThen(ctx, tenant, chatID, req, nil)
}

// SubmitToolResultsThen is SubmitToolResults followed, in the same turn,
// by the person's messages then (role user; a Chat Completions client
// sends its tool results and its next message at once): they are stored
// after the results, which must answer every call the turn waits for, and
// the resumed turn answers them.
func (h *Hub) SubmitToolResultsThen(ctx context.Context, tenant, chatID string, req api.ToolResultsRequest, then []api.Message) (string, error) {
	if err := h.checkChat(ctx, tenant, chatID); err != nil {
		return "", err
	}
	if err := h.toolsetsReady(ctx, tenant); err != nil {
		return "", err
	}
	results := make([]session.ToolResult, len(req.Results))
	size := 0
	for i, r := range req.Results {
		results[i] = session.ToolResult{CallID: r.CallID, Output: r.Output, IsError: r.IsError}
		size += len(r.Output)
	}
	var after []chat.Message
	for i, m := range then {
		if m.Role != api.RoleUser {
			return "", fmt.Errorf("%w: message %d after the tool results has role %q; only user messages may follow them", ErrInvalid, i, m.Role)
		}
		after = append(after, chat.Message{Role: chat.RoleUser, Content: m.Content, Origin: m.Origin})
	}
	if err := h.ingest.take(tenant, size+messageBytes(after...)); err != nil {
		return "", err
	}
	res, err := h.ask(ctx, chatID, &session.SubmitToolResults{Results: results, Then: after}, askTimeout)
	if err != nil {
		return "", err
	}
	acc, ok := res.(*session.TurnAccepted)
	if !ok {
		return "", fmt.Errorf("tool results: unexpected reply %T", res)
	}
	return acc.TurnID, nil
}

// PutWireToolset is PutToolset for the API's body.
func (h *Hub) PutWireToolset(ctx context.Context, tenant, name string, req api.PutToolsetRequest) (api.Toolset, error) {
	e := req.Executor
	ts := Toolset{Name: name, Tools: specsOfWire(req.Tools), Executor: Executor{Kind: e.Kind, URL: e.URL, SecretEnv: e.SecretEnv, HeadersEnv: e.HeadersEnv}}
	if e.Timeout != "" {
		d, err := time.ParseDuration(e.Timeout)
		if err != nil || d <= 0 {
			return api.Toolset{}, fmt.Errorf("%w: executor.timeout %q: use a duration such as \"30s\"", ErrInvalid, e.Timeout)
		}
		ts.Executor.Timeout = d
	}
	out, err := h.PutToolset(ctx, tenant, ts)
	return wireToolset(out), err
}

// WireToolset is Toolset in the API's shape.
func (h *Hub) WireToolset(ctx context.Context, tenant, name string) (api.Toolset, error) {
	ts, err := h.Toolset(ctx, tenant, name)
	return wireToolset(ts), err
}

// WireToolsets is Toolsets in the API's shape.
func (h *Hub) WireToolsets(ctx context.Context, tenant string) ([]api.Toolset, error) {
	all, err := h.Toolsets(ctx, tenant)
	out := make([]api.Toolset, len(all))
	for i, ts := range all {
		out[i] = wireToolset(ts)
	}
	return out, err
}

func wireToolset(ts Toolset) api.Toolset {
	e := ts.Executor
	out := api.Toolset{Name: ts.Name, Tools: wireTools(ts.Tools), Version: ts.Version, UpdatedAt: ts.UpdatedAt,
		Executor: api.Executor{Kind: e.Kind, URL: e.URL, SecretEnv: e.SecretEnv, HeadersEnv: e.HeadersEnv}}
	if e.Timeout > 0 {
		out.Executor.Timeout = e.Timeout.String()
	}
	return out
}

// checkSetup refuses a new chat's settings its model's protocol does not
// take, and toolsets or tools it cannot use.
func (h *Hub) checkSetup(c persistence.Chat) error {
	if c.Model != "" {
		if err := h.checkSettings(c.Model, c.Settings); err != nil {
			return err
		}
	}
	return h.tools.CheckScope(tools.Scope{Tenant: c.Tenant, Toolsets: c.Toolsets, Inline: c.Tools})
}

// checkSettings refuses settings model's protocol does not take.
func (h *Hub) checkSettings(model string, s chat.Settings) error {
	client, _, err := h.catalog.Resolve(model)
	if err != nil {
		return err
	}
	return providers.CheckSettings(client, s)
}

// CheckModelSettings checks settings as a chat of model would take them,
// without a chat taking them (a refusal is a *SettingError, with
// ErrInvalid): a request that resumes a paused turn, which keeps the setup
// it started with, is still refused what its chat would refuse.
func (h *Hub) CheckModelSettings(model string, s api.Settings) error {
	if err := h.checkSettings(model, settingsOf(&s)); err != nil {
		return fmt.Errorf("%w: check settings for %s: %w", ErrInvalid, model, err)
	}
	return nil
}
