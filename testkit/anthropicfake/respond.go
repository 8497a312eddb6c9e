package anthropicfake

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
)

// block is one content block of an answer.
type block struct {
	kind string // "thinking", "text" or "tool_use"
	text string // thinking or text
	call chat.ToolCall
}

// blocksFor lays out a reply as Claude does: thinking first, then text,
// then one tool_use block per call.
func (s *Server) blocksFor(reply testkit.Reply) []block {
	var bs []block
	if reply.Thinking != "" {
		bs = append(bs, block{kind: "thinking", text: reply.Thinking})
	}
	if reply.Text != "" {
		bs = append(bs, block{kind: "text", text: reply.Text})
	}
	for _, c := range reply.ToolCalls {
		if c.ID == "" {
			c.ID = s.nextID("toolu")
		}
		if strings.TrimSpace(c.Arguments) == "" {
			c.Arguments = "{}"
		}
		bs = append(bs, block{kind: "tool_use", call: c})
	}
	return bs
}

// stopReason maps the neutral finish names to Anthropic's stop_reason;
// other values pass through so a test can send pause_turn or refusal.
func stopReason(reply testkit.Reply) string {
	if reply.Refusal != "" {
		return "refusal"
	}
	switch reply.Finish {
	case "":
		if len(reply.ToolCalls) > 0 {
			return "tool_use"
		}
		return "end_turn"
	case "stop":
		return "end_turn"
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	case "content_filter":
		return "refusal"
	default:
		return reply.Finish
	}
}

// stopDetails is what comes with stop_reason "refusal"
// (https://docs.anthropic.com/en/docs/test-and-evaluate/strengthen-guardrails/handle-streaming-refusals):
// an object always, its category and explanation null when the refusal
// names none; reply.Refusal is the explanation. Nil for any other stop.
func stopDetails(reply testkit.Reply) any {
	if stopReason(reply) != "refusal" {
		return nil
	}
	var explanation any
	if reply.Refusal != "" {
		explanation = reply.Refusal
	}
	return map[string]any{"type": "refusal", "category": nil, "explanation": explanation}
}

// usage is what an answer reports: Anthropic's input_tokens is the part
// neither read from nor written to the prompt cache.
type usage struct {
	chat.Usage
	cacheWrite int
}

// usageFor counts the answer: input as counted on arrival, output over
// every generated text (thinking, text and tool arguments).
func usageFor(r testkit.Received, reply testkit.Reply) usage {
	if reply.Usage != nil {
		return usage{Usage: *reply.Usage}
	}
	out := count(reply.Thinking) + count(reply.Text)
	for _, c := range reply.ToolCalls {
		out += count(c.Arguments)
	}
	return usage{Usage: chat.Usage{InputTokens: r.InputTokens - r.CachedTokens - r.CacheWriteTokens, OutputTokens: out, CachedTokens: r.CachedTokens}, cacheWrite: r.CacheWriteTokens}
}

func wireUsage(u usage, output int) map[string]any {
	return map[string]any{
		"input_tokens":                u.InputTokens,
		"cache_creation_input_tokens": u.cacheWrite,
		"cache_read_input_tokens":     u.CachedTokens,
		"output_tokens":               output,
	}
}

func (s *Server) messageShell(p parsed) map[string]any {
	return map[string]any{
		"id":            s.nextID("msg"),
		"type":          "message",
		"role":          "assistant",
		"model":         p.wire.Model,
		"content":       []any{},
		"stop_reason":   nil,
		"stop_sequence": nil,
	}
}

// writeMessage answers a request without "stream": true.
func (s *Server) writeMessage(w http.ResponseWriter, p parsed, reply testkit.Reply) {
	if reply.Garbage {
		writeRaw(w, http.StatusOK, garbage)
		return
	}
	if reply.StreamError != "" {
		// Without a stream the same fault comes back as an error status.
		writeRaw(w, http.StatusInternalServerError, errorJSON(reply.StreamError))
		return
	}
	u := usageFor(p.received, reply)
	msg := s.messageShell(p)
	var content []any
	for _, b := range s.blocksFor(reply) {
		content = append(content, fullBlock(b))
	}
	if content == nil {
		content = []any{}
	}
	msg["content"] = content
	msg["stop_reason"] = stopReason(reply)
	msg["stop_details"] = stopDetails(reply)
	msg["usage"] = wireUsage(u, u.OutputTokens)
	writeJSON(w, http.StatusOK, msg)
}

func fullBlock(b block) map[string]any {
	switch b.kind {
	case "thinking":
		return map[string]any{"type": "thinking", "thinking": b.text, "signature": Sign(b.text)}
	case "text":
		return map[string]any{"type": "text", "text": b.text}
	default:
		return map[string]any{"type": "tool_use", "id": b.call.ID, "name": b.call.Name, "input": json.RawMessage(b.call.Arguments)}
	}
}

// startBlock is the content_block_start form: empty text, empty input.
func startBlock(b block) map[string]any {
	switch b.kind {
	case "thinking":
		return map[string]any{"type": "thinking", "thinking": "", "signature": ""}
	case "text":
		return map[string]any{"type": "text", "text": ""}
	default:
		return map[string]any{"type": "tool_use", "id": b.call.ID, "name": b.call.Name, "input": map[string]any{}}
	}
}

