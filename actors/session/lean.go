package session

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/actors/toolindex"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/tools"
)

// Lean mode thresholds (seed 0086 §2): nobody sets lean; these decide it.
const (
	leanWindow = 16 << 10 // a window this small is always lean
	leanShare  = 0.30     // the full prompt and tools past this share of the window
	// toolListShare: the tool list alone past this share of the window. It
	// catches an application's big registry; agentd's own tools (≈3.4K
	// tokens with the document tools) stay under it on a 32K window.
	toolListShare  = 0.15
	maxLoadedTools = 10
	// findToolsShare bounds find_tools' answer and loadedShare the loaded
	// tools' schemas, as shares of the window: on a 4K model ten schemas
	// would leave no room for the chat.
	findToolsShare = 0.10
	loadedShare    = 0.15
	findToolsK     = 5
	namedToolsMax  = 3
	findToolsName  = tools.FindToolsName
)

// askTimeout bounds a wait for the tool index, which also ends with the
// turn. A var: a test makes it outlast a stop's wait for the turn's work.
var askTimeout = 5 * time.Second

// maxDeclinedTools bounds the tools words load no more.
const maxDeclinedTools = 32

// findToolsSpec is the one tool a lean chat starts with.
var findToolsSpec = chat.ToolSpec{
	Name: findToolsName,
	Description: "Load tools for what you want to do next. Say it in a few words (e.g. \"remember a fact\", " +
		"\"read a web page\"); the best matching tools are loaded and their descriptions returned. Loaded tools can " +
		"be called from your next step on.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what you want to do, in a few words"}},"required":["query"]}`),
}

// isLean decides whether a request goes lean on info's window.
func (s *session) isLean(info providers.ModelInfo, su setup) bool {
	w := requestRoom(info, su)
	if w <= leanWindow || info.ToolsInWords {
		return true
	}
	all := s.allTools(info.Vision, su).tokens
	full := textTokens(withInstructions(su.instructions, s.deps.Prompts.System(s.meta.Tenant, false))) + all
	return float64(full) > leanShare*float64(w) || float64(all) > toolListShare*float64(w)
}

// requestRoom is the most a request of the chat may hold: the model's
// window, or the chat's threshold below it. A chat held to 2,000 tokens is
// a small-window chat, lean whatever its model reads.
func requestRoom(info providers.ModelInfo, su setup) int {
	if t, _ := su.threshold(info.Window); t > 0 && t < info.Window {
		return t
	}
	return info.Window
}

// toolsCost caches every tool of a scope and what they cost to send: an
// application's registry may hold thousands, and each model call asks
// (the turn's plan and the fold check after it).
type toolsCost struct {
	gen      uint64
	vision   bool
	toolsets []string        // the scope's, compared rather than formatted each turn
	inline   string          // the scope's inline tools as JSON
	specs    []chat.ToolSpec // read-only: requests share it
	tokens   int
}

// allTools is allSpecs and its toolTokens, kept while the registry and the
// scope stay as they are.
func (s *session) allTools(vision bool, su setup) toolsCost {
	c := toolsCost{gen: s.deps.Tools.Gen(), vision: vision}
	if len(su.scope.Inline) > 0 {
		c.inline = specJSON(su.scope.Inline)
	}
	if s.cost.gen == c.gen && s.cost.vision == vision && slices.Equal(s.cost.toolsets, su.scope.Toolsets) && s.cost.inline == c.inline && s.cost.specs != nil {
		return s.cost
	}
	c.toolsets = slices.Clone(su.scope.Toolsets)
	// Clipped: an append to a request's tools copies them.
	c.specs = slices.Clip(s.allSpecs(vision, su))
	c.tokens = toolTokens(c.specs)
	s.cost = c
	return c
}

// visionTools are offered only to a model that takes pictures.
var visionTools = map[string]bool{"image_view": true}

// allSpecs returns every tool a model may be offered, in the scope's
// stable order.
func (s *session) allSpecs(vision bool, su setup) []chat.ToolSpec {
	specs := s.toolsOf(su).Specs()
	if !vision {
		specs = slices.DeleteFunc(specs, func(sp chat.ToolSpec) bool { return visionTools[sp.Name] })
	}
	return specs
}

// systemAndTools returns the system prompt and tools a request carries on
// a window: the application's instructions first, whole, then agentd's
// prompt; lean shortens only agentd's part. A lean request carries
// find_tools, the chat's own tools, and the newest loaded tools that fit
// loadedShare of the window, in the order they were loaded; and what the
// tools cost.
func (s *session) systemAndTools(lean, vision bool, windowTokens int, su setup) (system string, specs []chat.ToolSpec, specsTokens int) {
	if !lean {
		all := s.allTools(vision, su)
		return withInstructions(su.instructions, s.deps.Prompts.System(s.meta.Tenant, false)), all.specs, all.tokens
	}
	system = withInstructions(su.instructions, s.deps.Prompts.System(s.meta.Tenant, true))
	specs = append([]chat.ToolSpec{findToolsSpec}, su.scope.Inline...)
	if len(s.snap.LoadedTools) > 0 {
		var loaded []chat.ToolSpec
		for _, sp := range s.toolsOf(su).Specs(s.snap.LoadedTools...) {
			if (vision || !visionTools[sp.Name]) && !slices.ContainsFunc(su.scope.Inline, func(in chat.ToolSpec) bool { return in.Name == sp.Name }) {
				loaded = append(loaded, sp)
			}
		}
		specs = append(specs, newestThatFit(loaded, int(loadedShare*float64(windowTokens)))...)
	}
	return system, specs, toolTokens(specs)
}

// loadTools adds tools to the chat's loaded set, at the end: a tool loaded
// again keeps its place, so the tools a request carries never reshuffle.
// Past ten, the earliest loaded goes.
func (s *session) loadTools(su setup, names ...string) []string {
	var added []string
	view := s.toolsOf(su)
	for _, n := range names {
		if _, ok := view.Get(n); !ok || n == findToolsName || slices.Contains(s.snap.LoadedTools, n) {
			continue
		}
		s.snap.LoadedTools = append(s.snap.LoadedTools, n)
		added = append(added, n)
	}
	if over := len(s.snap.LoadedTools) - maxLoadedTools; over > 0 {
		s.snap.LoadedTools = slices.Clone(s.snap.LoadedTools[over:])
		s.snap.UncalledTools = slices.DeleteFunc(s.snap.UncalledTools, func(n string) bool { return !slices.Contains(s.snap.LoadedTools, n) })
	}
	return added
}

// askNamedTools asks the tool index which tools the person's message names.
// The ask runs in a goroutine: a future may block there, never in Receive.
// It ends with the turn's context: a turn stopped or deleted meanwhile
// waits for no slow index.
func (s *session) askNamedTools(ctx actor.Context) {
	t := s.turn
	text := ""
	if n := len(s.msgs); n > 0 {
		text = s.msgs[n-1].Content
	}
	root, self, index, turnCtx, turnID, scopes := ctx.ActorSystem().Root, ctx.Self(), s.deps.ToolIndex, t.ctx, t.id, indexScopes(t.setup)
	s.work.Go(func() {
		var names []string
		res, err := actors.Ask(turnCtx, root, index, &toolindex.NamedIn{ReqID: turnID, Message: text, Max: namedToolsMax, Scopes: scopes}, askTimeout)
		if r, ok := res.(*toolindex.NamedInResult); ok && err == nil {
			names = r.Names
		}
		root.Send(self, &toolsNamed{turnID: turnID, names: names})
	})
}

func (s *session) toolsNamed(ctx actor.Context, m *toolsNamed) {
	if s.turn == nil || s.turn.id != m.turnID {
		return
	}
	// A tool words loaded before and the model left uncalled is not loaded
	// by words again: each load changes the tool list, and with it the
	// prompt cache's prefix.
	names := slices.DeleteFunc(m.names, func(n string) bool { return slices.Contains(s.snap.DeclinedTools, n) })
	if added := s.loadTools(s.turn.setup, names...); len(added) > 0 {
		s.snap.UncalledTools = append(s.snap.UncalledTools, added...)
		s.publishInTurn(chat.EventToolsLoaded, map[string][]string{"names": added})
	}
	s.prepare(ctx)
}

// toolsUsed: the model called these tools, or asked find_tools for them;
// they stay loaded past the next fold.
func (s *session) toolsUsed(names []string) {
	used := func(n string) bool { return slices.Contains(names, n) }
	s.snap.UncalledTools = slices.DeleteFunc(s.snap.UncalledTools, used)
	s.snap.DeclinedTools = slices.DeleteFunc(s.snap.DeclinedTools, used)
}

// dropUncalledTools unloads the tools words loaded that the model never
// called. It runs at a fold, which changes the request's prefix anyway, so
// the tool list changes only where the prompt cache is lost already.
func (s *session) dropUncalledTools() {
	if len(s.snap.UncalledTools) == 0 {
		return
	}
	s.snap.LoadedTools = slices.DeleteFunc(s.snap.LoadedTools, func(n string) bool { return slices.Contains(s.snap.UncalledTools, n) })
	s.snap.DeclinedTools = append(s.snap.DeclinedTools, s.snap.UncalledTools...)
	if over := len(s.snap.DeclinedTools) - maxDeclinedTools; over > 0 {
		s.snap.DeclinedTools = slices.Clone(s.snap.DeclinedTools[over:])
	}
	s.snap.UncalledTools = nil
}

// newestThatFit keeps the last of specs (the newest loaded) whose schemas
// fit room tokens together, in their order.
func newestThatFit(specs []chat.ToolSpec, room int) []chat.ToolSpec {
	used, from := 0, len(specs)
	for from > 0 {
		n := toolTokens(specs[from-1 : from])
		if used+n > room {
			break
		}
		used += n
		from--
	}
	return specs[from:]
}

// findTools answers a find_tools call: the best matches that fit room
// tokens (at least the best one) are loaded and their descriptions and
// schemas returned. Its wait for the index ends with ctx, the turn's: a
// turn stopped or deleted meanwhile hears "cancelled" at once.
func findTools(ctx context.Context, root *actor.RootContext, index *actor.PID, scopes []string, specsOf func(...string) []chat.ToolSpec, args string, room int) (string, []string, bool) {
	var a struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal([]byte(args), &a); err != nil || strings.TrimSpace(a.Query) == "" {
		return `find_tools needs {"query": "what you want to do"}`, nil, true
	}
	if index == nil {
		return "no tool index is running", nil, true
	}
	res, err := actors.Ask(ctx, root, index, &toolindex.Search{ReqID: a.Query, Query: a.Query, K: findToolsK, Scopes: scopes}, askTimeout)
	if err != nil && ctx.Err() != nil {
		return tools.CancelledResult(findToolsName).Text, nil, true
	}
	r, ok := res.(*toolindex.SearchResult)
	if err == nil && !ok {
		err = fmt.Errorf("unexpected answer %T", res)
		if f, failed := res.(*toolindex.Failed); failed {
			err = f // the index failed on this search; it says why
		}
	}
	if err != nil {
		return fmt.Sprintf("tool search failed: %v", err), nil, true
	}
	var names []string
	for _, h := range r.Hits {
		names = append(names, h.Name)
	}
	if len(names) == 0 {
		return "No tool matches that; try other words.", nil, false
	}
	specs := specsOf(names...)
	if len(specs) == 0 {
		return "No tool matches that; try other words.", nil, false
	}
	kept := specs[:1]
	for i := 2; i <= len(specs) && toolTokens(specs[:i]) <= room; i++ {
		kept = specs[:i]
	}
	names = names[:0]
	for _, sp := range kept {
		names = append(names, sp.Name)
	}
	return "Loaded these tools; call them from your next step:\n" + specJSON(kept), names, false
}
