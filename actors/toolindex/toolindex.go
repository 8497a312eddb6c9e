// Package toolindex is the actor that holds every tool the daemon knows
// (registered in Go by the embedding application, or listed by MCP servers)
// and answers which ones fit a request: Search for find_tools, NamedIn for
// the tools a person's message names. Ranking itself is package toolsearch.
//
// Spawn it once with Props and talk to it with the messages in messages.go.
// Requests that want an answer must carry a sender (RequestFuture from
// outside actors, ctx.Request between actors); each answer carries the
// request's ReqID. The actor owns its index: callers never see it, so no
// locking is needed. Registrations are batched: tools sent in a burst of
// Register messages are indexed in one rebuild, before the next request that
// reads the index.
package toolindex

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/toolsearch"
)

// Config configures the actor.
type Config struct {
	// Log receives the actor's warnings. Optional. Defaults to none.
	Log zerolog.Logger
	// Source names where the actor's tools come from: it indexes every tool
	// Source returns when it starts, and so again when its supervisor
	// restarts it after a panic (a restart builds a new, empty actor). Tools
	// sent only by Register are not in Source and do not survive a restart.
	// Optional. Defaults to none: the actor starts empty.
	Source func() []Tool
}

// Props returns the props of a tool-index actor, empty unless cfg.Source.
func Props(cfg Config) *actor.Props {
	log := cfg.Log.With().Str("component", "toolindex").Logger()
	return actors.Props(log, func() actor.Actor { return &indexActor{log: log, source: cfg.Source} })
}

type indexActor struct {
	log    zerolog.Logger
	source func() []Tool
	ix     *toolsearch.Index
	tools  map[string]Tool
	// pending holds registered tools not yet in ix; they are indexed in one
	// rebuild when something next reads the index.
	pending []toolsearch.Doc
}

var _ actor.Actor = (*indexActor)(nil)

// flushPending is a self-message: index what was registered, even if no
// request comes to force it.
type flushPending struct{}

func (a *indexActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.ix = toolsearch.NewIndex(nil)
		a.tools = map[string]Tool{}
		if a.source != nil {
			a.handleRegister(ctx, &Register{Tools: a.source()})
		}
	case *Register:
		a.handleRegister(ctx, m)
	case *flushPending:
		a.flush()
	case *Unregister:
		a.handleUnregister(ctx, m)
	case *Search:
		a.flush()
		a.respond(ctx, &SearchResult{ReqID: m.ReqID, Hits: a.ix.Search(m.Query, m.K)})
	case *NamedIn:
		a.flush()
		a.respond(ctx, &NamedInResult{ReqID: m.ReqID, Names: a.ix.NamedIn(m.Message, m.Max)})
	case *Get:
		a.handleGet(ctx, m)
	case actor.AutoReceiveMessage, actor.SystemMessage:
		// lifecycle messages need nothing from us
	default:
		a.log.Warn().Str("type", fmt.Sprintf("%T", m)).Msg("unknown message")
	}
}

func (a *indexActor) handleRegister(ctx actor.Context, m *Register) {
	res := &Registered{ReqID: m.ReqID}
	for _, t := range m.Tools {
		if t.Name == "" {
			res.Invalid = append(res.Invalid, "")
			continue
		}
		ps, err := params(t.Parameters)
		if err != nil {
			a.log.Warn().Err(err).Str("tool", t.Name).Msg("tool indexed without its parameters")
			res.Invalid = append(res.Invalid, t.Name)
		}
		t.Parameters = append([]byte(nil), t.Parameters...) // the sender may reuse its buffer
		a.tools[t.Name] = t
		a.pending = append(a.pending, toolsearch.Doc{Name: t.Name, Description: t.Description, Params: ps})
		res.Count++
	}
	if len(a.pending) > 0 && len(a.pending) == res.Count {
		// First Register of a burst: schedule the rebuild behind whatever
		// else is already queued, so a burst costs one rebuild.
		ctx.Send(ctx.Self(), &flushPending{})
	}
	res.Total = len(a.tools)
	a.respond(ctx, res)
}

func (a *indexActor) handleUnregister(ctx actor.Context, m *Unregister) {
	a.flush()
	var gone []string
	for _, n := range m.Names {
		if _, ok := a.tools[n]; ok {
			delete(a.tools, n)
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
		a.ix.Remove(gone...)
	}
	a.respond(ctx, &Unregistered{ReqID: m.ReqID, Total: len(a.tools)})
}

func (a *indexActor) handleGet(ctx actor.Context, m *Get) {
	res := &GetResult{ReqID: m.ReqID}
	for _, n := range m.Names {
		if t, ok := a.tools[n]; ok {
			res.Tools = append(res.Tools, t)
		}
	}
	a.respond(ctx, res)
}

func (a *indexActor) flush() {
	if len(a.pending) == 0 {
		return
	}
	a.ix.Add(a.pending...)
	a.log.Debug().Int("added", len(a.pending)).Int("total", a.ix.Len()).Msg("tools indexed")
	a.pending = nil
}

// respond answers the sender if there is one: a Register sent with Send
// expects no answer, and answering would only make a dead letter.
func (a *indexActor) respond(ctx actor.Context, msg any) {
	if ctx.Sender() != nil {
		ctx.Respond(msg)
	}
}
