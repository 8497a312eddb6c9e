// Package providers defines what agentd needs of a model API — one streamed
// request, the models it serves and their windows — and the shared logic every
// adapter uses: the "too long" detector, the company table, window readers.
// The adapters live in the subpackages openai, anthropic and ollama. Nothing
// here knows of actors or HTTP serving.
package providers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/agentd/agentd/chat"
)

// Request is one call to a model.
type Request struct {
	Model  string
	System string
	// Messages are read-only to the provider. A caller that sends a chat's
	// next request (the same CacheKey) in the array of an earlier one
	// leaves the elements the earlier one carried as they were: an
	// adapter may reuse their encoding without reading them again.
	Messages []chat.Message
	Tools    []chat.ToolSpec
	// MaxTokens is the room left for the answer; 0 lets the provider choose.
	MaxTokens int
	// NumCtx is the window agentd asks a local server to allocate (Ollama).
	NumCtx int
	// EstimatedInput is agentd's estimate of the input tokens; an adapter
	// whose server cuts over-long prompts silently (Ollama) compares it with
	// the count the server reports.
	EstimatedInput int
	// MaxAnswerBytes caps what is kept of the answer (text, thinking, tool
	// calls); past it Stream ends with ErrAnswerTooLarge. 0 means
	// DefaultMaxAnswerBytes.
	MaxAnswerBytes int
	// Settings are the chat's sampling settings, passed through as the
	// protocol names them (MaxOutputTokens is already in MaxTokens).
	Settings chat.Settings
	// CacheKey is stable for one chat's requests ("" for none): the
	// provider's prompt-cache hints are keyed by it (OpenAI's
	// prompt_cache_key, llama.cpp's slot).
	CacheKey string
}

// SettingsChecker is a client that says which settings its protocol takes:
// a chat's settings are checked when set, and again before each call.
type SettingsChecker interface {
	CheckSettings(chat.Settings) error
}

// CheckSettings checks settings against the ranges every protocol shares,
// then against client's protocol when it says what it takes.
func CheckSettings(client Client, s chat.Settings) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if c, ok := client.(SettingsChecker); ok {
		return c.CheckSettings(s)
	}
	return nil
}

// CheckEffort refuses a reasoning effort a protocol has no word for.
func CheckEffort(protocol, effort string, known ...string) error {
	if effort == "" {
		return nil
	}
	for _, k := range known {
		if effort == k {
			return nil
		}
	}
	return chat.RefuseSetting("reasoning_effort", "%s has no reasoning_effort %q (it takes %s)", protocol, effort, strings.Join(known, ", "))
}

// EventKind tells what a streamed Event carries.
type EventKind int

// Streamed event kinds.
const (
	EventText EventKind = iota + 1
	EventThinking
	EventToolCall
	EventUsage
)

// Event is one streamed piece of an answer.
type Event struct {
	Kind     EventKind
	Text     string
	ToolCall *chat.ToolCall
	Usage    *chat.Usage
}

// Finish reasons, normalised across providers.
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
	FinishFilter    = "content_filter"
)

// Response is the whole answer once the stream ends.
type Response struct {
	Message      chat.Message // role assistant: content, thinking, tool calls
	Usage        chat.Usage
	FinishReason string
}

// Client is one configured provider. Stream calls emit for each event as it
// arrives, on the caller's goroutine, and returns the assembled answer.
type Client interface {
	Stream(ctx context.Context, req Request, emit func(Event)) (Response, error)
	Models(ctx context.Context) ([]ModelInfo, error)
}

// Where a ModelInfo figure came from.
const (
	SourceList    = "list"
	SourceRefusal = "refusal"
	SourceConfig  = "config"
	SourceDefault = "default"
)

// Default windows when a provider does not say.
const (
	DefaultRemoteWindow = 128_000
	DefaultLocalWindow  = 8_192
)

// ModelInfo is what agentd knows of one model.
type ModelInfo struct {
	Provider     string `json:"provider"`
	ID           string `json:"id"`
	Window       int    `json:"window"`
	WindowSource string `json:"window_source"`
	MaxOutput    int    `json:"max_output,omitempty"`
	Vision       bool   `json:"vision,omitempty"`
	// ToolsInWords: the model writes tool calls in its text instead of
	// using the API's native tool calls.
	ToolsInWords bool `json:"tools_in_words,omitempty"`
	Local        bool `json:"local,omitempty"`
	// Loaded is false for a local model that is not in memory now.
	Loaded bool `json:"loaded,omitempty"`
}

// Error is a provider failure with what agentd needs to decide the next step.
type Error struct {
	Provider string
	Status   int
	Body     string
	// TooLong: the request did not fit the model's window.
	TooLong bool
	// Window is the window the refusal named, 0 when it named none.
	Window int
	// Requested is the size the refusal says was sent, 0 when unnamed.
	Requested int
	// CountsOutput: the refusal counts the requested answer room in the
	// total, so shrinking MaxTokens first may be enough.
	CountsOutput bool
	// InputOnly: the refusal's limit is on input alone (or the input alone
	// was over); the answer room played no part.
	InputOnly bool
	// Retryable: a rate limit or a server fault worth another try.
	Retryable  bool
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	switch {
	case e.TooLong:
		return fmt.Sprintf("%s: request too long for the model's window (status %d): %s", e.Provider, e.Status, clip(e.Body, 300))
	case e.Err != nil:
		return fmt.Sprintf("%s: %v", e.Provider, e.Err)
	default:
		return fmt.Sprintf("%s: status %d: %s", e.Provider, e.Status, clip(e.Body, 300))
	}
}

func (e *Error) Unwrap() error { return e.Err }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// LearntWindow is what a "too long" refusal teaches of the window of the
// model that sent it: the window it names; else an upper bound 5% under what
// was sent (the refusal's own count, or sent, agentd's corrected estimate of
// the input, plus answer, its max_tokens, unless the refusal is about input
// alone: most servers check input and max_tokens together), and never above
// 95% of believed, the window the request was sized to. So a second refusal
// naming no window lowers the bound the first one taught even when the
// request was sized exactly to it. 0: nothing to learn.
func LearntWindow(e *Error, sent, answer, believed int) int {
	if e == nil || !e.TooLong {
		return 0
	}
	if e.Window > 0 {
		return e.Window
	}
	total := e.Requested
	if total <= 0 {
		total = sent
		if !e.InputOnly {
			total += answer
		}
	}
	if total <= 0 {
		return 0
	}
	if believed > 0 {
		total = min(total, believed)
	}
	if bound := total * 95 / 100; bound >= minPlausibleWindow && (believed <= 0 || bound < believed) {
		return bound
	}
	return 0
}

// RetryWindow is the window to size the one retry of a refused request to:
// what LearntWindow teaches, recorded through learn (which persists it and
// returns the window now believed), or 5% under believed when the refusal
// teaches nothing, so the retry is smaller all the same. A failure to
// record is returned beside the window learned, for the caller to log.
func RetryWindow(ctx context.Context, e *Error, sent, answer, believed int, learn func(ctx context.Context, window int) (int, error)) (int, error) {
	w := LearntWindow(e, sent, answer, believed)
	if w <= 0 {
		return believed * 95 / 100, nil
	}
	kept, err := learn(ctx, w)
	if err != nil {
		return w, fmt.Errorf("learn window %d: %w", w, err)
	}
	return kept, nil
}

// Unreachable reports an error of a provider nobody answers at: refused,
// no route, no such host.
func Unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED)
}
