package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentd/agentd/chat"
)

// Toolsets are an application's tools, registered at runtime under a
// tenant: their names are unique within the tenant (and never shadow a
// daemon-wide tool), and only chats of that tenant that name the toolset
// see them. They live in the same Registry as the daemon's own tools and
// run through the same Call.

// Scope is what one chat may call: every daemon-wide tool, the toolsets it
// names of its tenant, in its order, and its own client-executed tools.
type Scope struct {
	Tenant   string
	Toolsets []string
	Inline   []chat.ToolSpec
}

type toolset struct {
	tools []Tool
	close func() error
}

func setKey(tenant, name string) string { return tenant + "\x00" + name }

// FindToolsName is the tool a lean chat starts with. It is in no registry
// (each session answers it), so toolsets and a chat's own tools are kept
// off its name here: a lean request would carry two tools of that name.
const FindToolsName = "find_tools"

// daemonsLocked reports whether name is a daemon tool's, find_tools
// included.
func (r *Registry) daemonsLocked(name string) bool {
	_, ok := r.tools[name]
	return ok || name == FindToolsName
}

// CheckSchema reports whether params is a JSON Schema of an object, as
// every protocol needs a tool's parameters to be.
func CheckSchema(params json.RawMessage) error {
	_, err := resolveSchema(params)
	return err
}

// checkNew validates a tool an application brings: its name, its schema
// (compiled already when the tool checks its calls).
func checkNew(t Tool) error {
	if !ValidName(t.Name) {
		return fmt.Errorf("tool %q: a name is 1-%d letters, digits, '_' or '-'", t.Name, maxNameLen)
	}
	if t.args == nil {
		if err := CheckSchema(t.Parameters); err != nil {
			return fmt.Errorf("tool %s: %w", t.Name, err)
		}
	}
	if t.Run == nil && !t.Client {
		return fmt.Errorf("tool %s: it has no executor", t.Name)
	}
	return nil
}

// LimitTenantTools bounds the tools of one tenant's toolsets together to
// n (0: no bound), so no tenant grows the shared registry and tool index
// without bound; toolsets put before keep theirs.
func (r *Registry) LimitTenantTools(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tenantTools = n
}

// CheckToolsetName refuses a name no toolset may have.
func CheckToolsetName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("toolset %q: a name is 1-%d letters, digits, '_' or '-'", name, maxNameLen)
	}
	return nil
}

// ErrTenantTools refuses a toolset that would take its tenant's toolsets
// past LimitTenantTools.
var ErrTenantTools = errors.New("too many tools in the tenant's toolsets")

// PutToolset registers or replaces a tenant's toolset, unless
// CheckToolset refuses it; then nothing changes. close, if set, is called
// when the toolset is replaced or removed (an MCP connection). A replaced
// toolset's close error (its server already gone) is no refusal: the new
// one is registered either way.
func (r *Registry) PutToolset(tenant, name string, ts []Tool, close func() error) error {
	r.mu.Lock()
	if err := r.checkToolsetLocked(tenant, name, ts); err != nil {
		r.mu.Unlock()
		return err
	}
	if r.sets == nil {
		r.sets = map[string]*toolset{}
	}
	old := r.sets[setKey(tenant, name)]
	r.sets[setKey(tenant, name)] = &toolset{tools: slices.Clone(ts), close: close}
	r.gen++
	r.mu.Unlock()
	if old != nil && old.close != nil {
		_ = old.close()
	}
	return nil
}

// CheckToolset refuses what PutToolset would: a tool whose name is
// invalid, whose schema is not an object's JSON Schema, or that collides
// with a daemon-wide tool or another toolset of the tenant, and a toolset
// past LimitTenantTools (ErrTenantTools).
func (r *Registry) CheckToolset(tenant, name string, ts []Tool) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.checkToolsetLocked(tenant, name, ts)
}

func (r *Registry) checkToolsetLocked(tenant, name string, ts []Tool) error {
	if err := CheckToolsetName(name); err != nil {
		return err
	}
	seen := make(map[string]bool, len(ts))
	for _, t := range ts {
		if err := checkNew(t); err != nil {
			return fmt.Errorf("toolset %s: %w", name, err)
		}
		if seen[t.Name] {
			return fmt.Errorf("toolset %s: tool %s is listed twice", name, t.Name)
		}
		seen[t.Name] = true
	}
	owners := r.ownersLocked(tenant)
	for n := range seen {
		if r.daemonsLocked(n) {
			return fmt.Errorf("toolset %s: tool %s is a daemon tool's name", name, n)
		}
		if owner, ok := owners[n]; ok && owner != name {
			return fmt.Errorf("toolset %s: tool %s is already in toolset %s", name, n, owner)
		}
	}
	return r.tenantToolsLocked(owners, name, len(seen))
}

