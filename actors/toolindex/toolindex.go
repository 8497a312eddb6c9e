// Package toolindex is the actor that holds every tool the daemon knows
// (registered in Go by the embedding application, or listed by MCP servers)
// and answers which ones fit a request: Search for find_tools, NamedIn for
// the tools a person's message names. Ranking itself is package toolsearch.
//
// Spawn it once with Props and talk to it with the messages in messages.go.
// Requests that want an answer must carry a sender (RequestFuture from
// outside actors, ctx.Request between actors); each answer carries the
// request's ReqID. The actor owns its index: callers never see it, so no
// locking is needed. A Register is indexed when it arrives, at the cost of
// its own tools (toolsearch does not rebuild an index to add to it); one
// made by ReplaceScope was indexed by its sender, and the actor only
// installs it, so one tenant's large toolset holds no other's searches.
// The first start reads and indexes Config.Source on a goroutine of the
// actor's, and a restart after a panic keeps what was indexed but for the
// scope the panic hit, which such a goroutine indexes again (Config.Tools):
// the mailbox keeps answering meanwhile, and a search that reads a scope
// still being built waits for it (never an empty answer for tools that
// are coming), as does a tool added to or removed from it, applied on top.
// A request whose handling panics is answered with Failed by the restarted
// actor, not run again: a Register is indexed before it is installed, so
// one that panics leaves its scope as it was. When the actor stops it
// answers the requests still parked with Failed (ErrStopping), cancels the
// context it gave Source and Tools, then waits for those goroutines.
package toolindex

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/toolsearch"
)

// Config configures the actor.
type Config struct {
	// Log receives the actor's warnings. Optional. Defaults to none.
	Log zerolog.Logger
	// Source names where the actor's tools come from: it indexes every
	// scope Source returns (the daemon's tools and each toolset) when it
	// first starts, Source read and its tools indexed off the mailbox, so
	// a slow read holds no Register; reads wait for it (see kept.pending).
	// With Tools set, the daemon's own scope is read from Tools("")
	// instead, on a goroutine of its own, and a "" Source returns is
	// dropped: every read reads the daemon's scope, and none waits for a
	// tenant's toolsets but a read of them. ctx is cancelled when the
	// actor stops, which waits for Source to return (at most stopWait): a
	// read that can hang must end with ctx; what it returns then is
	// dropped. Optional. Defaults to none: the actor starts empty.
	Source func(ctx context.Context) []*Register
	// Tools returns the tools a scope holds now (its toolset's, or the
	// daemon's for ""). A restart after a panic keeps every scope built
	// but the one the panicking message was handling (it may be half
	// changed), which is rebuilt from Tools off the mailbox: no other
	// scope's search waits for it. ctx is Source's. Optional. Defaults to
	// none: that scope is dropped.
	Tools func(ctx context.Context, scope string) []Tool
}

// Props returns the props of a tool-index actor, empty unless cfg.Source.
// Spawn each Props once: the actor's restarts share what it indexed.
//
// Its mailbox runs on the goroutine of the sender that finds it idle
// (protoactor's synchronized dispatcher) rather than on a goroutine of its
// own: a search is short and pure, and handing it to another goroutine and
// the answer back cost more than the search (the waiting goroutine parks, the
// work moves to the other core and its cold cache). Every sender is a
// goroutine that waits for the answer anyway (sessions' futures, the hub's
// toolset registration), never an actor's Receive; messages still run one at
// a time, in order.
func Props(cfg Config) *actor.Props {
	log := cfg.Log.With().Str("component", "toolindex").Logger()
	k := &kept{rebuilds: map[string]uint64{}}
	return actors.Props(log, func() actor.Actor { return &indexActor{log: log, source: cfg.Source, tools: cfg.Tools, kept: k} },
		actor.WithDispatcher(actor.NewSynchronizedDispatcher(dispatchThroughput)), actor.WithGuardian(restartAlways))
}

// restartAlways supervises the actor spawned from the root: protoactor's
// default stops an actor past 10 failures in 10 s, and a tenant whose tool
// made searches panic could then end find_tools for every tenant. A
// restart costs the scope the panic hit alone. One value: protoactor keeps
// a guardian per strategy.
var restartAlways = actor.NewRestartingStrategy()

