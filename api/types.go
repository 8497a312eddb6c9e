// Package api is agentd's HTTP surface as Go types, plus a small client. It
// imports nothing of the daemon, so an application can use it alone: these
// are the wire types, kept apart from the daemon's storage records so that
// either can change without the other (the daemon converts at its edge).
package api

import (
	"encoding/json"
	"time"
)

// Error is the one JSON error shape: {"error": "...", "kind": "..."}.
type Error struct {
	Message string `json:"error"`
	// Kind is a stable word for programs: bad_request, not_found, too_large,
	// busy, rate_limited, unauthorized, unavailable, conflict, internal,
	// method_not_allowed.
	Kind string `json:"kind"`
	// Status is the HTTP status (not sent; set by the client).
	Status int `json:"-"`
}

func (e *Error) Error() string { return e.Message }

// UnmarshalJSON reads the native shape and also OpenAI's, which the
// OpenAI-compatible routes (GET /v1/models among them) answer:
// {"error": {"message", "type", "param", "code"}}; its code is the Kind.
func (e *Error) UnmarshalJSON(b []byte) error {
	var raw struct {
		Error json.RawMessage `json:"error"`
		Kind  string          `json:"kind"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	e.Kind = raw.Kind
	if len(raw.Error) > 0 && raw.Error[0] == '{' {
		var o struct {
			Message string  `json:"message"`
			Code    *string `json:"code"`
		}
		if err := json.Unmarshal(raw.Error, &o); err != nil {
			return err
		}
		e.Message = o.Message
		if o.Code != nil {
			e.Kind = *o.Code
		}
		return nil
	}
	if len(raw.Error) == 0 {
		e.Message = ""
		return nil
	}
	return json.Unmarshal(raw.Error, &e.Message)
}

// CreateChatRequest is the body of POST /v1/chats.
type CreateChatRequest struct {
	Model string `json:"model,omitempty"`
	Title string `json:"title,omitempty"`
	// NoAutoRemember makes what is learned here wait for an OK.
	NoAutoRemember bool `json:"no_auto_remember,omitempty"`
	// Shared marks a chat with other people in it: nothing is learned.
	Shared bool `json:"shared,omitempty"`
	// Instructions are the application's system prompt, sent first and
	// whole in every request.
	Instructions string    `json:"instructions,omitempty"`
	Settings     *Settings `json:"settings,omitempty"`
	// Toolsets name the tenant's toolsets the chat uses; Tools are its own
	// client-executed tools.
	Toolsets []string `json:"toolsets,omitempty"`
	Tools    []Tool   `json:"tools,omitempty"`
}

// Chat describes a chat.
type Chat struct {
	ID        string    `json:"id"`
	Title     string    `json:"title,omitempty"`
	Model     string    `json:"model"`
	CreatedAt time.Time `json:"created_at"`
	// Messages is the chat's last seq: how many messages its log holds.
	Messages int64 `json:"messages"`
	// Instructions and their version (each change is one).
	Instructions        string    `json:"instructions,omitempty"`
	InstructionsVersion int       `json:"instructions_version,omitempty"`
	Settings            *Settings `json:"settings,omitempty"`
	Toolsets            []string  `json:"toolsets,omitempty"`
	Tools               []Tool    `json:"tools,omitempty"`
}

// ChatList is one page of GET /v1/chats; Next, when set, is the after= of
// the next page.
type ChatList struct {
	Chats []Chat `json:"chats"`
	Next  string `json:"next,omitempty"`
}

// PatchChatRequest is the body of PATCH /v1/chats/{id}.
type PatchChatRequest struct {
	Model *string `json:"model,omitempty"`
	Title *string `json:"title,omitempty"`
	// Instructions, Settings, Toolsets and Tools replace the chat's, from
	// its next turn.
	Instructions *string   `json:"instructions,omitempty"`
	Settings     *Settings `json:"settings,omitempty"`
	Toolsets     *[]string `json:"toolsets,omitempty"`
	Tools        *[]Tool   `json:"tools,omitempty"`
	// NoAutoRemember, set, makes what is learned here from now on wait
	// for an OK (true) or be kept at once again (false).
	NoAutoRemember *bool `json:"no_auto_remember,omitempty"`
}

// ExportFormat names the layout of a ChatExport; an import refuses others.
const ExportFormat = "agentd.chat/1"

// ChatExport is a whole chat as GET /v1/chats/{id}/export answers it and
// POST /v1/chats/import takes it back: its setup, every message, and the
// rolling summary that covers the messages before FirstKeptSeq.
type ChatExport struct {
	Format       string    `json:"format"`
	ExportedAt   time.Time `json:"exported_at"`
	Chat         Chat      `json:"chat"`
	Summary      string    `json:"summary,omitempty"`
	SummaryModel string    `json:"summary_model,omitempty"`
	FirstKeptSeq int64     `json:"first_kept_seq,omitempty"`
	// NoAutoRemember and Shared say how the chat learns (as created, or as
	// a PATCH last set no_auto_remember); a chat's answers leave them out,
	// its export carries them, so that an import learns as the original did.
	NoAutoRemember bool      `json:"no_auto_remember,omitempty"`
	Shared         bool      `json:"shared,omitempty"`
	Messages       []Message `json:"messages"`
	// Activity is the chat's stored activity (GET /v1/chats/{id}/activity);
	// an import does not take it back.
	Activity []ActivityItem `json:"activity,omitempty"`
}

// Origins of a sent message: empty for a person's own words.
const (
	OriginPerson   = ""
	OriginSchedule = "schedule"
	OriginApp      = "app"
)

// SendMessageRequest is the body of POST /v1/chats/{id}/messages.
type SendMessageRequest struct {
	Content string `json:"content"`
	// AttachmentIDs refer to files uploaded with POST /v1/attachments.
	AttachmentIDs []string `json:"attachment_ids,omitempty"`
	// Paths are local files under an allowed directory to attach.
	Paths []string `json:"paths,omitempty"`
	// Origin is empty for a person's own words; "schedule" or "app" otherwise.
	Origin string `json:"origin,omitempty"`
}

// CompactRequest is the body of POST /v1/chats/{id}/compact.
type CompactRequest struct {
	Focus string `json:"focus,omitempty"`
}

// Role says who wrote a message.
type Role string

// The roles of a transcript's messages.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one message of a chat's transcript.
type Message struct {
	Seq               int64        `json:"seq"`
	Role              Role         `json:"role"`
	Content           string       `json:"content,omitempty"`
	CreatedAt         time.Time    `json:"created_at"`
	Thinking          string       `json:"thinking,omitempty"`
	ThinkingSignature string       `json:"thinking_signature,omitempty"`
	ToolCalls         []ToolCall   `json:"tool_calls,omitempty"`
	ToolCallID        string       `json:"tool_call_id,omitempty"`
	ToolName          string       `json:"tool_name,omitempty"`
	IsError           bool         `json:"is_error,omitempty"`
	Untrusted         bool         `json:"untrusted,omitempty"`
	Images            []Image      `json:"images,omitempty"`
	Attachments       []Attachment `json:"attachments,omitempty"`
	Origin            string       `json:"origin,omitempty"`
	// Partial marks an answer cut short by a fault; Problem says why.
	Partial bool   `json:"partial,omitempty"`
	Problem string `json:"problem,omitempty"`
	// MaxOutputReached marks an answer the model stopped at the chat's
	// settings.max_output_tokens; agentd did not ask for the rest.
	MaxOutputReached bool `json:"max_output_reached,omitempty"`
	// Refused marks an answer the provider ended as a refusal or a content
	// filter (finish_reason "content_filter" on the OpenAI surfaces).
	Refused bool   `json:"refused,omitempty"`
	Model   string `json:"model,omitempty"`
	// IdempotencyKey is the Idempotency-Key a person's message was sent
	// with: a client that lost its answer finds the message by it.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// ToolCall is one call an assistant asked for; Arguments is JSON text as
// the model wrote it.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Image is a picture carried by a message.
type Image struct {
	MediaType string `json:"media_type"`
	Data      []byte `json:"data"`
}

// Attachment is a stored file a message refers to.
type Attachment struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"`
	Note      string `json:"note"`
}

// Usage is what providers reported, in tokens.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	CachedTokens int `json:"cached_tokens,omitempty"`
	// ReasoningTokens is the part of OutputTokens spent reasoning, where
	// the provider's protocol reports it (docs/api.md).
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
}