// CheckTenantTools refuses n tools in tenant's toolset name as PutToolset
// would (ErrTenantTools), so a toolset can be refused before it is built.
func (r *Registry) CheckTenantTools(tenant, name string, n int) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.tenantToolsLocked(r.ownersLocked(tenant), name, n)
}

// tenantToolsLocked refuses n tools in toolset name past LimitTenantTools,
// beside the others of owners (ownersLocked's map).
func (r *Registry) tenantToolsLocked(owners map[string]string, name string, n int) error {
	if others := othersOf(owners, name); r.tenantTools > 0 && others+n > r.tenantTools {
		return fmt.Errorf("toolset %s: %d tools, and the tenant's other toolsets hold %d; %d together at most: %w", name, n, others, r.tenantTools, ErrTenantTools)
	}
	return nil
}

// ownersLocked maps each tool name of a tenant's toolsets to its toolset.
func (r *Registry) ownersLocked(tenant string) map[string]string {
	out := map[string]string{}
	for key, set := range r.sets {
		if t, n, _ := strings.Cut(key, "\x00"); t == tenant {
			for _, tool := range set.tools {
				out[tool.Name] = n
			}
		}
	}
	return out
}

// othersOf counts the tools of owners (ownersLocked's map) that are not
// in toolset name, which a new version of it replaces.
func othersOf(owners map[string]string, name string) int {
	n := 0
	for _, owner := range owners {
		if owner != name {
			n++
		}
	}
	return n
}

// RemoveToolset drops a tenant's toolset; it reports whether it was there.
func (r *Registry) RemoveToolset(tenant, name string) (bool, error) {
	r.mu.Lock()
	set, ok := r.sets[setKey(tenant, name)]
	delete(r.sets, setKey(tenant, name))
	r.gen++
	r.mu.Unlock()
	if ok && set.close != nil {
		return true, set.close()
	}
	return ok, nil
}

// Toolset returns the tools of a tenant's toolset, in their order.
func (r *Registry) Toolset(tenant, name string) ([]Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	set, ok := r.sets[setKey(tenant, name)]
	if !ok {
		return nil, false
	}
	return slices.Clone(set.tools), true
}

// Toolsets returns every tenant's toolsets by tenant and name.
func (r *Registry) Toolsets() map[[2]string][]Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[[2]string][]Tool, len(r.sets))
	for k, set := range r.sets {
		tenant, name, _ := strings.Cut(k, "\x00")
		out[[2]string{tenant, name}] = slices.Clone(set.tools)
	}
	return out
}

// CheckScope refuses a chat's scope whose toolsets are unknown or whose
// inline tools are invalid or collide with what else the chat sees.
func (r *Registry) CheckScope(sc Scope) error {
	// The chat's own tools' schemas are compiled here, where the chat
	// declares them, and kept for their calls; before the lock, which
	// toolset PUTs wait for.
	args := make([]*argSchema, len(sc.Inline))
	for i, sp := range sc.Inline {
		a, err := r.inlineArgs.get(sp.Parameters)
		if err != nil {
			return fmt.Errorf("tool %s: %w", sp.Name, err)
		}
		args[i] = a
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := map[string]string{}
	for i, n := range sc.Toolsets {
		set, ok := r.sets[setKey(sc.Tenant, n)]
		if !ok {
			return fmt.Errorf("%w: toolset %q", ErrUnknownToolset, n)
		}
		// A view lists a toolset's tools once per naming, and providers
		// refuse a request with two tools of one name.
		if slices.Contains(sc.Toolsets[:i], n) {
			return fmt.Errorf("toolset %s is named twice", n)
		}
		for _, t := range set.tools {
			names[t.Name] = "toolset " + n
		}
	}
	for i, sp := range sc.Inline {
		if err := checkNew(Tool{Name: sp.Name, Parameters: sp.Parameters, Client: true, args: args[i]}); err != nil {
			return err
		}
		if r.daemonsLocked(sp.Name) {
			return fmt.Errorf("tool %s: the name is a daemon tool's", sp.Name)
		}
		if other, ok := names[sp.Name]; ok {
			return fmt.Errorf("tool %s: the name is already in %s", sp.Name, other)
		}
		names[sp.Name] = "the chat's own tools"
	}
	return nil
}

// ErrUnknownToolset names a toolset the tenant has not registered.
var ErrUnknownToolset = errors.New("unknown toolset")

// Gen counts changes of the registry, so a reader can cache what it
// derives from a scope's tools.
func (r *Registry) Gen() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.gen
}

