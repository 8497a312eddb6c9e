package summarizer

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/chat"
)

// Fold asks for a chat's summary to take in Turns. The reply, *Folded, goes
// to the sender. Only one fold per chat runs at once; a second one for the
// same chat is answered at once with OK false.
type Fold struct {
	ReqID  string
	ChatID string
	// Tenant owns the chat: the provider's slots are shared fairly between
	// tenants, so one tenant's folds cannot starve another's.
	Tenant  string
	Model   string // the chat's own "provider/model"
	Summary string // the summary so far
	Digest  string // the digest so far (folds that got no summary)
	Turns   []chat.Message
	Focus   string // what the person asked to keep (/compact focus)
	// Factor is the chat's estimate correction (window.Calibration), so a
	// summarising request is sized the way the chat's turns are.
	Factor float64
	// Trace is the span of the turn that waits for the fold, if any: the
	// fold's span is its child.
	Trace trace.SpanContext
	// Prefix is the chat's own last request up to the fold point, or nil.
	Prefix *Prefix
}

// Prefix is the head of a chat's own request as it was last sent: its system
// prompt, tools and the messages before the fold point (the summary frame
// in front, stale results stubbed). The chat's provider holds it in its
// prompt cache, so a summary asked of the chat's own model right after it
// pays only for the question; the folded turns as lines are the fallback.
type Prefix struct {
	System   string
	Tools    []chat.ToolSpec
	Messages []chat.Message
	// Tokens is the chat's estimate of System, Tools and Messages,
	// anchored on what its provider counted (window.Calibration.Estimate).
	Tokens   int
	CacheKey string // the chat's prompt-cache key
}

// Folded answers Fold. With OK false, Summary is empty and the chat keeps
// its old summary; Digest always holds the bounded digest of what was folded.
type Folded struct {
	ReqID    string
	ChatID   string
	OK       bool
	Summary  string
	Digest   string
	Model    string // the model that wrote the summary
	Usage    chat.Usage
	Requests int
	Err      string
}

// Condense asks for the structured state of one live turn (the in-turn
// safety net): TASK / PROGRESS / REMAINING / DATA / DECISIONS. The reply,
// *Condensed, goes to the sender.
type Condense struct {
	ReqID  string
	ChatID string
	Tenant string // owns the chat, as Fold's
	Model  string
	Prior  string         // the turn's previous structured state, if any
	Turn   []chat.Message // the turn's saved originals
	Factor float64        // the chat's estimate correction, as Fold's
}

// Condensed answers Condense.
type Condensed struct {
	ReqID string
	OK    bool
	Text  string
	Usage chat.Usage
	Err   string
}
