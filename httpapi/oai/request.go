package oai

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// createRequest is the body of POST /v1/responses: the fields agentd
// reads. Others OpenAI defines (user, prompt_cache_key, include,
// service_tier, …) are accepted and have no effect (docs/openai.md).
type createRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	PreviousResponseID string            `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
	Store              *bool             `json:"store"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Metadata           map[string]string `json:"metadata"`
	Stream             bool              `json:"stream"`
	Background         bool              `json:"background"`
	Text               *struct {
		Format *struct {
			Type string `json:"type"`
		} `json:"format"`
	} `json:"text"`
	Prompt    json.RawMessage `json:"prompt"`
	Reasoning *struct {
		// Effort is the turn's reasoning effort, the chat's
		// reasoning_effort setting as Chat Completions' is.
		Effort  string `json:"effort"`
		Summary string `json:"summary"`
		// GenerateSummary is summary's deprecated name.
		GenerateSummary string `json:"generate_summary"`
	} `json:"reasoning"`
	ContextManagement []struct {
		Type             string `json:"type"`
		CompactThreshold *int   `json:"compact_threshold"`
	} `json:"context_management"`
}

// summarises reports whether the request asks to be shown the model's
// reasoning, as OpenAI's reasoning.summary does: its reasoning is then
// streamed as a reasoning item's summary (docs/openai.md).
func (req *createRequest) summarises() bool {
	if req.Reasoning == nil {
		return false
	}
	switch cmp.Or(req.Reasoning.Summary, req.Reasoning.GenerateSummary) {
	case "auto", "concise", "detailed":
		return true
	}
	return false
}

// effort is the request's reasoning.effort, "" when it names none.
func (req *createRequest) effort() string {
	if req.Reasoning == nil {
		return ""
	}
	return req.Reasoning.Effort
}

// functionTool is a tool of type function: one the client runs.
type functionTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// inputItem is one item of a request's input (or of a conversation's
// items): a message, a function_call_output, or an echoed function_call.
type inputItem struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Output  json.RawMessage `json:"output"`
	Name    string          `json:"name"`
	Args    string          `json:"arguments"`
}

// badRequest is a refusal naming the field at fault: 400, or 413 for one
// past its size limit.
type badRequest struct {
	param, msg string
	tooLarge   bool
}

func (e *badRequest) Error() string { return e.msg }

func refuse(param, format string, args ...any) error {
	return &badRequest{param: param, msg: fmt.Sprintf(format, args...)}
}

func tooLarge(param, format string, args ...any) error {
	return &badRequest{param: param, msg: fmt.Sprintf(format, args...), tooLarge: true}
}

// decode reads a JSON body into v, answering the error itself. The body is
// bounded by httpapi (limits.max_body_bytes); unknown fields are accepted,
// as OpenAI adds fields a client may send that agentd has no use for.
func decode(w http.ResponseWriter, r *http.Request, v any, checks ...func(body []byte) error) bool {
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	var tooLong *listTooLongError
	for _, check := range checks {
		if err == nil {
			err = check(body)
		}
	}
	switch {
	case errors.As(err, &tooLong):
		WriteError(w, http.StatusRequestEntityTooLarge, "too_large", tooLong.kind, tooLong.Error())
		return false
	case errors.As(err, &tooBig):
		WriteError(w, http.StatusRequestEntityTooLarge, "too_large", "", fmt.Sprintf("request body over the limit of %d bytes (limits.max_body_bytes; Chat Completions: limits.max_history_bytes)", tooBig.Limit))
		return false
	case errors.Is(err, os.ErrDeadlineExceeded):
		// As the native routes: a 408, which OpenAI's SDKs retry.
		w.Header().Set("Connection", "close")
		WriteError(w, http.StatusRequestTimeout, "timeout", "", "the request body did not arrive within http.read_timeout")
		return false
	case err != nil:
		w.Header().Set("Connection", "close")
		WriteError(w, http.StatusBadRequest, "", "", "the request body did not arrive whole: "+err.Error())
		return false
	case !utf8.Valid(body):
		WriteError(w, http.StatusBadRequest, "", "", "request body is not valid UTF-8")
		return false
	case len(bytes.TrimSpace(body)) == 0:
		WriteError(w, http.StatusBadRequest, "", "", "request body is empty; send a JSON object")
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		WriteError(w, http.StatusBadRequest, "", "", "We could not parse the JSON body of your request: "+err.Error())
		return false
	}
	return true
}

// items reads input: a string (one user message) or a list of items.
func items(raw json.RawMessage) ([]inputItem, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, refuse("input", "input is missing: send a string or a list of input items")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		c, _ := json.Marshal(s)
		return []inputItem{{Type: itemMessage, Role: "user", Content: c}}, nil
	}
	var out []inputItem
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, refuse("input", "input is neither a string nor a list of input items: %v", err)
	}
	for i := range out {
		if out[i].Type == "" && out[i].Role != "" {
			out[i].Type = itemMessage
		}
	}
	return out, nil
}

// parts reads a message's content: a string or a list of parts.
func parts(raw json.RawMessage, param string) ([]part, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []part{{Type: "input_text", Text: s}}, nil
	}
	var ps []part
	if err := json.Unmarshal(raw, &ps); err != nil {
		return nil, refuse(param, "%s is neither a string nor a list of content parts", param)
	}
	for i, p := range ps {
		switch p.Type {
		case "input_text", "output_text":
		case "input_image":
			if !strings.HasPrefix(p.ImageURL, "data:") {
				return nil, refuse(fmt.Sprintf("%s[%d].image_url", param, i), "agentd takes images as base64 data URLs only (it fetches no URL and keeps no files by id)")
			}
		default:
			return nil, refuse(fmt.Sprintf("%s[%d].type", param, i), "content part type %q is not supported by agentd: use input_text or input_image", p.Type)
		}
	}
	return ps, nil
}

