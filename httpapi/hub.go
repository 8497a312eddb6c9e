package httpapi

import (
	"context"
	"io"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/eventbus"
	"github.com/agentd/agentd/httpapi/oai"
)

// Hub is everything the HTTP layer needs of the daemon, in the API's wire
// types; *hub.Hub implements it. Every method resolves ids inside tenant,
// and its errors are the hub's sentinels (writeHubError maps them).
type Hub interface {
	// oai.Hub is what the OpenAI-compatible surface needs.
	oai.Hub
	CreateChat(ctx context.Context, tenant string, req api.CreateChatRequest) (api.Chat, error)
	Chats(ctx context.Context, tenant string) ([]api.Chat, error)
	// ChatsPage lists chats in id order after the id after, and whether more follow.
	ChatsPage(ctx context.Context, tenant, after string, limit int) ([]api.Chat, bool, error)
	// DeleteChat removes a chat and everything stored under it.
	DeleteChat(ctx context.Context, tenant, id string) error
	Chat(ctx context.Context, tenant, id string) (api.Chat, error)
	Patch(ctx context.Context, tenant, id string, req api.PatchChatRequest) error
	// ExportHead is an export without its messages and activity, which
	// are read page by page (TranscriptPage, Activity) up to Chat.Messages.
	ExportHead(ctx context.Context, tenant, id string) (api.ChatExport, error)
	// Import stores an export as a new chat once every message is durable.
	Import(ctx context.Context, tenant string, exp api.ChatExport) (api.Chat, error)
	TranscriptPage(ctx context.Context, tenant, id string, from, to int64) ([]api.Message, error)
	// AnsweredTurn reads back the turn of the person's message stored as
	// userSeq (a message sent again under its key after its turn ended).
	AnsweredTurn(ctx context.Context, tenant, id string, userSeq int64) ([]api.Message, error)
	Context(ctx context.Context, tenant, id string) (api.Context, error)
	// Activity returns a page of a chat's activity log after id after.
	Activity(ctx context.Context, tenant, id string, after int64, limit int) ([]api.ActivityItem, bool, error)
	Compact(ctx context.Context, tenant, id, focus string) (api.Compacted, error)
	// SubmitKeyed starts turn turnID (hub.NewID) and returns its id once
	// the message is durable; a message with key (its idempotency key, if
	// any) the chat has seen joins its running turn (joined, then that
	// turn's id), or is *hub.AnsweredError or hub.ErrKeyInProgress.
	// unpaused refuses it with *hub.PausedError where it would wait behind
	// a turn paused on the application's calls.
	SubmitKeyed(ctx context.Context, tenant, id, turnID, key string, req api.SendMessageRequest, joined func(turnID string), queued func(paused bool), unpaused bool) (string, error)
	// SubmitToolResults answers a paused turn's calls; it returns the
	// turn's id once they are durable.
	SubmitToolResults(ctx context.Context, tenant, id string, req api.ToolResultsRequest) (string, error)
	PutWireToolset(ctx context.Context, tenant, name string, req api.PutToolsetRequest) (api.Toolset, error)
	WireToolset(ctx context.Context, tenant, name string) (api.Toolset, error)
	WireToolsets(ctx context.Context, tenant string) ([]api.Toolset, error)
	DeleteToolset(ctx context.Context, tenant, name string) error
	// Subscribe watches a chat; its events carry wire types.
	Subscribe(chatID string, buf int, types ...string) *eventbus.Sub

	Attach(ctx context.Context, tenant string, r io.Reader, name, mediaType string) (api.Attachment, error)

	Memories(ctx context.Context, tenant, state string) ([]api.Memory, error)
	MemoryRuns(ctx context.Context, tenant string) ([]api.MemoryRun, error)
	ApproveMemory(ctx context.Context, tenant, id string) (api.Memory, error)
	UndoRun(ctx context.Context, tenant, id string) (api.MemoryRun, error)
	EditMemory(ctx context.Context, tenant, id, text string) (api.Memory, error)
	DeleteMemory(ctx context.Context, tenant, id string) error

	// Owner says where a tenant's chat is served: "" for this node, else
	// its owner node's HTTP base URL (cluster mode).
	Owner(ctx context.Context, tenant, chatID string) (string, error)

	Refresh(ctx context.Context) api.Models
	Health() api.Health
	Gatherer() prometheus.Gatherer
}
