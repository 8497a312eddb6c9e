// Package chat holds the message model every part of agentd shares: what a
// person, an assistant or a tool said, as it is stored and replayed. It has no
// dependencies of ours and does no I/O.
package chat

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Role says who produced a message.
type Role string

// The roles a stored message can have. The system prompt is never stored: it
// is built for each request.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Origin says where a user message came from; the learner only learns from a
// person's own words.
const (
	OriginPerson   = ""         // typed by the chat's person (the default)
	OriginSchedule = "schedule" // a scheduled or automated run
	OriginApp      = "app"      // injected by the embedding application
)

// Message is one stored entry of a chat's log. Seq is assigned by the store
// and is unique and increasing within a chat. Fields a reader does not know
// are ignored, so older binaries can read newer records.
type Message struct {
	Seq       int64     `json:"seq"`
	Role      Role      `json:"role"`
	Content   string    `json:"content,omitempty"`
	CreatedAt time.Time `json:"created_at"`

	// Thinking is the model's reasoning as the provider returned it. It is
	// kept intact and replayed unedited (signatures must match).
	Thinking          string `json:"thinking,omitempty"`
	ThinkingSignature string `json:"thinking_signature,omitempty"`

	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`

	// ToolCallID and ToolName link a tool message to its call.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	// Untrusted marks a tool result that carries outside text (web, files,
	// mail); a chat that read one has what it learns wait for an OK.
	Untrusted bool `json:"untrusted,omitempty"`

	Images      []Image      `json:"images,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`

	// Origin is empty for a person's own words.
	Origin string `json:"origin,omitempty"`
	// Partial marks an answer cut short by a fault; Problem says why.
	Partial bool   `json:"partial,omitempty"`
	Problem string `json:"problem,omitempty"`
	// MaxOutputReached marks an answer the model stopped at the chat's own
	// settings.max_output_tokens: the client's cap cut it, so agentd did
	// not ask for the rest.
	MaxOutputReached bool `json:"max_output_reached,omitempty"`
	// Refused marks an answer the provider ended as a refusal (Anthropic's
	// stop_reason "refusal", an OpenAI-style finish_reason
	// "content_filter", or OpenAI's refusal text). It is kept and shown;
	// later requests leave the refused exchange out (window.Assemble), as
	// Anthropic asks.
	Refused bool `json:"refused,omitempty"`
	// Model names the provider/model that wrote an assistant message.
	Model string `json:"model,omitempty"`
	// IdempotencyKey is the key a person's message was sent with: its
	// chat stores it, and answers it, once however often it comes.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// KeyedCount is, on the first of messages added between turns under
	// an idempotency key, how many the add held: the add sent again is
	// completed, or answered, only when it holds as many (0 on records
	// stored before it was kept).
	KeyedCount int `json:"keyed_count,omitempty"`
}

// SameAdded reports whether a and b are the same message as an
// application adds it between turns (a conversation's item): the same
// role, words, origin, calls and result. What the store sets (seq, date,
// idempotency key) is not compared.
func SameAdded(a, b *Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && a.ToolName == b.ToolName &&
		a.IsError == b.IsError && a.Origin == b.Origin && slices.Equal(a.ToolCalls, b.ToolCalls)
}

// ToolCall is one call an assistant asks for. Arguments is the JSON text the
// model wrote, kept as written.
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

// Attachment is a reference to a stored file; its content never rides in a
// request by itself.
type Attachment struct {
	ID        string `json:"id"` // content hash
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"`
	Note      string `json:"note"` // the compact facts the model sees
}

// ToolSpec describes a tool to a model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Usage is what a provider reported for one request.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	CachedTokens int `json:"cached_tokens,omitempty"`
	// ReasoningTokens is the part of OutputTokens the model spent
	// reasoning, where the protocol reports it (OpenAI-style
	// completion_tokens_details.reasoning_tokens); 0 where it does not.
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
}

// Sane is u as a provider could have meant it: no count below zero, no
// more cached tokens than input ones, and no more reasoning tokens than
// output ones. A provider or proxy that reports otherwise would make the
// counts a turn sums, and the metrics' counters (which refuse to go down),
// nonsense or worse.
func (u Usage) Sane() Usage {
	u.InputTokens, u.OutputTokens, u.CachedTokens = max(u.InputTokens, 0), max(u.OutputTokens, 0), max(u.CachedTokens, 0)
	u.CachedTokens = min(u.CachedTokens, u.InputTokens)
	u.ReasoningTokens = min(max(u.ReasoningTokens, 0), u.OutputTokens)
	return u
}