// textOnly refuses an image among ps, where agentd keeps only text and
// would drop it unseen; why says where it goes instead.
func textOnly(ps []part, param, why string) error {
	for i, p := range ps {
		if p.Type == "input_image" {
			return refuse(fmt.Sprintf("%s[%d].type", param, i), "an input_image is not taken here: %s", why)
		}
	}
	return nil
}

// dataImage decodes a base64 data URL.
func dataImage(u string) (mediaType string, data []byte, err error) {
	rest, _ := strings.CutPrefix(u, "data:")
	mediaType, b64, ok := strings.Cut(rest, ";base64,")
	if !ok {
		return "", nil, errors.New("image data URL is not base64")
	}
	data, err = base64.StdEncoding.DecodeString(b64)
	return mediaType, data, err
}

// callOutput reads a function_call_output's output: a string, or a list
// of text parts joined.
func callOutput(raw json.RawMessage, param string) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	ps, err := parts(raw, param)
	if err == nil {
		err = textOnly(ps, param, "agentd's tool results are text; send the image in a user message after this response")
	}
	if err != nil {
		return "", err
	}
	return joinedText(ps), nil
}

// joinedText is the text of ps, one part after another.
func joinedText(ps []part) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Text)
	}
	return b.String()
}

// functionTools reads the request's tools: only type function, which the
// client runs; agentd's own tools are offered by agentd itself.
func functionTools(raw []json.RawMessage) ([]functionTool, error) {
	out := make([]functionTool, 0, len(raw))
	for i, r := range raw {
		var t functionTool
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, refuse(fmt.Sprintf("tools[%d]", i), "tools[%d] is not a tool object: %v", i, err)
		}
		if t.Type != "function" {
			return nil, refuse(fmt.Sprintf("tools[%d].type", i), "tool type %q is not supported by agentd: it takes tools of type function, which the client runs (agentd offers its own tools, such as fetch_url and find_tools, by itself)", t.Type)
		}
		out = append(out, t)
	}
	return out, nil
}

// toolChoice reads tool_choice: "auto" (the default) or "none" (no tools
// this turn). agentd cannot make a model call a tool, so "required" and a
// named tool are refused.
func toolChoice(raw json.RawMessage) (none bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && (s == "auto" || s == "none") {
		return s == "none", nil
	}
	return false, refuse("tool_choice", "tool_choice %s is not supported by agentd: use \"auto\" or \"none\" (it cannot force every provider's model to call a tool)", clip(string(raw), 100))
}

// unconstrained refuses a structured output format asked for in param:
// agentd asks every provider's model for plain text and checks no answer
// against a schema, so an SDK's parse helper would fail on the answer.
func unconstrained(param, format string) error {
	return refuse(param, "%s %q is not honoured: agentd does not constrain the model's output (it asks for plain text and checks no answer against a schema)", param, format)
}

// given reports whether an optional JSON field was sent with a value.
func given(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// conversationOf reads conversation: an id or {"id": ...}.
func conversationOf(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var ref conversationRef
	if err := json.Unmarshal(raw, &ref); err != nil || ref.ID == "" {
		return "", refuse("conversation", "conversation is neither an id nor {\"id\": ...}")
	}
	return ref.ID, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// listTooLongError refuses a body one of whose kinds of list holds more
// elements in all than its bound.
type listTooLongError struct {
	kind string
	most int
}

func (e *listTooLongError) Error() string {
	return fmt.Sprintf("the request's %s lists hold more than %d elements in all; the limit is %d (limits.max_history_messages)", e.kind, e.most, e.most)
}

// boundLists returns a check (for decode) that the lists a body names by
// the members kinds (its messages, their tool calls and content parts, its
// tools), each kind counted in all wherever it appears, hold at most most
// elements, read token by token before anything is decoded: a list of
// tiny values costs per element far more than its bytes say (32 MiB of
// {"role":"user","content":"x"} took 450 MB decoded whole before its
// messages were counted). A body that is not JSON passes, for the decoder
// to say what is wrong with it. A body with fewer commas than most holds
// no list longer, and is not read twice.
func boundLists(most int, kinds ...string) func(body []byte) error {
	return func(body []byte) error {
		if bytes.Count(body, []byte{','}) < most {
			return nil
		}
		dec := jsontext.NewDecoder(bytes.NewReader(body))
		counts := make(map[string]int, len(kinds))
		open := map[int]string{} // the depth of each counted list open now, and its kind
		var name string          // the member whose value comes next
		for {
			depth := dec.StackDepth()
			at, length := dec.StackIndex(depth)
			if kind := open[depth]; at == '[' && kind != "" && dec.PeekKind() != ']' {
				if counts[kind]++; counts[kind] > most {
					return &listTooLongError{kind: kind, most: most}
				}
			}
			tok, err := dec.ReadToken()
			if err != nil {
				return nil
			}
			switch tok.Kind() {
			case '"':
				if at == '{' && length%2 == 0 {
					name = tok.String()
				}
			case '[':
				if slices.Contains(kinds, name) {
					open[dec.StackDepth()] = name
				}
				name = ""
			case ']':
				delete(open, depth)
			}
		}
	}
}
