package toolindex

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/agentd/agentd/toolsearch"
)

// Tool is one tool as the daemon knows it: Parameters is its JSON Schema
// (an object schema; its properties' names and descriptions are indexed).
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Register adds tools, replacing any of the same name. Indexing costs what
// the tools sent hold, not what the index holds: one tool can be registered
// at a time. A tool registered is seen by every request the actor receives
// after it. If the sender is known
// (Request, RequestFuture) the actor answers *Registered, or *Failed.
type Register struct {
	ReqID string
	// Scope is "" for the daemon's own tools, else one toolset's (Scope
	// names it); Replace drops the scope's tools first.
	Scope   string
	Replace bool
	Tools   []Tool
	// indexed is the scope ReplaceScope built; the actor installs it as
	// it is.
	indexed *indexed
}

// ReplaceScope is a Register that replaces scope's tools with tools,
// indexed now, on the caller's goroutine, so that the actor only installs
// the scope: a tenant's large toolset, put again and again, holds no other
// tenant's search behind its indexing in the actor's one mailbox. Send it
// once. Indexing that panics (a bug) is an error wrapping ErrChangeFailed,
// not a panic on the caller's goroutine: a caller that indexes before it
// stores can then refuse the change, and nothing is stored that the index
// misses.
func ReplaceScope(scope string, tools []Tool) (reg *Register, err error) {
	defer func() {
		if r := recover(); r != nil {
			reg, err = nil, fmt.Errorf("%w: indexing scope %q panicked: %v\n%s", ErrChangeFailed, scope, r, debug.Stack())
		}
	}()
	sc := newScoped(scope, len(tools))
	return &Register{Scope: scope, Replace: true, indexed: sc.add(tools)}, nil
}

// ToolsetScope names the scope of a tenant's toolset.
func ToolsetScope(tenant, toolset string) string { return tenant + "\x00" + toolset }

// ToolsetOfScope is the tenant and toolset a scope names ("" and "" for
// the daemon's own tools).
func ToolsetOfScope(scope string) (tenant, toolset string) {
	tenant, toolset, _ = strings.Cut(scope, "\x00")
	return tenant, toolset
}

// Registered answers Register. Invalid names tools that were still indexed
// by name and description only because their schema did not parse, or that
// were skipped for having no name.
type Registered struct {
	ReqID   string
	Count   int // tools accepted from this Register
	Total   int // tools the index holds now
	Invalid []string
}

// Unregister removes tools by name; unknown names are ignored. If the
// sender is known the actor answers *Unregistered, or *Failed.
type Unregister struct {
	ReqID string
	Scope string
	Names []string
}

// Unregistered answers Unregister.
type Unregistered struct {
	ReqID string
	Total int
}

// Search asks for the K tools that best fit Query, in words.
type Search struct {
	ReqID string
	Query string
	K     int
	// Scopes are the toolsets searched besides the daemon's own tools.
	Scopes []string
}

// SearchResult answers Search, best first.
type SearchResult struct {
	ReqID string
	Hits  []toolsearch.Hit
}

// NamedIn asks which tools a person's Message names by a word of their own
// name (or an address, for the web tools), up to Max.
type NamedIn struct {
	ReqID   string
	Message string
	Max     int
	Scopes  []string
}

// NamedInResult answers NamedIn.
type NamedInResult struct {
	ReqID string
	Names []string
}

// Failed answers a request the actor could not handle: Err wraps
// ErrReadFailed (answering a read panicked), ErrChangeFailed (a Register or
// Unregister panicked), ErrStopping (the actor stopped while the request
// waited for a scope being built) or ErrOverloaded (too many requests
// waited for one; the oldest read is refused). A request that panicked is not tried
// again (it could panic again): a change was not applied, and a scope it
// had half changed is indexed again, as is the scope a read was reading,
// so asking again can work.
type Failed struct {
	ReqID string
	Err   error
}

func (f *Failed) Error() string { return f.Err.Error() }
func (f *Failed) Unwrap() error { return f.Err }

// Get asks for registered tools by name, to hand their schemas to a model.
type Get struct {
	ReqID  string
	Names  []string
	Scopes []string
}

// GetResult answers Get in the order asked; unknown names are left out.
type GetResult struct {
	ReqID string
	Tools []Tool
}