// Add sums two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens, CachedTokens: u.CachedTokens + o.CachedTokens,
		ReasoningTokens: u.ReasoningTokens + o.ReasoningTokens}
}

// TurnResult is what a finished turn stored and used.
type TurnResult struct {
	TurnID string `json:"turn_id"`
	// Status is "completed", or "requires_action" for a turn paused on
	// ToolCalls the application runs (POST .../tool-results resumes it).
	Status       string     `json:"status"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	Messages     []Message  `json:"messages"`
	Usage        Usage      `json:"usage"`
	SummaryUsage Usage      `json:"summary_usage,omitzero"`
	Problem      *Problem   `json:"problem,omitempty"`
	// MaxOutputReached: the turn's last answer stopped at the chat's
	// settings.max_output_tokens (that message says so too).
	MaxOutputReached bool `json:"max_output_reached,omitempty"`
	// Refused: the turn's last answer ended as the provider's refusal or
	// content filter (that message says so too).
	Refused bool `json:"refused,omitempty"`
	// Replayed: the message was sent again under its idempotency key
	// after its turn ended; Messages are what the chat stored of that turn,
	// read from the transcript (TurnID and Usage are not kept).
	Replayed bool `json:"replayed,omitempty"`
}

// Problem kinds.
const (
	ProblemTooLong    = "too-long"
	ProblemProvider   = "provider"
	ProblemTimeout    = "timeout"
	ProblemNoProvider = "no-provider"
	ProblemShutdown   = "shutdown"
	ProblemInternal   = "internal"
	ProblemDeleted    = "deleted"
	// ProblemAnswerTooLarge: the model's answer passed
	// limits.max_answer_bytes; the part before the cap is kept.
	ProblemAnswerTooLarge = "answer-too-large"
	// ProblemMoved: another agentd node claimed the chat mid-turn; the
	// answer was not stored (docs/cluster.md, single writer).
	ProblemMoved = "moved"
	// ProblemInstructions is a notice: the application's instructions
	// alone pass lean mode's share of the window, and are sent whole.
	ProblemInstructions = "instructions-too-long"
	// ProblemToolResults: the application sent no results for its calls
	// within toolsets.results_wait.
	ProblemToolResults = "tool-results-timeout"
)

// Problem is why a turn ended without a full answer.
type Problem struct {
	Kind     string    `json:"kind"`
	Message  string    `json:"message"`
	NextStep *NextStep `json:"next_step,omitempty"`
}

// NextStep is the one thing the person can do after a too-long problem.
type NextStep struct {
	Action  string `json:"action"` // "switch-model" or "new-chat"
	Model   string `json:"model,omitempty"`
	Window  int    `json:"window,omitempty"`
	Message string `json:"message,omitempty"`
}

// Compacted says where the model's word-for-word memory now starts.
type Compacted struct {
	FirstKeptSeq int64  `json:"first_kept_seq"`
	Summary      string `json:"summary"`
	Model        string `json:"model"`
	Digest       string `json:"digest,omitempty"`
	// Usage is what the fold's summarising requests cost (a fold a turn
	// waited for is in its summary_usage too).
	Usage Usage `json:"usage,omitzero"`
}

// CompactionApplied reports an in-turn compaction of a live turn.
type CompactionApplied struct {
	Targets      int   `json:"targets"`
	TokensBefore int   `json:"tokens_before"`
	TokensAfter  int   `json:"tokens_after"`
	TokensSaved  int   `json:"tokens_saved"`
	DurationMS   int64 `json:"duration_ms"`
}

// Healed reports a "too long" refusal healed without the person seeing it.
type Healed struct {
	Model        string `json:"model"`
	WindowLearnt int    `json:"window_learnt,omitempty"`
	FirstKeptSeq int64  `json:"first_kept_seq"`
}

// Context is what a chat's model is sent now (GET /v1/chats/{id}/context).
type Context struct {
	Model          string       `json:"model"`
	Window         int          `json:"window"`
	WindowSource   string       `json:"window_source"`
	Budget         Budget       `json:"budget"`
	Estimate       int          `json:"estimate"`
	Factor         float64      `json:"factor"`
	FirstKeptSeq   int64        `json:"first_kept_seq"`
	Summary        string       `json:"summary,omitempty"`
	SummaryModel   string       `json:"summary_model,omitempty"`
	Digest         string       `json:"digest,omitempty"`
	StubbedSeqs    []int64      `json:"stubbed_seqs"`
	Lean           bool         `json:"lean"`
	LoadedTools    []string     `json:"loaded_tools"`
	RecentRequests []RequestLog `json:"recent_requests"`
	LastSeq        int64        `json:"last_seq"`
	// The application's instructions as sent, and what the chat's setup
	// costs that its application should know.
	InstructionsVersion int      `json:"instructions_version,omitempty"`
	InstructionsTokens  int      `json:"instructions_tokens,omitempty"`
	Warnings            []string `json:"warnings,omitempty"`
}

// Budget shows how a window is shared.
type Budget struct {
	Window     int `json:"window"`
	AnswerRoom int `json:"answer_room"`
	System     int `json:"system"`
	Tools      int `json:"tools"`
	Transcript int `json:"transcript"`
}

// RequestLog is one sent request's size against its budget.
type RequestLog struct {
	At       time.Time `json:"at"`
	Estimate int       `json:"estimate"`
	Reported int       `json:"reported"`
	Budget   int       `json:"budget"`
	Window   int       `json:"window"`
	Kind     string    `json:"kind,omitempty"` // "turn", "heal", "summary"
}

// Event names: each is the SSE event name and Event.Type.
const (
	EventTurnStarted       = "turn.started"       // data: {"user_seq": N}
	EventMessage           = "message"            // data: Message
	EventMessageDelta      = "message.delta"      // data: {"text": "..."}
	EventThinkingDelta     = "thinking.delta"     // data: {"text": "..."}
	EventToolCall          = "tool.call"          // data: ToolCall
	EventToolResult        = "tool.result"        // data: Message
	EventUsage             = "usage"              // data: Usage
	EventTurnCompleted     = "turn.completed"     // data: TurnResult
	EventTurnProblem       = "turn.problem"       // data: Problem
	EventCompacted         = "compacted"          // data: Compacted
	EventCompactionStarted = "compaction.started" // data: {"targets": N}
	EventCompactionApplied = "compaction.applied" // data: CompactionApplied
	EventHealed            = "healed"             // data: Healed
	EventToolsLoaded       = "tools.loaded"       // data: {"names": [...]}
	EventChatDeleted       = "chat.deleted"       // the chat is gone; a watcher's stream ends
	// EventTurnRequiresAction ends a turn's step when it pauses for calls
	// the application runs (data: TurnResult, status requires_action).
	EventTurnRequiresAction = "turn.requires_action"
	// EventThinkingReset: the answer was cut while the model reasoned,
	// before its first word, and is asked again: drop the thinking.delta
	// text of this answer so far (data: {"reason": "..."}); the retry's
	// reasoning follows, and the stored answer holds it alone.
	EventThinkingReset = "thinking.reset"
	// EventMessageReset: the answer, streamed already, is taken back and
	// asked again (a prompt the server cut silently, seen only once the
	// answer ended): drop the message.delta text of this answer so far
	// (data: {"reason": "..."}); the retry's text follows, and the stored
	// answer holds it alone.
	EventMessageReset = "message.reset"
	// EventStreamDropped is a stream's last event when it fell behind and
	// was dropped (data: StreamDropped).
	EventStreamDropped = "stream.dropped"
	// EventTurnQueued starts the stream of a message that waits behind the
	// chat's running turn (data: TurnQueued); keepalives follow until its
	// own turn starts (turn.started) or it is refused (error).
	EventTurnQueued = "turn.queued"
	// EventError ends the stream of a queued message refused before its
	// turn started (data: StreamError): the answer it would have had.
	EventError = "error"
	// EventFoldWaiting comes at least once a second while a turn waits (a
	// fold, a slow first word, a long tool); data: Waiting. Lossy.
	EventFoldWaiting = "fold.waiting"
	// EventToolProgress is a running tool's own report; data: ToolProgress. Lossy.
	EventToolProgress = "tool.progress"
	// EventMemoriesLearned: memories were learned from this chat; data: MemoriesLearned.
	EventMemoriesLearned = "memories.learned"
)

// What a turn waits for (Waiting.WaitingFor).
const (
	WaitingSummary    = "summary"    // a fold of the chat's start, before the request fits
	WaitingCompaction = "compaction" // the summariser condensing this turn's own state
	WaitingToolIndex  = "tool-index" // tools the person's message names
	WaitingModel      = "model"      // the model's first (or next) word
	WaitingRetry      = "retry"      // the pause before retrying a passing fault
	WaitingTools      = "tools"      // tool calls agentd runs
)

// Waiting is the data of fold.waiting.
type Waiting struct {
	// ElapsedMS is how long the turn has waited for WaitingFor.
	ElapsedMS  int64  `json:"elapsed_ms"`
	WaitingFor string `json:"waiting_for"`
	// Detail names it for a person: the model, the tools running.
	Detail string `json:"detail,omitempty"`
}

// ToolProgress is the data of tool.progress.
type ToolProgress struct {
	Tool    string `json:"tool"`
	CallID  string `json:"call_id,omitempty"`
	Message string `json:"message"`
	// Done of Total (pages, files), when the tool counts.
	Done  int `json:"done,omitempty"`
	Total int `json:"total,omitempty"`
}

// MemoriesLearned is the data of memories.learned.
type MemoriesLearned struct {
	IDs     []string `json:"ids"`
	Waiting bool     `json:"waiting,omitempty"` // they wait for an OK
}

// ActivityItem is one stored event of a chat (GET /v1/chats/{id}/activity):
// compacted, healed, turn.problem, compaction.applied, tools.loaded or
// memories.learned, with the data its event carried.
type ActivityItem struct {
	// ID numbers a chat's activity from 1, in the order it happened.
	ID     int64  `json:"id"`
	Type   string `json:"type"`
	TurnID string `json:"turn_id,omitempty"`
	// AfterSeq is the chat's last stored message when it happened: it
	// belongs after that message.
	AfterSeq int64           `json:"after_seq"`
	At       time.Time       `json:"at"`
	Data     json.RawMessage `json:"data"`
}

// ActivityPage is one page of GET /v1/chats/{id}/activity; Next, when set,
// is the after= of the next page.
type ActivityPage struct {
	Activity []ActivityItem `json:"activity"`
	Next     int64          `json:"next,omitempty"`
}

// StreamDropped says why a stream was dropped, and the last stored message
// it was told of: read the transcript after LastSeq to catch up.
type StreamDropped struct {
	Reason  string `json:"reason"`
	LastSeq int64  `json:"last_seq"`
}

// TurnQueued says a message waits behind the chat's running turn; Paused:
// that turn waits for the application's tool results.
type TurnQueued struct {
	Paused bool `json:"paused"`
}

// StreamError is a refusal sent as a stream's last event: the error and
// kind of the one JSON error shape, and the HTTP status it would have had.
type StreamError struct {
	Message string `json:"error"`
	Kind    string `json:"kind"`
	Status  int    `json:"status"`
}

// Event is one Server-Sent Event of a chat, as a client reads it.
type Event struct {
	Type   string          `json:"type"`
	ChatID string          `json:"chat_id"`
	TurnID string          `json:"turn_id,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// Model is one entry of GET /v1/models: OpenAI's model object (id, object,
// created, owned_by) with what agentd knows of it alongside.
type Model struct {
	ID     string `json:"id"`     // provider/model
	Object string `json:"object"` // always "model"
	// Created is when the model was made, in Unix seconds; 0: agentd does not know.
	Created      int64  `json:"created"`
	OwnedBy      string `json:"owned_by"` // the provider's name
	Provider     string `json:"provider"`
	Window       int    `json:"window"`
	WindowSource string `json:"window_source"`
	Vision       bool   `json:"vision,omitempty"`
	Local        bool   `json:"local,omitempty"`
	Loaded       bool   `json:"loaded,omitempty"`
}

// Models is the answer of GET /v1/models, in OpenAI's list shape.
type Models struct {
	Object string  `json:"object"` // always "list"
	Models []Model `json:"data"`
	// ProviderErrors says which providers did not answer their model list.
	ProviderErrors map[string]string `json:"provider_errors"`
}

// Memory states.
const (
	MemoryActive  = "active"
	MemoryWaiting = "waiting"
	MemoryUndone  = "undone"
)

// Memory is one thing learned about the person.
type Memory struct {
	ID        string    `json:"id"`
	Text      string    `json:"text"`
	ChatID    string    `json:"chat_id,omitempty"`
	FromSeq   int64     `json:"from_seq,omitempty"`
	ToSeq     int64     `json:"to_seq,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	State     string    `json:"state"`
	RunID     string    `json:"run_id"`
}

// EditMemoryRequest is the body of PATCH /v1/memories/{id}.
type EditMemoryRequest struct {
	Text string `json:"text"`
}

// MemoryRun is one learning run: what it added, and whether it was undone.
type MemoryRun struct {
	ID     string    `json:"id"`
	ChatID string    `json:"chat_id,omitempty"`
	At     time.Time `json:"at"`
	Source string    `json:"source"`
	Added  []string  `json:"added"`
	Undone bool      `json:"undone,omitempty"`
}

// Health statuses: GET /healthz answers 503 with HealthFailing, else 200.
const (
	HealthOK       = "ok"
	HealthDegraded = "degraded" // no provider answers, or Postgres has not answered for a moment
	HealthFailing  = "failing"  // the store refuses every write until agentd restarts, or Postgres has not answered for 2 minutes
)

// Health is the answer of GET /healthz.
type Health struct {
	Status          string            `json:"status"` // "ok", "degraded" (no provider answers, Postgres out of reach a moment) or "failing" (the store refuses writes)
	StoreError      string            `json:"store_error,omitempty"`
	ProviderErrors  map[string]string `json:"provider_errors"`
	Heals           float64           `json:"heals"`
	ActiveSessions  int               `json:"active_sessions"`
	BadgerLSMBytes  int64             `json:"badger_lsm_bytes"`
	BadgerVlogBytes int64             `json:"badger_vlog_bytes"`
	EventsDropped   int64             `json:"events_dropped"`   // deltas skipped for lagging clients
	WatchersDropped int64             `json:"watchers_dropped"` // streams ended by stream.dropped
	// ToolsetsBuilding is there while stored toolsets are still being
	// built after the start; the status does not change for it.
	ToolsetsBuilding *ToolsetsBuilding `json:"toolsets_building,omitempty"`
	// Cluster is this node's view of the cluster, in cluster mode only;
	// the status does not change for it.
	Cluster *ClusterHealth `json:"cluster,omitempty"`
}

// ClusterHealth is what a node in cluster mode says of its membership.
type ClusterHealth struct {
	Members int `json:"members"` // members this node sees, itself included
	// Registered says whether this node's record is in etcd on a lease
	// kept alive; absent with the Kubernetes provider, which does not say.
	Registered *bool `json:"registered,omitempty"`
	// RecordsSkipped counts the records under the cluster's etcd key
	// skipped as not a member's since the start, each time one is read.
	RecordsSkipped int64 `json:"records_skipped"`
}

// ToolsetsBuilding counts what of the stored toolsets is still being built
// after the start (an MCP server still being connected): the tenants whose
// requests wait for theirs, and the toolsets not yet built. Counts only:
// /healthz answers without a token.
type ToolsetsBuilding struct {
	Tenants  int `json:"tenants"`
	Toolsets int `json:"toolsets"`
}
