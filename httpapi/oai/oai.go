// Package oai is agentd's OpenAI-compatible HTTP surface: Responses,
// Conversations, Chat Completions and the models list, as OpenAI's API
// reference describes them, for the official SDKs and the tools built on
// them (docs/openai.md). A response is a turn of an agentd chat, a chain
// of previous_response_ids is one chat, and a conversation is a chat: this
// package translates, the hub does the work. httpapi mounts its routes
// behind the native API's authentication (the same tenant tokens), and
// every error here is in OpenAI's shape (WriteError).
package oai

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/eventbus"
)

// Hub is what this surface needs of the daemon; httpapi's Hub embeds it.
// Every method resolves ids inside tenant, and its errors are the hub's
// sentinels (WriteHubError maps them).
type Hub interface {
	Models() api.Models
	CreateChat(ctx context.Context, tenant string, req api.CreateChatRequest) (api.Chat, error)
	// CreateChatWith creates a chat with its first messages and surface
	// records in one write: all of it or nothing is stored.
	CreateChatWith(ctx context.Context, tenant string, req api.CreateChatRequest, msgs []api.Message, recs ...hub.NewRecord) (api.Chat, error)
	// CreateNewChat is CreateChatWith for a chat made for a request's turn,
	// marked until KeepNewChat: a crash before leaves a chat no client
	// learnt of, which the next start deletes.
	CreateNewChat(ctx context.Context, tenant string, req api.CreateChatRequest, msgs []api.Message) (api.Chat, error)
	KeepNewChat(ctx context.Context, tenant, chatID string) error
	Chat(ctx context.Context, tenant, id string) (api.Chat, error)
	Patch(ctx context.Context, tenant, id string, req api.PatchChatRequest) error
	// CheckModelSettings refuses what a chat of model would refuse of
	// settings, taking nothing.
	CheckModelSettings(model string, s api.Settings) error
	DeleteChat(ctx context.Context, tenant, id string) error
	Transcript(ctx context.Context, tenant, id string, from, to int64) ([]api.Message, error)
	TranscriptPage(ctx context.Context, tenant, id string, from, to int64) ([]api.Message, error)
	// AnsweredTurn reads back the turn of the person's message stored as
	// userSeq, from the transcript.
	AnsweredTurn(ctx context.Context, tenant, id string, userSeq int64) ([]api.Message, error)
	// Submit and SubmitToolResults return the turn's id once what they
	// carry is durable; Subscribe before calling them to miss no event.
	Submit(ctx context.Context, tenant, id string, req api.SendMessageRequest) (string, error)
	// SubmitUnpaused starts turn turnID (hub.NewID), refusing the message
	// with *hub.PausedError, at once, where Submit would have it wait
	// behind a turn paused on the client's calls. key, when set, is the
	// message's idempotency key: a message the chat has under it joins
	// its running turn (joined, then that turn's id is returned), or is
	// *hub.AnsweredError, hub.ErrKeyInProgress or hub.ErrKeyReused; an
	// Unsought key is stored with the message, not looked for. queued,
	// when set, hears (without blocking) that the message waits behind
	// the chat's running turn.
	SubmitUnpaused(ctx context.Context, tenant, id, turnID string, key hub.Key, req api.SendMessageRequest, joined func(turnID string), queued func(paused bool)) (string, error)
	SubmitToolResults(ctx context.Context, tenant, id string, req api.ToolResultsRequest) (string, error)
	// SubmitToolResultsThen stores user messages after the results, in the
	// resumed turn, which answers them.
	SubmitToolResultsThen(ctx context.Context, tenant, id string, req api.ToolResultsRequest, then []api.Message) (string, error)
	// SubmitContinue starts turn turnID, which answers the chat as its log
	// stands (a retry of results whose turn failed): hub.ErrNothingToAnswer
	// when the log ends with an answer. queued, when set, hears that the
	// turn waits behind the chat's running turn.
	SubmitContinue(ctx context.Context, tenant, id, turnID string, queued func(paused bool)) (string, error)
	Subscribe(chatID string, buf int, types ...string) *eventbus.Sub
	Attach(ctx context.Context, tenant string, r io.Reader, name, mediaType string) (api.Attachment, error)
	// AddMessages stores messages between turns (a conversation's items);
	// under a key (an idempotency key, or "") the chat has them already,
	// it answers them as stored, or hub.ErrKeyReused.
	AddMessages(ctx context.Context, tenant, chatID, key string, msgs []api.Message) ([]api.Message, error)
	// Chat records are what this surface keeps about a chat (its
	// responses, a conversation's metadata), deleted with it.
	PutChatRecord(ctx context.Context, tenant, chatID, kind, id string, v any) error
	ChatRecord(ctx context.Context, tenant, chatID, kind, id string, v any) error
	DeleteChatRecord(ctx context.Context, tenant, chatID, kind, id string) error
	// Tenant records are an index this surface keeps across chats (which
	// chat paused on a tool call); they name chats, never grant them.
	PutTenantRecord(ctx context.Context, tenant, kind, id string, v any) error
	TenantRecord(ctx context.Context, tenant, kind, id string, v any) error
	// TenantRecords reads the tenant's records of kind, in id order, until
	// fn returns an error.
	TenantRecords(ctx context.Context, tenant, kind string, fn func(id string, decode func(v any) error) error) error
	DeleteTenantRecord(ctx context.Context, tenant, kind, id string) error
}