// dispatchThroughput is how many messages a sender's goroutine handles
// before it yields the processor (protoactor's default).
const dispatchThroughput = 300

type indexActor struct {
	log    zerolog.Logger
	source func(context.Context) []*Register
	tools  func(context.Context, string) []Tool
	*kept
}

// kept is what the actor's incarnations share, so that a restart (a new
// actor from the producer) does not index every tool again in the mailbox,
// which every tenant's search waited for (650 ms at 50,000 tools). Only
// the actor's Receive touches it, one message at a time.
type kept struct {
	loaded bool
	// ctx is the builds' context, made at the first start and cancelled
	// when the actor stops, so that no Source or Tools holds the stop.
	ctx    context.Context
	cancel context.CancelFunc
	// scopes holds one index per scope: "" for the daemon's own tools, one
	// per toolset of a tenant; a search reads the scopes it names.
	scopes map[string]*scoped
	// busy names the scope the message being handled reads or changes
	// (when inScope): a panic there may leave it half changed, or its
	// search scratch dirty.
	busy    string
	inScope bool
	// rebuilds holds, by scope, the rebuild under way; a change to the
	// scope meanwhile drops it (what arrived is newer).
	rebuilds map[string]uint64
	// loading is the first load's token while it runs: it may bring any
	// scope, but those changed since it began (fresh), which it leaves.
	loading uint64
	fresh   map[string]bool
	builds  uint64
	// parked holds, in arrival order, the reads of scopes still being
	// built and the changes to them but a replace (see waits), handled
	// once those are built (or their build is dropped).
	parked []parked
	// asking is the request being handled until its answer is sent: a
	// panic meanwhile leaves it here for the restart to answer with an
	// error, where its asker heard nothing until its ask timed out.
	asking parked
	group  actors.Group // the builds' goroutines
}

// parked is a message waiting for a scope, and who sent it.
type parked struct {
	sender *actor.PID
	msg    any // *Search, *NamedIn, *Get, *Register or *Unregister
}

// maxParked bounds the reads parked while a build runs (a Source that
// hangs): past it the oldest read is answered with Failed (ErrOverloaded)
// and unparked, so that no asker waits for an answer that never comes.
// Changes are never dropped. A var: tests lower it.
var maxParked = 10000

// pending reports whether a read of scopes (and of the daemon's own, which
// every read reads) would miss tools a build is bringing.
func (k *kept) pending(scopes []string) bool {
	return k.building("") || slices.ContainsFunc(scopes, k.building)
}

// building reports whether a build under way brings scope.
func (k *kept) building(scope string) bool {
	return k.rebuilds[scope] != 0 || (k.loading != 0 && !k.fresh[scope])
}

// changed notes that a message changed scope: a build of it under way,
// older, is dropped.
func (k *kept) changed(scope string) {
	delete(k.rebuilds, scope)
	if k.loading != 0 {
		k.fresh[scope] = true
	}
}

// enter notes that the message now handles sc, leave that it is done.
func (k *kept) enter(sc *scoped) { k.busy, k.inScope = sc.name, true }
func (k *kept) leave()           { k.inScope = false }

// scoped is one scope's tools and their index.
type scoped struct {
	name  string
	ix    *toolsearch.Index
	tools map[string]Tool
}

// built carries what a build indexed back to the mailbox: the first load
// (first) or one scope rebuilt after a panic; regs is nil when it failed.
type built struct {
	token uint64
	first bool
	scope string
	regs  []*Register
}

// stopWait bounds how long a stopping actor waits for a build.
const stopWait = 10 * time.Second

var _ actor.Actor = (*indexActor)(nil)

