package session

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/eventbus"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/tools"
)

// Store is what a session needs of persistence.
type Store interface {
	Chat(ctx context.Context, id string) (persistence.Chat, error)
	// Claim makes this node the chat's single writer before the session
	// reads it; a later claim by another node makes this one's writes
	// fail with persistence.ErrChatMoved.
	Claim(ctx context.Context, chatID string) error
	UpdateChat(ctx context.Context, c persistence.Chat) error
	Append(ctx context.Context, chatID string, msgs ...chat.Message) ([]chat.Message, error)
	// AppendThen is Append without waiting, for the mailbox: then hears
	// the messages with their seqs once durable, or the error (with the
	// messages when they were committed but not synced). then runs on
	// the store's writer and must not block.
	AppendThen(ctx context.Context, chatID string, msgs []chat.Message, then func(stored []chat.Message, err error))
	// AppendUnsynced is Append without a sync of its own: the messages
	// are readable with their seqs at once, and the next synced write
	// makes them durable.
	AppendUnsynced(ctx context.Context, chatID string, msgs ...chat.Message) ([]chat.Message, error)
	// AppendWithSnapshotThen appends and saves the snapshot snap builds
	// from the log's last seq in one transaction, acts stored in the
	// activity log before the messages: one sync for all. Like
	// AppendThen, it does not wait.
	AppendWithSnapshotThen(ctx context.Context, chatID string, snap func(lastSeq int64) persistence.Snapshot, acts []persistence.Activity, msgs []chat.Message,
		then func(stored []chat.Message, err error))
	Messages(ctx context.Context, chatID string, from, to int64) ([]chat.Message, error)
	// KeyedMessage reads the message the chat stored with idempotency key
	// key, from its whole log (folded messages included); ok is false when
	// it holds none.
	KeyedMessage(ctx context.Context, chatID, key string) (m chat.Message, ok bool, err error)
	LoadSnapshot(ctx context.Context, chatID string) (persistence.Snapshot, bool, error)
	// SaveSnapshot saves the snapshot and stores acts in the activity log,
	// in one write.
	SaveSnapshot(ctx context.Context, chatID string, snap persistence.Snapshot, acts ...persistence.Activity) error
	// SaveSnapshotUnsynced is SaveSnapshot without a sync of its own, as
	// AppendUnsynced: for what the log can rebuild (a fold's boundary).
	SaveSnapshotUnsynced(ctx context.Context, chatID string, snap persistence.Snapshot, acts ...persistence.Activity) error
	// AppendActivity stores an event in the chat's activity log, ordered
	// among its messages.
	AppendActivity(ctx context.Context, chatID string, a persistence.Activity) (persistence.Activity, error)
	// AppendActivityUnsynced is AppendActivity without a sync of its own.
	AppendActivityUnsynced(ctx context.Context, chatID string, a persistence.Activity) (persistence.Activity, error)
}

// Catalog is what a session needs of the model catalog.
type Catalog interface {
	Resolve(ref string) (providers.Client, providers.ModelInfo, error)
	Learn(ctx context.Context, ref string, window int) (int, error)
	Bigger(need int) (ref string, window int, ok bool)
	Default(configured string) string
}

// Prompts builds the system prompt of a chat's requests.
type Prompts interface {
	// System returns the full system prompt, or the lean one, for a tenant.
	System(tenant string, lean bool) string
}

// MemoryMaps builds each tenant's memory map (memory.Store), which Prompts
// reads without waiting.
type MemoryMaps interface {
	// MapReady reports whether the tenant's map of the day is built.
	MapReady(tenant string) bool
	// MapErr builds the tenant's map of the day, or waits for the build
	// under way; it reads every memory of the tenant, so it runs on a
	// worker, never in a mailbox.
	MapErr(ctx context.Context, tenant string) (string, error)
}

// Metrics receives counts; nil-safe implementations are fine.
type Metrics interface {
	TurnDone(problem string, usage chat.Usage)
	Fold(ok bool)
	Heal()
	ActiveSessions(delta int)
	TurnsWaiting(delta int)
}

// Deps are what every session shares. They are read-only once built.
type Deps struct {
	Store   Store
	Catalog Catalog
	Tools   *tools.Registry
	Bus     *eventbus.Bus
	Prompts Prompts
	// Maps builds the memory maps Prompts reads: a turn's step and a
	// context view wait, off the mailbox, for the tenant's map of the day
	// (withMap). Optional: without it Prompts needs nothing built.
	Maps    MemoryMaps
	Metrics Metrics
	Log     zerolog.Logger
	// Traces gives model calls and tools spans (docs/tracing.md).
	// Optional.
	Traces trace.TracerProvider

	Summarizer *actor.PID
	Learner    *actor.PID
	ToolIndex  *actor.PID
	// Dispatcher runs the sessions' mailboxes on warm goroutines (the hub
	// bounds it), and Workers their model calls and awaited writes, which
	// wait on I/O and so must not take a bounded mailbox worker: a write
	// queued behind the mailboxes that await it would never run. Their
	// owner stops them after the sessions. Optional: protoactor's default
	// dispatcher and a goroutine per call when nil.
	Dispatcher *actors.Dispatcher
	Workers    *actors.Dispatcher

	DefaultModel    string
	IdleAfter       time.Duration
	TurnsPerChat    int
	ToolTimeout     time.Duration
	ToolResultBytes int
	// MaxToolResultBytes caps what a call may return at all (stored).
	MaxToolResultBytes int
	// ToolArgBytes refuses longer tool arguments unread; the model is
	// sent only their head again.
	ToolArgBytes int
	TurnTimeout  time.Duration
	ModelIdle    time.Duration
	// MaxAnswerBytes caps what is kept of one model answer.
	MaxAnswerBytes int
	// FoldWait bounds how long a turn waits for the summariser (busy with
	// other chats, or slow): then its fold applies with the digest, and the
	// summary lands when it comes.
	FoldWait time.Duration
	// CompactThreshold is the compact_threshold of a chat that sets none
	// (0 or less: its model's window).
	CompactThreshold int
	// FoldAsLines leaves Fold.Prefix out: the summariser reads lines only.
	FoldAsLines bool
	// NoModelHelp says why no model can take a turn and what to do: which
	// provider does not answer, or how to configure one. Optional.
	NoModelHelp func() string
	// TenantInstructions are each tenant's default instructions, for its
	// chats that have none of their own.
	TenantInstructions map[string]string
	// ToolResultsWait bounds how long a turn waits for the application's
	// results of its own tool calls.
	ToolResultsWait time.Duration
	// ToolsReady is closed once the tenant's stored toolsets, built after
	// the start, are registered; nil when they are. A paused turn that a
	// session's start resumes at once waits for it (resumeWhenToolsReady).
	// Optional: nil means always ready.
	ToolsReady func(tenant string) <-chan struct{}

	// onReceive, set by tests only, runs first in every Receive of a
	// session: a panic it raises stands for a bug of the session's.
	onReceive func(chatID string, msg any)
}
