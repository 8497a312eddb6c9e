package chat

import "time"

// Event types a chat publishes, in the order a turn produces them. The HTTP
// API sends each as a Server-Sent Event named by its type.
const (
	EventTurnStarted       = "turn.started"       // data: {"user_seq": N}
	EventMessage           = "message"            // a message was stored (data: Message)
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
	// EventTurnRequiresAction: the turn paused for tool calls the
	// application runs (data: TurnResult, status requires_action); POST
	// .../tool-results resumes it.
	EventTurnRequiresAction = "turn.requires_action"
	// EventThinkingReset: the model's answer was cut while it reasoned,
	// before its first word, and is asked again; the thinking.delta text
	// of that answer so far is void (data: {"reason": "..."}). The retry's
	// reasoning follows, and the stored answer holds it alone.
	EventThinkingReset = "thinking.reset"
	// EventMessageReset: the model's answer, streamed already, is taken
	// back and asked again (Ollama cut the prompt silently, which shows
	// only once the answer ended); the message.delta text of that answer
	// so far is void (data: {"reason": "..."}). The retry's text follows,
	// and the stored answer holds it alone.
	EventMessageReset = "message.reset"
	// Progress while a turn waits: lossy, like deltas, and never stored.
	EventFoldWaiting  = "fold.waiting"  // data: Waiting, at least once a second while a turn waits
	EventToolProgress = "tool.progress" // data: ToolProgress, as a running tool reports it
	// EventMemoriesLearned: the learner stored memories from this chat's
	// folded words (data: MemoriesLearned).
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

// Waiting is a fold.waiting event: what the turn has waited for, and how long.
type Waiting struct {
	ElapsedMS  int64  `json:"elapsed_ms"`
	WaitingFor string `json:"waiting_for"`
	// Detail names it for a person: the model, the tools running.
	Detail string `json:"detail,omitempty"`
}

// ToolProgress is a tool.progress event: a running tool's own report.
type ToolProgress struct {
	Tool    string `json:"tool"`
	CallID  string `json:"call_id,omitempty"`
	Message string `json:"message"`
	Done    int    `json:"done,omitempty"`
	Total   int    `json:"total,omitempty"`
}

// MemoriesLearned says what the learner stored from a chat.
type MemoriesLearned struct {
	IDs []string `json:"ids"`
	// Waiting: they wait for the person's OK before they are used.
	Waiting bool `json:"waiting,omitempty"`
}

// Activity reports whether events of type ev go to a chat's activity log:
// what a person may need later, after the stream that carried it is gone.
func Activity(ev string) bool {
	switch ev {
	case EventCompacted, EventHealed, EventTurnProblem, EventCompactionApplied, EventToolsLoaded, EventMemoriesLearned:
		return true
	}
	return false
}

// TurnResult is what a finished turn stored and used.
type TurnResult struct {
	TurnID string `json:"turn_id"`
	// Status is "completed", or "requires_action" for a turn paused on
	// ToolCalls the application runs.
	Status    string     `json:"status"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Messages  []Message  `json:"messages"`
	Usage     Usage      `json:"usage"`
	// SummaryUsage is what summarising cost, apart from the turn's own.
	SummaryUsage Usage    `json:"summary_usage,omitzero"`
	Problem      *Problem `json:"problem,omitempty"`
	// MaxOutputReached: the turn's last answer stopped at the chat's
	// settings.max_output_tokens (that message is marked so too).
	MaxOutputReached bool `json:"max_output_reached,omitempty"`
	// Refused: the turn's last answer ended as the provider's refusal or
	// content filter (that message is marked so too).
	Refused bool `json:"refused,omitempty"`
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
	// ProblemMoved: another agentd node claimed the chat mid-turn (the
	// single-writer fence); what this node had not stored is dropped.
	ProblemMoved = "moved"
	// ProblemAnswerTooLarge: the model's answer passed
	// limits.max_answer_bytes; the part before the cap is kept.
	ProblemAnswerTooLarge = "answer-too-large"
	// ProblemInstructions: the application's instructions alone take more
	// than lean mode's share of the window; they are sent whole.
	ProblemInstructions = "instructions-too-long"
	// ProblemToolResults: the application sent no results for its tool
	// calls in time.
	ProblemToolResults = "tool-results-timeout"
)

// Statuses of a TurnResult.
const (
	StatusCompleted      = "completed"
	StatusRequiresAction = "requires_action"
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
	Message string `json:"message,omitempty"` // carried over to the new chat
}

// Compacted says where the model's word-for-word memory now starts.
type Compacted struct {
	FirstKeptSeq int64  `json:"first_kept_seq"`
	Summary      string `json:"summary"`
	Model        string `json:"model"` // the model that will read it
	Digest       string `json:"digest,omitempty"`
	// Usage is what the fold's summarising requests cost. A fold a turn
	// waited for is counted in that turn's summary_usage too; one in the
	// background, or a /compact, only here.
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

// ContextView is what the model is sent now.
type ContextView struct {
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
	// Instructions: the application's instructions as sent.
	InstructionsVersion int `json:"instructions_version,omitempty"`
	InstructionsTokens  int `json:"instructions_tokens,omitempty"`
	// Warnings say what the chat's setup costs that the person should know.
	Warnings []string `json:"warnings,omitempty"`
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