func (a *indexActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.start(ctx)
		a.drain(ctx)
	case *actor.Stopping:
		a.failParked(ctx)
		if a.cancel != nil {
			a.cancel()
		}
		if !a.group.Wait(stopWait) {
			a.log.Warn().Msg("a build of the index outlived the stop")
		}
	case *built:
		a.handleBuilt(ctx, m)
		a.drain(ctx)
	case *Register, *Unregister:
		a.handle(ctx, m)
		a.drain(ctx)
	case *Search, *NamedIn, *Get:
		a.handle(ctx, m)
	case actor.AutoReceiveMessage, actor.SystemMessage:
		// lifecycle messages need nothing from us
	default:
		a.log.Warn().Str("type", fmt.Sprintf("%T", m)).Msg("unknown message")
	}
}

// start loads Source (and the daemon's scope from Tools) the first time;
// after a restart it keeps the scopes built and rebuilds the one a panic
// may have left broken. Both build off the mailbox.
func (a *indexActor) start(ctx actor.Context) {
	if !a.loaded {
		a.scopes, a.inScope, a.loaded = map[string]*scoped{}, false, true
		a.ctx, a.cancel = context.WithCancel(context.Background())
		if a.source != nil {
			a.builds++
			a.loading, a.fresh = a.builds, map[string]bool{}
			a.build(ctx, &built{token: a.loading, first: true}, a.source)
			if a.tools != nil {
				a.rebuild(ctx, "") // the load leaves "" to this build
			}
		}
		return
	}
	a.failAsking(ctx)
	if !a.inScope {
		return
	}
	a.leave()
	delete(a.scopes, a.busy)
	a.rebuild(ctx, a.busy)
}

// failAsking answers the request whose handling panicked with Failed, at
// once. It is not handled again: it could panic again.
func (a *indexActor) failAsking(ctx actor.Context) {
	p := a.asking
	if p.msg == nil {
		return
	}
	a.asking = parked{}
	err := fmt.Errorf("%w (a bug, logged); the tools it read are indexed again, so ask again", ErrReadFailed)
	if isChange(p.msg) {
		err = fmt.Errorf("%w (a bug, logged); it was not applied, and a scope it had half changed is indexed again from the daemon's registry", ErrChangeFailed)
	}
	a.fail(ctx, p, err)
}

// failParked answers every request still parked, as the actor stops:
// they waited for a build the stop cancels, and their askers for their
// timeouts.
func (a *indexActor) failParked(ctx actor.Context) {
	ps := a.parked
	a.parked = nil
	for _, p := range ps {
		a.fail(ctx, p, fmt.Errorf("%w: ask again once it is back", ErrStopping))
	}
}

// fail answers p's sender, if any, with Failed for err.
func (a *indexActor) fail(ctx actor.Context, p parked, err error) {
	a.respond(ctx, p.sender, &Failed{ReqID: reqIDOf(p.msg), Err: err})
}

// rebuild indexes scope's tools (again) from Tools off the mailbox.
func (a *indexActor) rebuild(ctx actor.Context, scope string) {
	if a.tools == nil {
		a.log.Warn().Str("scope", scope).Msg("dropped a scope a panic may have broken; nothing to rebuild it from")
		return
	}
	a.changed(scope) // what Tools returns now is newer than what the first load brings
	a.builds++
	a.rebuilds[scope] = a.builds
	tools, log := a.tools, a.log
	a.build(ctx, &built{token: a.builds, scope: scope}, func(bctx context.Context) []*Register {
		reg, err := ReplaceScope(scope, tools(bctx, scope))
		if err != nil {
			log.Error().Err(err).Str("scope", scope).Msg("rebuilding a scope failed; it stays empty")
			return nil
		}
		return []*Register{reg}
	})
}

// build runs produce and indexes what it returns on a goroutine of the
// actor's, and sends it back as msg for the mailbox to install.
func (a *indexActor) build(ctx actor.Context, msg *built, produce func(context.Context) []*Register) {
	self, root, log, bctx := ctx.Self(), ctx.ActorSystem().Root, a.log, a.ctx
	a.group.Go(func() {
		defer func() {
			if r := recover(); r != nil {
				msg.regs = nil
				log.Error().Str("scope", msg.scope).Bool("first_load", msg.first).Str("panic", fmt.Sprint(r)).Msg("building the index panicked; what it built stays empty")
			}
			root.Send(self, msg)
		}()
		regs := produce(bctx)
		if bctx.Err() == nil { // else the actor is stopping: no indexing to wait for
			msg.regs = indexAll(regs)
		}
	})
}

