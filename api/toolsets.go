package api

import (
	"encoding/json"
	"time"
)

// Settings are a chat's sampling settings, passed to its model as the
// model's protocol names them; a protocol without one refuses it (400).
type Settings struct {
	Temperature     *float64 `json:"temperature,omitempty"`
	TopP            *float64 `json:"top_p,omitempty"`
	MaxOutputTokens *int     `json:"max_output_tokens,omitempty"`
	Stop            []string `json:"stop,omitempty"`
	ReasoningEffort string   `json:"reasoning_effort,omitempty"`
	// CompactThreshold (tokens, at least 1000) folds the chat once a request
	// would pass it, below what the model's window allows; agentd's own, never
	// sent to the model.
	CompactThreshold *int `json:"compact_threshold,omitempty"`
	// ParallelToolCalls false asks the model for at most one tool call per
	// answer; a protocol without the field (Ollama's) is not told, not
	// refused.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
}

// Tool is one tool an application brings: Name is 1-64 letters, digits,
// '_' or '-'; Parameters is the JSON Schema of its arguments object.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Executor kinds.
const (
	ExecutorClient  = "client"
	ExecutorWebhook = "webhook"
	ExecutorMCP     = "mcp"
)

// Executor says who runs a toolset's calls: the application itself
// ("client": the turn pauses with turn.requires_action), a webhook agentd
// POSTs each call to, signed the Standard Webhooks way, or a
// streamable-HTTP MCP server. Secrets are named by environment variable,
// never sent.
type Executor struct {
	Kind string `json:"kind"`
	URL  string `json:"url,omitempty"`
	// SecretEnv names the variable holding the webhook's signing secret.
	SecretEnv string `json:"secret_env,omitempty"`
	// Timeout of one webhook call, e.g. "30s". Optional. Defaults to 30s.
	Timeout string `json:"timeout,omitempty"`
	// HeadersEnv maps MCP request headers to the variables holding them.
	HeadersEnv map[string]string `json:"headers_env,omitempty"`
}

// PutToolsetRequest is the body of PUT /v1/toolsets/{name}.
type PutToolsetRequest struct {
	Tools    []Tool   `json:"tools"`
	Executor Executor `json:"executor"`
}

// Toolset is a tenant's toolset (an MCP toolset lists its server's tools).
type Toolset struct {
	Name      string    `json:"name"`
	Tools     []Tool    `json:"tools"`
	Executor  Executor  `json:"executor"`
	Version   int       `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ToolResultsRequest is the body of POST /v1/chats/{id}/tool-results.
type ToolResultsRequest struct {
	Results []ToolResult `json:"results"`
}

// ToolResult is the application's result of one call of a paused turn.
type ToolResult struct {
	CallID string `json:"call_id"`
	Output string `json:"output"`
	// IsError tells the model the call failed.
	IsError bool `json:"is_error,omitempty"`
}