// Handler serves the OpenAI-compatible routes.
type Handler struct {
	hub Hub
	cfg configs.Config
	log zerolog.Logger
	// histories recognises the Chat Completions histories agentd answered.
	histories *Histories
	// started dates the pause index's undated entries (prune).
	started    time.Time
	pauseLocks [64]sync.Mutex
}

// New builds the surface over h.
func New(h Hub, cfg configs.Config, log zerolog.Logger) *Handler {
	return &Handler{hub: h, cfg: cfg, log: log.With().Str("component", "oai").Logger(), histories: NewHistories(historyTips, historyIdle), started: time.Now()}
}

// Route is one route of the surface: a ServeMux pattern and its handler,
// called with the caller's tenant once httpapi has authenticated it.
type Route struct {
	Pattern string
	Handle  func(w http.ResponseWriter, r *http.Request, tenant string)
	// Chat, when set, names the chat a request is about (from its path
	// or body; "" for none), so httpapi serves it on the chat's node in
	// cluster mode.
	Chat func(r *http.Request) string
}

// Routes lists every route the surface serves, for httpapi to mount.
func (h *Handler) Routes() []Route {
	return append([]Route{
		{"GET /v1/models", h.models, nil},
		// A model's id is provider/model: the wildcard takes the slash.
		{"GET /v1/models/{model...}", h.model, nil},
		{"POST /v1/responses", h.createResponse, requestChat},
		{"GET /v1/responses/{id}", h.getResponse, responseChat},
		{"DELETE /v1/responses/{id}", h.deleteResponse, responseChat},
		{"GET /v1/responses/{id}/input_items", h.inputItems, responseChat},
	}, h.conversationRoutes()...)
}

// HistoryRoutes lists the routes whose client re-sends the whole history
// every time: httpapi bounds their bodies with limits.max_history_bytes
// rather than limits.max_body_bytes.
func (h *Handler) HistoryRoutes() []Route {
	return []Route{{"POST /v1/chat/completions", h.chatCompletions, nil}}
}

// models answers the models list in OpenAI's shape, each entry carrying
// agentd's window and its source alongside; agentd's own clients read the
// same body.
func (h *Handler) models(w http.ResponseWriter, r *http.Request, tenant string) {
	writeJSON(w, http.StatusOK, h.hub.Models())
}

// model answers one model of the list, as OpenAI's models.retrieve does;
// an id the list does not hold is 404 model_not_found.
func (h *Handler) model(w http.ResponseWriter, r *http.Request, tenant string) {
	id := r.PathValue("model")
	for _, m := range h.hub.Models().Models {
		if m.ID == id {
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	WriteError(w, http.StatusNotFound, "model_not_found", "model", fmt.Sprintf("the model %q does not exist: GET /v1/models lists agentd's models as provider/model", id))
}