// indexAll is regs indexed as the mailbox would apply them in turn to
// scopes that start empty, each to be installed as ReplaceScope's are.
func indexAll(regs []*Register) []*Register {
	scopes := map[string]*scoped{}
	out := make([]*Register, len(regs))
	for i, r := range regs {
		if r.indexed != nil {
			scopes[r.Scope], out[i] = r.indexed.sc, r
			continue
		}
		sc, ok := scopes[r.Scope]
		if !ok || r.Replace {
			sc = newScoped(r.Scope, len(r.Tools))
			scopes[r.Scope] = sc
		}
		out[i] = &Register{Scope: r.Scope, Replace: true, indexed: sc.add(r.Tools)}
	}
	return out
}

func (a *indexActor) handleBuilt(ctx actor.Context, m *built) {
	if m.first {
		fresh := a.fresh
		a.loading, a.fresh = 0, nil
		for _, r := range m.regs {
			if !fresh[r.Scope] { // else a change since the load began is newer
				a.handleRegister(r)
			}
		}
		return
	}
	if a.rebuilds[m.scope] != m.token {
		return // the scope changed while it was rebuilt
	}
	delete(a.rebuilds, m.scope)
	for _, r := range m.regs {
		a.handleRegister(r)
	}
}

// scope returns the named scope, made empty (room for n tools) if new.
func (a *indexActor) scope(name string, n int) *scoped {
	sc, ok := a.scopes[name]
	if !ok {
		sc = newScoped(name, n)
		a.scopes[name] = sc
	}
	return sc
}

// newScoped is an empty scope whose map has room for n tools, so a large
// Register fills it without rehashing.
func newScoped(name string, n int) *scoped {
	return &scoped{name: name, ix: toolsearch.NewIndex(nil), tools: make(map[string]Tool, n)}
}

func (a *indexActor) handleRegister(m *Register) *Registered {
	added := m.indexed // built by ReplaceScope
	if added == nil {
		added = a.index(m)
	}
	a.changed(m.Scope)
	sc := added.sc
	a.scopes[m.Scope] = sc
	for _, u := range added.unparsed {
		a.log.Warn().Err(u.err).Str("tool", u.name).Msg("tool indexed without its parameters")
	}
	a.log.Debug().Str("scope", m.Scope).Int("added", added.count).Int("total", sc.ix.Len()).Msg("tools indexed")
	return &Registered{ReqID: m.ReqID, Count: added.count, Total: len(sc.tools), Invalid: added.invalid}
}

// index indexes m's tools. A replace, or a scope not held yet, is built
// apart and installed once indexed, so a panic there leaves the index as
// it was; tools added to a scope held are indexed into it, which a panic
// may leave half changed: the restart indexes it again (enter).
func (a *indexActor) index(m *Register) *indexed {
	sc, ok := a.scopes[m.Scope]
	if m.Replace || !ok {
		return newScoped(m.Scope, len(m.Tools)).add(m.Tools)
	}
	a.enter(sc)
	added := sc.add(m.Tools)
	a.leave() // not deferred: a panic must leave the scope marked
	return added
}

// testHookIndexing runs as tools start being indexed; tests hold it.
// testHookSearching runs as a search reads a scope, testHookRemoving as an
// Unregister has half changed one; tests panic there.
var (
	testHookIndexing  = func() {}
	testHookSearching = func(scope string) {}
	testHookRemoving  = func(scope string) {}
)

// indexed is what adding a Register's tools to a scope did.
type indexed struct {
	sc       *scoped
	count    int      // tools added
	invalid  []string // Registered.Invalid
	unparsed []unparsed
}

// unparsed is a tool indexed without its parameters, and why.
type unparsed struct {
	name string
	err  error
}

