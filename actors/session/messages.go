package session

import (
	"errors"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/providers"
)

// Errors a session answers with (inside *Rejected).
var (
	ErrBusy      = errors.New("too many turns waiting in this chat")
	ErrNotFound  = errors.New("chat not found")
	ErrInvalid   = errors.New("invalid request")
	ErrStopping  = errors.New("agentd is shutting down")
	ErrCancelled = errors.New("the caller went away before the turn started")
	ErrNotPaused = errors.New("no turn of this chat waits for tool results")
	// ErrFailed refuses what waited for a session that panicked: once
	// restarted, or stopped after panicking too often (the registry's
	// bound); the next message wakes the chat afresh.
	ErrFailed = errors.New("this chat's session failed on an internal error; send the message again to continue")
	// ErrNothingToAnswer refuses a SubmitTurn marked Continue: the chat's
	// log ends with an answer.
	ErrNothingToAnswer = errors.New("the chat's last message is an answer: nothing waits for one")
	// ErrKeyInProgress refuses a SubmitTurn whose Message has the
	// IdempotencyKey of one that waits its turn, or whose turn has not
	// said it started or waits for the application's tool results.
	ErrKeyInProgress = errors.New("a message with this idempotency key is waiting or being answered")
	// ErrKeyReused refuses a SubmitTurn whose Message has the
	// IdempotencyKey of a stored message that says otherwise.
	ErrKeyReused = errors.New("this idempotency key was sent with another message")
	// ErrMoved: another agentd node claimed the chat (persistence's
	// single-writer fence); this node's session stopped, and the message
	// was not stored. Sent again, it reaches the chat's new session.
	ErrMoved = persistence.ErrChatMoved
)

// Envelope routes Msg to the session of ChatID through the registry.
type Envelope struct {
	ChatID string
	Msg    any
}

// SubmitTurn asks for a turn answering Message (role user). The reply,
// *TurnAccepted, comes once the message is durable and its turn starts; or
// *Rejected.
type SubmitTurn struct {
	TurnID  string
	Message chat.Message
	// Ended, when set, is called once the turn has ended, or as soon as it
	// is known never to run (refused, cancelled while queued, cut by a
	// stop); the hub counts a tenant's turns with it. It must not block.
	Ended func()
	// RequestID is the id of the HTTP request that sent the message: every
	// log line of the turn carries it. Optional.
	RequestID string
	// Trace is the turn's span: its model calls, tools and folds are its
	// children. Optional.
	Trace trace.SpanContext
	// Unpaused refuses the message with *PausedError, at once, rather
	// than let it wait behind a turn paused on the application's calls
	// (now or once the turn before it pauses): the OpenAI-compatible
	// surface answers such a message 400, as OpenAI does.
	Unpaused bool
	// Continue asks for a turn that stores no message (Message is unused)
	// and answers the chat as its log stands, which must end with what no
	// answer follows: a client's retry of tool results, or of a message,
	// whose turn failed after they were stored. Else *Rejected
	// ErrNothingToAnswer.
	Continue bool
	// Retry marks Message as one its client may be sending again after its
	// turn failed (the OpenAI SDKs retry a 5xx with the same history): when
	// the turn starts and the log ends with the same message, unanswered,
	// the turn answers it as stored (as Continue does) instead of storing
	// it twice. Else it is stored and answered as usual.
	Retry bool
	// KeyUnsought stores Message's IdempotencyKey with it without looking
	// for it in the chat: a key agentd made for a request its client says
	// it sends for the first time (the OpenAI-compatible surface's retry
	// key), which only a retry of that request looks for. Two messages may
	// then share a key: looked for, the newest is found.
	KeyUnsought bool
	// Charge, when set, is called in the session's mailbox once the
	// message is admitted to a turn (stored, or its failed turn continued),
	// and its error refuses it (the hub's per-tenant ingest rate). A
	// message its key answers (Answered), joins to its running turn, or
	// refuses (ErrKeyInProgress, ErrKeyReused) is not charged. It must not
	// block.
	Charge func() error
	// Joined, when set, is called in the session's mailbox, before any
	// later event of that turn is published, when Message's
	// IdempotencyKey is that of the message whose turn runs now: the
	// reply is that turn's *TurnAccepted, and its events follow. It must
	// not block. (A key found in the log answered is *Answered; waiting,
	// ErrKeyInProgress.)
	Joined func(turnID string)
	// Queued, when set, is called in the session's mailbox when the
	// message waits behind the chat's running turn; paused says that turn
	// waits for the application's tool results. It must not block.
	Queued func(paused bool)
}

// Answered replies to a SubmitTurn whose Message's IdempotencyKey is that
// of the message stored as UserSeq, whose turn has ended: nothing is
// stored, and no turn runs. The chat's log after UserSeq holds what it
// answered.
type Answered struct{ UserSeq int64 }

// PausedError refuses a SubmitTurn marked Unpaused: a turn of the chat
// waits for the results of Calls (their ids). The paused turn is untouched.
type PausedError struct{ Calls []string }