// In returns the view of the registry one chat has.
func (r *Registry) In(sc Scope) View { return View{r: r, sc: sc} }

// View is the registry as one scope sees it. It is a value: cheap to make
// per call, safe for concurrent use.
type View struct {
	r  *Registry
	sc Scope
}

// Get returns the tool a call by name reaches.
func (v View) Get(name string) (Tool, bool) {
	if t, ok := v.r.Get(name); ok {
		return t, true
	}
	v.r.mu.RLock()
	defer v.r.mu.RUnlock()
	for _, n := range v.sc.Toolsets {
		if set, ok := v.r.sets[setKey(v.sc.Tenant, n)]; ok {
			for _, t := range set.tools {
				if t.Name == name {
					return t, true
				}
			}
		}
	}
	for _, sp := range v.sc.Inline {
		if sp.Name == name {
			// A schema refused now (a chat declared before it was checked)
			// leaves the calls unchecked, as they were.
			a, _ := v.r.inlineArgs.get(sp.Parameters)
			return Tool{Name: sp.Name, Description: sp.Description, Parameters: sp.Parameters, Source: SourceClient, Client: true, args: a}, true
		}
	}
	return Tool{}, false
}

// List returns every tool of the scope in a stable order: the daemon's
// sorted by name, then each toolset's in the chat's order and the
// toolset's own, then the chat's own tools. Adding a tool to a toolset
// appends it to its toolset's run.
func (v View) List() []Tool {
	out := v.r.List()
	v.r.mu.RLock()
	for _, n := range v.sc.Toolsets {
		if set, ok := v.r.sets[setKey(v.sc.Tenant, n)]; ok {
			out = append(out, set.tools...)
		}
	}
	v.r.mu.RUnlock()
	for _, sp := range inlineOf(v, out, func(t Tool) string { return t.Name }) {
		out = append(out, Tool{Name: sp.Name, Description: sp.Description, Parameters: sp.Parameters, Source: SourceClient, Client: true})
	}
	return out
}

// inlineOf returns the chat's own tools whose names none of have has: a toolset
// PUT (or a daemon tool added) after the chat was set up may take one's
// name, and a request with two tools of one name is refused by providers.
// The other tool is what Get reaches, so the chat's goes.
func inlineOf[T any](v View, have []T, name func(T) string) []chat.ToolSpec {
	if len(v.sc.Inline) == 0 {
		return nil
	}
	taken := make(map[string]bool, len(have))
	for _, t := range have {
		taken[name(t)] = true
	}
	out := make([]chat.ToolSpec, 0, len(v.sc.Inline))
	for _, sp := range v.sc.Inline {
		if !taken[sp.Name] {
			out = append(out, sp)
		}
	}
	return out
}

// Specs returns the specs of the named tools in the order given, skipping
// unknown names and repeats; with no names, every tool in List's order.
func (v View) Specs(names ...string) []chat.ToolSpec {
	if len(names) == 0 {
		// The daemon's specs are kept (Registry.Specs), not rebuilt from
		// List on every request.
		out := v.r.Specs()
		v.r.mu.RLock()
		for _, n := range v.sc.Toolsets {
			if set, ok := v.r.sets[setKey(v.sc.Tenant, n)]; ok {
				for _, t := range set.tools {
					out = append(out, t.Spec())
				}
			}
		}
		v.r.mu.RUnlock()
		return append(out, inlineOf(v, out, func(sp chat.ToolSpec) string { return sp.Name })...)
	}
	var out []chat.ToolSpec
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if t, ok := v.Get(n); ok && !seen[n] {
			seen[n] = true
			out = append(out, t.Spec())
		}
	}
	return out
}

// Call runs one call of the scope, as Registry.Call.
func (v View) Call(ctx context.Context, call chat.ToolCall, lim Limits) (Result, error) {
	return v.r.call(ctx, v.Get, call, lim)
}

// CloseToolsets drops every toolset and closes what they hold (the daemon
// stops).
func (r *Registry) CloseToolsets() error {
	r.mu.Lock()
	sets := r.sets
	r.sets = nil
	r.gen++
	r.mu.Unlock()
	var errs []error
	for _, set := range sets {
		if set.close != nil {
			errs = append(errs, set.close())
		}
	}
	return errors.Join(errs...)
}