// add indexes tools into sc, replacing any of the same name.
func (sc *scoped) add(tools []Tool) *indexed {
	testHookIndexing()
	res := &indexed{sc: sc}
	docs := make([]toolsearch.Doc, 0, len(tools))
	parsed := paramsOf(tools)
	// The schemas are copied (the sender may reuse its buffers) into one
	// buffer, which lives while any of its tools does: one allocation, not
	// one per tool.
	size := 0
	for _, t := range tools {
		size += len(t.Parameters)
	}
	schemas := make([]byte, 0, size)
	for i, t := range tools {
		if t.Name == "" {
			res.invalid = append(res.invalid, "")
			continue
		}
		ps, err := parsed[i].params, parsed[i].err
		if err != nil {
			res.unparsed = append(res.unparsed, unparsed{name: t.Name, err: err})
			res.invalid = append(res.invalid, t.Name)
		}
		if len(t.Parameters) > 0 {
			start := len(schemas)
			schemas = append(schemas, t.Parameters...)
			t.Parameters = schemas[start:len(schemas):len(schemas)]
		} else {
			t.Parameters = nil
		}
		sc.tools[t.Name] = t
		docs = append(docs, toolsearch.Doc{Name: t.Name, Description: t.Description, Params: ps})
		res.count++
	}
	sc.ix.Add(docs...)
	return res
}

func (a *indexActor) handleUnregister(m *Unregister) *Unregistered {
	a.changed(m.Scope)
	sc := a.scope(m.Scope, 0)
	// Not left in a defer: a panic must leave the scope marked, for the
	// restart to index it again rather than keep it half changed.
	a.enter(sc)
	var gone []string
	for _, n := range m.Names {
		if _, ok := sc.tools[n]; ok {
			delete(sc.tools, n)
			gone = append(gone, n)
		}
	}
	testHookRemoving(sc.name)
	if len(gone) > 0 {
		sc.ix.Remove(gone...)
	}
	a.leave()
	if m.Scope != "" && len(sc.tools) == 0 {
		delete(a.scopes, m.Scope)
	}
	return &Unregistered{ReqID: m.ReqID, Total: len(sc.tools)}
}

// read returns the indexes a request reads: the daemon's own, then each
// scope it names that exists.
func (a *indexActor) read(scopes []string) []*scoped {
	out := make([]*scoped, 0, 1+len(scopes))
	if sc, ok := a.scopes[""]; ok {
		out = append(out, sc)
	}
	for _, name := range scopes {
		if sc, ok := a.scopes[name]; ok {
			out = append(out, sc)
		}
	}
	return out
}

// search merges the best hits of every scope read, best first.
func (a *indexActor) search(m *Search) []toolsearch.Hit {
	var hits []toolsearch.Hit
	for _, sc := range a.read(m.Scopes) {
		a.enter(sc)
		testHookSearching(sc.name)
		hits = append(hits, sc.ix.Search(m.Query, m.K)...)
	}
	a.leave()
	slices.SortStableFunc(hits, func(x, y toolsearch.Hit) int { return cmp.Compare(y.Score, x.Score) })
	if len(hits) > m.K {
		hits = hits[:m.K]
	}
	return hits
}

func (a *indexActor) namedIn(m *NamedIn) []string {
	var names []string
	for _, sc := range a.read(m.Scopes) {
		a.enter(sc)
		names = append(names, sc.ix.NamedIn(m.Message, m.Max)...)
	}
	a.leave()
	if len(names) > m.Max {
		names = names[:m.Max]
	}
	return names
}

// handle handles a read or a change now, or parks it (see waits).
func (a *indexActor) handle(ctx actor.Context, m any) {
	sender := ctx.Sender()
	if sender == nil && !isChange(m) {
		return // a read nobody will hear the answer of
	}
	if !a.waits(m) {
		a.run(ctx, sender, m)
		return
	}
	if len(a.parked) >= maxParked {
		if i := slices.IndexFunc(a.parked, func(p parked) bool { return !isChange(p.msg) }); i >= 0 {
			a.log.Warn().Int("parked", len(a.parked)).Msg("refused the oldest read waiting for a scope being built")
			a.fail(ctx, a.parked[i], fmt.Errorf("%w: %d requests wait for a scope being built; ask again", ErrOverloaded, len(a.parked)))
			a.parked = slices.Delete(a.parked, i, i+1)
		}
	}
	a.parked = append(a.parked, parked{sender: sender, msg: m})
}