// Add sums two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens, CachedTokens: u.CachedTokens + o.CachedTokens,
		ReasoningTokens: u.ReasoningTokens + o.ReasoningTokens}
}

// Settings are an application's sampling settings for a chat's model
// calls. A nil or empty field leaves the provider's default.
type Settings struct {
	Temperature     *float64 `json:"temperature,omitempty"`
	TopP            *float64 `json:"top_p,omitempty"`
	MaxOutputTokens *int     `json:"max_output_tokens,omitempty"`
	Stop            []string `json:"stop,omitempty"`
	// ReasoningEffort is how hard a reasoning model thinks, in the
	// protocol's own words (OpenAI: minimal, low, medium, high).
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// CompactThreshold is agentd's own, never sent: the request size in
	// tokens past which the chat folds, below what its window allows
	// (OpenAI's context_management compact_threshold).
	CompactThreshold *int `json:"compact_threshold,omitempty"`
	// ParallelToolCalls false asks the model for at most one tool call per
	// answer, where its protocol can say so (OpenAI-style, Anthropic; the
	// Ollama protocol has no such field and is not told).
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
}

// OneToolCall is whether the settings ask for at most one tool call per
// answer (ParallelToolCalls false).
func (s Settings) OneToolCall() bool { return s.ParallelToolCalls != nil && !*s.ParallelToolCalls }

// MinCompactThreshold is the smallest compact_threshold a chat may set
// (OpenAI's own minimum).
const MinCompactThreshold = 1000

// maxStops is the most stop sequences a chat may set (OpenAI's limit).
const maxStops = 4

// SettingError is a setting refused. Field names it as Settings' JSON
// does, so an API can name the field of its own request at fault.
type SettingError struct {
	Field  string
	Reason string
}

func (e *SettingError) Error() string { return e.Reason }

// RefuseSetting is a *SettingError for field.
func RefuseSetting(field, format string, args ...any) error {
	return &SettingError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Validate checks the ranges every protocol shares; a refusal is a
// *SettingError.
func (s Settings) Validate() error {
	switch {
	case s.Temperature != nil && (*s.Temperature < 0 || *s.Temperature > 2):
		return RefuseSetting("temperature", "settings: temperature %g is outside 0..2", *s.Temperature)
	case s.TopP != nil && (*s.TopP <= 0 || *s.TopP > 1):
		return RefuseSetting("top_p", "settings: top_p %g is outside (0, 1]", *s.TopP)
	case s.MaxOutputTokens != nil && *s.MaxOutputTokens < 1:
		return RefuseSetting("max_output_tokens", "settings: max_output_tokens %d must be at least 1", *s.MaxOutputTokens)
	case s.CompactThreshold != nil && *s.CompactThreshold < MinCompactThreshold:
		return RefuseSetting("compact_threshold", "settings: compact_threshold %d must be at least %d tokens", *s.CompactThreshold, MinCompactThreshold)
	case len(s.Stop) > maxStops:
		return RefuseSetting("stop", "settings: %d stop sequences; at most %d", len(s.Stop), maxStops)
	}
	for _, st := range s.Stop {
		if st == "" {
			return RefuseSetting("stop", "settings: a stop sequence is empty")
		}
	}
	return nil
}

// TitleRunes bounds a title made from a chat's first message.
const TitleRunes = 60

// TitleFrom makes a chat's title from its first message: the first line
// that has words, spaces collapsed, cut at a word to TitleRunes runes with
// an ellipsis. Text with no words gives "".
func TitleFrom(text string) string {
	for line := range strings.Lines(text) {
		words := strings.Fields(line)
		if len(words) == 0 {
			continue
		}
		t := strings.Join(words, " ")
		if utf8.RuneCountInString(t) <= TitleRunes {
			return t
		}
		cut := string([]rune(t)[:TitleRunes-1])
		// A word cut in half reads worse than a shorter title, unless the
		// last space would lose more than half of it.
		if i := strings.LastIndexByte(cut, ' '); i > 0 && utf8.RuneCountInString(cut[:i]) > TitleRunes/2 {
			cut = cut[:i]
		}
		return cut + "…"
	}
	return ""
}
