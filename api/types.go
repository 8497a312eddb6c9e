// Package api is agentd's HTTP surface as Go types, plus a small client. It
// imports nothing of the daemon, so an application can use it alone.
package api

import (
	"encoding/json"
	"time"

	"github.com/agentd/agentd/chat"
)

// Error is the one JSON error shape: {"error": "...", "kind": "..."}.
type Error struct {
	Message string `json:"error"`
	// Kind is a stable word for programs: bad_request, not_found, too_large,
	// busy, rate_limited, unauthorized, unavailable, conflict, internal.
	Kind string `json:"kind"`
	// Status is the HTTP status (not sent; set by the client).
	Status int `json:"-"`
}

func (e *Error) Error() string { return e.Message }

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
	Messages  int64     `json:"messages"`
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
}

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

// Records the daemon reports about a chat; defined with the message model
// so the daemon and its clients share one definition.
type (
	TurnResult        = chat.TurnResult
	Problem           = chat.Problem
	NextStep          = chat.NextStep
	Compacted         = chat.Compacted
	CompactionApplied = chat.CompactionApplied
	Healed            = chat.Healed
	Context           = chat.ContextView
	Budget            = chat.Budget
	RequestLog        = chat.RequestLog
)

// Event is one Server-Sent Event of a chat, as a client reads it. Type is
// the SSE event name (chat.Event* constants).
type Event struct {
	Type   string          `json:"type"`
	ChatID string          `json:"chat_id"`
	TurnID string          `json:"turn_id,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// Model is one entry of GET /v1/models.
type Model struct {
	ID           string `json:"id"` // provider/model
	Provider     string `json:"provider"`
	Window       int    `json:"window"`
	WindowSource string `json:"window_source"`
	Vision       bool   `json:"vision,omitempty"`
	Local        bool   `json:"local,omitempty"`
	Loaded       bool   `json:"loaded,omitempty"`
}

// CompactRequest is the body of POST /v1/chats/{id}/compact.
type CompactRequest struct {
	Focus string `json:"focus,omitempty"`
}
