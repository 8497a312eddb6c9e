package oai

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/agentd/agentd/api"
)

// The wire shapes of OpenAI's Responses API that agentd answers with, as
// its API reference and the openai-go v3 SDK's responses package define
// them: only the fields agentd fills, with OpenAI's nulls where it has none.

// response is a Response object.
type response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"` // "response"
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"` // in_progress, completed, incomplete, failed
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []item             `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Conversation       *conversationRef   `json:"conversation"`
	Store              bool               `json:"store"`
	Temperature        *float64           `json:"temperature"`
	TopP               *float64           `json:"top_p"`
	Reasoning          *reasoningConfig   `json:"reasoning"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []json.RawMessage  `json:"tools"`
	Text               textConfig         `json:"text"`
	Truncation         string             `json:"truncation"`
	Usage              *usage             `json:"usage"`
	Metadata           map[string]string  `json:"metadata"`
}

// reasoningConfig is a response's reasoning: its request's effort and
// summary, null where the request named none.
type reasoningConfig struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type conversationRef struct {
	ID string `json:"id"`
}

type textConfig struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

// incompleteDetails says why a response is incomplete: agentd's one reason
// is max_output_tokens, an answer cut at the client's cap.
type incompleteDetails struct {
	Reason string `json:"reason"`
}

// responseError is a failed response's error.
type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type usage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// item is one item of a response's output, its input or a conversation:
// a message, a function_call, a function_call_output or (output only) a
// reasoning item.
type item struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Status string `json:"status,omitempty"`
	// message
	Role    string  `json:"role,omitempty"`
	Content *[]part `json:"content,omitempty"`
	// function_call and function_call_output: arguments and output are
	// there even when empty, as OpenAI sends them.
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
	Output    *string `json:"output,omitempty"`
	// reasoning: its summary parts, there even when empty.
	Summary *[]summaryPart `json:"summary,omitempty"`
}

// summaryPart is one part of a reasoning item's summary: summary_text.
type summaryPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// textBytes is the length of the text an item carries.
func (it item) textBytes() int {
	n := 0
	if it.Content != nil {
		for _, p := range *it.Content {
			n += len(p.Text) + len(p.ImageURL)
		}
	}
	if it.Arguments != nil {
		n += len(*it.Arguments)
	}
	if it.Output != nil {
		n += len(*it.Output)
	}
	if it.Summary != nil {
		for _, p := range *it.Summary {
			n += len(p.Text)
		}
	}
	return n
}

// part is one content part of a message: input_text, output_text or
// input_image. Text is there even when empty (an output_text part starts
// so); an image's is empty.
type part struct {
	Type        string    `json:"type"`
	Text        string    `json:"text"`
	Annotations *[]string `json:"annotations,omitempty"`
	ImageURL    string    `json:"image_url,omitempty"`
}

// Item types and statuses.
const (
	itemMessage      = "message"
	itemFunctionCall = "function_call"
	itemCallOutput   = "function_call_output"
	itemReasoning    = "reasoning"

	statusInProgress = "in_progress"
	statusCompleted  = "completed"
	statusIncomplete = "incomplete"
	statusFailed     = "failed"
)

// messageStatus is an assistant message item's status: incomplete when
// the model stopped at the chat's max_output_tokens, or the answer was cut
// short (at limits.max_answer_bytes, or by a fault), or the provider
// refused it (a content filter).
func messageStatus(m api.Message) string {
	if m.MaxOutputReached || m.Partial || m.Refused {
		return statusIncomplete
	}
	return statusCompleted
}

func outputText(text string) part {
	return part{Type: "output_text", Text: text, Annotations: &[]string{}}
}

// messageItem is an assistant message item with the given text parts.
func messageItem(id, status string, parts ...part) item {
	if parts == nil {
		parts = []part{}
	}
	return item{Type: itemMessage, ID: id, Status: status, Role: "assistant", Content: &parts}
}

// newID returns prefix and 24 random hex digits: the shape of agentd's ids.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// chatIDLen is the length of an agentd chat id (hub.NewID).
const chatIDLen = 24

// Ids that name their chat: a response's is resp_ + chat id + its own, a
// conversation's conv_ + chat id, so either resolves to its chat (inside
// the caller's tenant) without an index.
const (
	responsePrefix     = "resp_"
	conversationPrefix = "conv_"
)

func responseID(chatID string) string { return newID(responsePrefix + chatID) }

// chatOfResponse returns the chat a response id names, or false.
func chatOfResponse(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, responsePrefix)
	if !ok || len(rest) != 2*chatIDLen || !isHex(rest) {
		return "", false
	}
	return rest[:chatIDLen], true
}

func conversationID(chatID string) string { return conversationPrefix + chatID }

// chatOfConversation returns the chat a conversation id names, or false.
func chatOfConversation(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, conversationPrefix)
	if !ok || len(rest) != chatIDLen || !isHex(rest) {
		return "", false
	}
	return rest, true
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// responseChat is the chat of a route's {id}, a response id.
func responseChat(r *http.Request) string {
	id, _ := chatOfResponse(r.PathValue("id"))
	return id
}

// conversationChat is the chat of a route's {id}, a conversation id.
func conversationChat(r *http.Request) string {
	id, _ := chatOfConversation(r.PathValue("id"))
	return id
}

// requestChat is the chat a new response continues: its
// previous_response_id's or its conversation's. It reads the body (already
// bounded) and puts it back for the handler; a body it cannot read or
// parse names no chat, and the handler answers it as it would.
func requestChat(r *http.Request) string {
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	if err != nil {
		return ""
	}
	var ref struct {
		PreviousResponseID string          `json:"previous_response_id"`
		Conversation       json.RawMessage `json:"conversation"`
	}
	if json.Unmarshal(body, &ref) != nil {
		return ""
	}
	if id, ok := chatOfResponse(ref.PreviousResponseID); ok {
		return id
	}
	conv, _ := conversationOf(ref.Conversation)
	id, _ := chatOfConversation(conv)
	return id
}