// waits reports whether m must wait for a build. A read of a scope being
// built would miss its tools: an empty answer find_tools would hand the
// model as final. A change to it, applied now, would drop the build and
// with it the scope's other tools; it is applied on top once the scope is
// in. A replace needs none of them and supersedes the build, unless a
// change parked for its scope is before it: changes keep their order.
func (a *indexActor) waits(m any) bool {
	if !isChange(m) {
		return a.pending(scopesOf(m))
	}
	scope, replace := "", false
	switch m := m.(type) {
	case *Register:
		scope, replace = m.Scope, m.Replace || m.indexed != nil
	case *Unregister:
		scope = m.Scope
	}
	behind := slices.ContainsFunc(a.parked, func(p parked) bool { return isChange(p.msg) && scopesOf(p.msg)[0] == scope })
	return behind || (!replace && a.building(scope))
}

func isChange(m any) bool {
	switch m.(type) {
	case *Register, *Unregister:
		return true
	}
	return false
}

// run handles m, answering sender if there is one; if it panics, the
// restarted actor answers (failAsking).
func (a *indexActor) run(ctx actor.Context, sender *actor.PID, m any) {
	a.asking = parked{sender: sender, msg: m}
	var res any
	switch m := m.(type) {
	case *Register:
		res = a.handleRegister(m)
	case *Unregister:
		res = a.handleUnregister(m)
	default:
		res = a.answer(m)
	}
	a.asking = parked{}
	a.respond(ctx, sender, res)
}

// drain handles, in order, the parked messages whose scopes are built now
// (after a message that may have built or changed one). One that panics
// is answered with Failed once the actor is restarted (failAsking), and
// those after it stay parked, handled by the restarted actor.
func (a *indexActor) drain(ctx actor.Context) {
	if len(a.parked) == 0 {
		return
	}
	ps, i := a.parked, 0
	a.parked = nil
	defer func() {
		if i < len(ps) {
			a.parked = append(a.parked, ps[i+1:]...)
		}
	}()
	for ; i < len(ps); i++ {
		if p := ps[i]; a.waits(p.msg) {
			a.parked = append(a.parked, p)
		} else {
			a.run(ctx, p.sender, p.msg)
		}
	}
}

// scopesOf is the scopes m reads (besides the daemon's) or changes.
func scopesOf(m any) []string {
	switch m := m.(type) {
	case *Register:
		return []string{m.Scope}
	case *Unregister:
		return []string{m.Scope}
	case *Search:
		return m.Scopes
	case *NamedIn:
		return m.Scopes
	case *Get:
		return m.Scopes
	}
	return nil
}

// reqIDOf is the ReqID of a request.
func reqIDOf(m any) string {
	switch m := m.(type) {
	case *Register:
		return m.ReqID
	case *Unregister:
		return m.ReqID
	case *Search:
		return m.ReqID
	case *NamedIn:
		return m.ReqID
	case *Get:
		return m.ReqID
	}
	return ""
}

// answer is a read's answer from the scopes built.
func (a *indexActor) answer(m any) any {
	switch m := m.(type) {
	case *Search:
		return &SearchResult{ReqID: m.ReqID, Hits: a.search(m)}
	case *NamedIn:
		return &NamedInResult{ReqID: m.ReqID, Names: a.namedIn(m)}
	case *Get:
		return a.get(m)
	}
	return nil
}

func (a *indexActor) get(m *Get) *GetResult {
	res := &GetResult{ReqID: m.ReqID}
	scopes := a.read(m.Scopes)
	for _, n := range m.Names {
		for _, sc := range scopes {
			if t, ok := sc.tools[n]; ok {
				res.Tools = append(res.Tools, t)
				break
			}
		}
	}
	return res
}

// respond answers sender if there is one: a Register sent with Send
// expects no answer, and answering would only make a dead letter.
func (a *indexActor) respond(ctx actor.Context, sender *actor.PID, msg any) {
	if sender != nil {
		ctx.Send(sender, msg)
	}
}