// deltas are the content_block_delta payloads of one block: text and
// thinking in ChunkRunes pieces, the signature whole at the end, tool input
// as an empty partial_json followed by pieces (as the real stream does).
func deltas(b block, chunk int) []map[string]any {
	var out []map[string]any
	switch b.kind {
	case "thinking":
		for _, piece := range testkit.Chunks(b.text, chunk) {
			out = append(out, map[string]any{"type": "thinking_delta", "thinking": piece})
		}
		out = append(out, map[string]any{"type": "signature_delta", "signature": Sign(b.text)})
	case "text":
		for _, piece := range testkit.Chunks(b.text, chunk) {
			out = append(out, map[string]any{"type": "text_delta", "text": piece})
		}
	default:
		out = append(out, map[string]any{"type": "input_json_delta", "partial_json": ""})
		for _, piece := range testkit.Chunks(b.call.Arguments, chunk) {
			out = append(out, map[string]any{"type": "input_json_delta", "partial_json": piece})
		}
	}
	return out
}

// garbage is what a broken proxy might send instead of the protocol.
const garbage = "<html><body><h1>502 Bad Gateway</h1></body></html>\n" +
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\n\n"

func errorJSON(msg string) string {
	t := strings.TrimSpace(msg)
	if strings.HasPrefix(t, "{") {
		return t
	}
	// A bare message is wrapped as the error Anthropic most often sends
	// mid-stream (https://docs.anthropic.com/en/docs/build-with-claude/streaming#error-events).
	b, _ := marshal(map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": msg}})
	return string(b)
}

// writeError writes the documented error shape
// {"type":"error","error":{"type":T,"message":M},"request_id":...}.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": msg},
		"request_id": "req_fake",
	})
}

// writeJSON writes v as the API does: "<", ">" and "&" literal, not
// \u003e as encoding/json would ("tokens > 200000 maximum").
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeRaw(w, status, string(b))
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeRaw sends body verbatim. Retryable statuses carry the header the
// real API sends with them (x-should-retry, anthropics/anthropic-sdk-typescript#616),
// and a 429 the seconds to wait before trying again, retry-after
// (https://docs.anthropic.com/en/api/rate-limits).
func writeRaw(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("request-id", "req_fake")
	if status == http.StatusTooManyRequests || status >= 500 {
		h.Set("x-should-retry", "true")
	}
	if status == http.StatusTooManyRequests {
		h.Set("retry-after", strconv.Itoa(RateLimitWaitSeconds))
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// handleModels serves GET /v1/models with its documented paging: limit
// (default 20, at most 1000) and after_id; has_more, first_id, last_id.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	models := s.models()
	limit := 20
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v > 0 {
		limit = min(v, 1000)
	}
	if s.opts.PageSize > 0 {
		limit = min(limit, s.opts.PageSize)
	}
	start := 0
	if after := r.URL.Query().Get("after_id"); after != "" {
		for i, m := range models {
			if m.ID == after {
				start = i + 1
			}
		}
	}
	end := min(start+limit, len(models))
	page := models[start:end]
	data := make([]any, 0, len(page))
	for _, m := range page {
		data = append(data, modelInfo(m))
	}
	body := map[string]any{"data": data, "has_more": end < len(models), "first_id": nil, "last_id": nil}
	if len(page) > 0 {
		body["first_id"] = page[0].ID
		body["last_id"] = page[len(page)-1].ID
	}
	writeJSON(w, http.StatusOK, body)
}

// handleModel serves GET /v1/models/{model_id}, which takes a model's id or
// one of its aliases and answers the model under its own id
// (https://docs.anthropic.com/en/api/models: "resolve a model alias to a
// model ID").
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	want := r.PathValue("model_id")
	for _, m := range s.models() {
		if m.ID == want || slices.Contains(m.Aliases, want) {
			writeJSON(w, http.StatusOK, modelInfo(m))
			return
		}
	}
	writeError(w, http.StatusNotFound, "not_found_error", "model: "+want)
}

// models is Options.Models, or the one default model.
func (s *Server) models() []ModelEntry {
	if s.opts.Models != nil {
		return s.opts.Models
	}
	win := s.opts.Window
	if win <= 0 {
		win = 200_000
	}
	return []ModelEntry{{ID: DefaultModel, DisplayName: "Claude Fake 1", MaxInputTokens: win, MaxTokens: 64_000, Vision: true}}
}

// modelInfo is one model as the list and GET /v1/models/{model_id} show it.
func modelInfo(m ModelEntry) map[string]any {
	return map[string]any{
		"type":             "model",
		"id":               m.ID,
		"display_name":     m.DisplayName,
		"created_at":       "2025-10-01T00:00:00Z",
		"max_input_tokens": m.MaxInputTokens,
		"max_tokens":       m.MaxTokens,
		"capabilities":     map[string]any{"image_input": map[string]any{"supported": m.Vision}},
	}
}
