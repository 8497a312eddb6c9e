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
	"net/http"

	"github.com/rs/zerolog"

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
	Chat(ctx context.Context, tenant, id string) (api.Chat, error)
	Patch(ctx context.Context, tenant, id string, req api.PatchChatRequest) error
	// AppendMessages stores a history a client brings, between turns.
	AppendMessages(ctx context.Context, tenant, id string, msgs []api.Message) ([]api.Message, error)
	// Submit returns the turn's id once the message is durable.
	Submit(ctx context.Context, tenant, id string, req api.SendMessageRequest) (string, error)
	// SubmitToolResults answers a paused turn's calls.
	SubmitToolResults(ctx context.Context, tenant, id string, req api.ToolResultsRequest) (string, error)
	// Subscribe watches a chat; its events carry wire types.
	Subscribe(chatID string, buf int) *eventbus.Sub
}

// Handler serves the OpenAI-compatible routes.
type Handler struct {
	hub Hub
	cfg configs.Config
	log zerolog.Logger
	// histories recognises the Chat Completions histories agentd answered.
	histories *Histories
}

// New builds the surface over h.
func New(h Hub, cfg configs.Config, log zerolog.Logger) *Handler {
	return &Handler{hub: h, cfg: cfg, log: log.With().Str("component", "oai").Logger(), histories: NewHistories(historyTips, historyIdle)}
}

// Route is one route of the surface: a ServeMux pattern and its handler,
// called with the caller's tenant once httpapi has authenticated it.
type Route struct {
	Pattern string
	Handle  func(w http.ResponseWriter, r *http.Request, tenant string)
	// MaxBody bounds the request's body; 0 is limits.max_body_bytes.
	MaxBody int64
}

// Routes lists every route the surface serves, for httpapi to mount.
func (h *Handler) Routes() []Route {
	return []Route{
		{Pattern: "GET /v1/models", Handle: h.models},
		// Its client re-sends the whole history every time.
		{Pattern: "POST /v1/chat/completions", Handle: h.chatCompletions, MaxBody: h.cfg.Limits.MaxHistoryBytes},
	}
}

// models answers the models list in OpenAI's shape, each entry carrying
// agentd's window and its source alongside; agentd's own clients read the
// same body.
func (h *Handler) models(w http.ResponseWriter, r *http.Request, tenant string) {
	writeJSON(w, http.StatusOK, h.hub.Models())
}