func (e *PausedError) Error() string {
	return "a turn of this chat waits for the results of calls " + strings.Join(e.Calls, ", ")
}

// ended tells m's sender's counter that m's turn is over or will not run.
func (m *SubmitTurn) ended() {
	if m.Ended != nil {
		m.Ended()
	}
}

// TurnAccepted: the person's message is stored as UserSeq; events of the
// turn follow on the chat's event bus.
type TurnAccepted struct {
	TurnID  string
	UserSeq int64
}

// CancelQueued drops a SubmitTurn still waiting behind another turn (its
// caller went away). A turn that started goes on. No reply.
type CancelQueued struct{ TurnID string }

// Rejected answers any request the session could not serve.
type Rejected struct{ Err error }

// AddMessages stores messages in the chat's log without a turn (a
// conversation's items an application adds, the earlier history a Chat
// Completions client brings), in order, while no turn runs or waits: else
// it is refused with ErrBusy. Reply: *Added once they are durable.
type AddMessages struct {
	Messages []chat.Message
	// Key, when set, is the idempotency key the messages were sent with:
	// it is stored on the first of them, and messages whose key the
	// chat's log holds already are not stored again (the reply is then
	// *Answered, whose UserSeq is the first of them).
	Key string
	// Charge, when set, is called once the messages are to be stored, and
	// its error refuses them (the hub's per-tenant ingest rate): messages
	// under a key the log holds are not charged again.
	Charge func() error
}

// Added holds the messages AddMessages stored, with their seqs.
type Added struct{ Messages []chat.Message }

// GetContext asks what the model is sent now. Reply: *chat.ContextView.
type GetContext struct{}

// Patch changes a chat's model (between turns), title, or what the
// application set; nil fields stay. Instructions, settings and tools apply
// from the next turn. Reply: *Patched or *Rejected.
type Patch struct {
	Model        *string
	Title        *string
	Instructions *string
	Settings     *chat.Settings
	Toolsets     *[]string
	Tools        *[]chat.ToolSpec
	// NoAutoRemember, set, replaces the chat's no_auto_remember.
	NoAutoRemember *bool
}

// SubmitToolResults answers calls a paused turn waits for. The reply,
// *TurnAccepted, comes once the results are durable; the turn resumes when
// every call it waits for has its result. Or *Rejected: ErrNotPaused, or
// ErrInvalid for a call the turn does not wait for.
type SubmitToolResults struct {
	Results []ToolResult
	// Then are messages (role user) stored after the results, in the same
	// turn, which then answers them: a Chat Completions client sends its
	// tool results and its next message at once. Only with results for
	// every call the turn waits for, else ErrInvalid. Optional.
	Then []chat.Message
}

// ToolResult is the application's result of one call.
type ToolResult struct {
	CallID  string
	Output  string
	IsError bool
}

// Patched confirms a Patch.
type Patched struct{}

// Compact folds all but the newest turn now, keeping Focus in the summary.
// Reply: *Compacted (or *Rejected) once the fold is applied.
type Compact struct{ Focus string }

// Compacted answers Compact.
type Compacted struct{ View chat.Compacted }

// Retire stops a chat's session for good, before the chat is deleted,
// waking it when none runs: a running or paused turn (also one a restart
// left paused) ends with problem deleted (turn.completed told),
// waiting ones are refused, and until Retired
// every message for the chat is answered *Rejected (ErrNotFound). Send it
// to the registry itself, not in an Envelope. Reply: *RetireDone once no
// session of the chat runs.
type Retire struct{ ChatID string }

// RetireDone answers Retire.
type RetireDone struct{}

// Retired ends a Retire once the chat is deleted (or its deletion failed);
// a later message meets a fresh session, which loads the chat or answers
// ErrNotFound. No reply.
type Retired struct{ ChatID string }

// Wake starts the chat's session if none runs (in cluster mode, its grain
// activated on this node), so the chat is claimed and loaded before its
// first request. Send it in an Envelope. No reply.
type Wake struct{}

// Moved stops a chat's session because the chat now lives on another node
// (in cluster mode, its grain left this one): what was queued before it is
// handled first, then a running turn ends with problem moved and waiting
// turns are refused with ErrMoved. Send it to the registry itself. No
// reply.
type Moved struct{ ChatID string }

// internal messages

// leftNode tells a session, just before it is stopped, that its chat moved
// to another node.
type leftNode struct{}
type (
	idle struct{ chatID string }
	// retire: the registry's Retire, to the session.
	retire struct{}
	// idleTick re-checks idleness; its timer is owned by the session.
	idleTick  struct{}
	modelDone struct {
		turnID  string
		call    int
		resp    providers.Response
		err     error
		spoke   bool // a word of the answer was streamed
		partial string
		thought string // the reasoning streamed, kept with partial by a failure
	}
	toolsDone struct {
		turnID  string
		results []toolOutcome
	}
	retryCall struct {
		turnID string
		call   int
	}
	toolsNamed struct {
		turnID string
		names  []string
	}
	// pauseOverdue: a paused turn waited Deps.ToolResultsWait.
	pauseOverdue struct{ turnID string }
)
