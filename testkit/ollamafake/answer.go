package ollamafake

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/agentd/agentd/testkit"
)

// fixedTime keeps created_at and modified_at stable across runs.
var fixedTime = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// Plausible durations for the final chunk, in nanoseconds as Ollama sends.
const (
	loadDuration       = 2_154_458 * time.Nanosecond
	promptEvalDuration = 383_809_000 * time.Nanosecond
	evalDuration       = 4_799_921_000 * time.Nanosecond
)

// answer renders one scripted reply in Ollama's shapes.
type answer struct {
	model      string
	reply      testkit.Reply
	promptEval int // input tokens Ollama read (after any silent cut)
}

// chunks is the reply as streamed: thinking pieces, content pieces, one
// chunk per tool call, then the final chunk.
func (a answer) chunks() []api.ChatResponse {
	var out []api.ChatResponse
	piece := func(m api.Message) api.ChatResponse {
		m.Role = "assistant"
		return api.ChatResponse{Model: a.model, CreatedAt: fixedTime, Message: m}
	}
	size := a.reply.ChunkRunes
	if size <= 0 {
		size = 4
	}
	for _, t := range testkit.Chunks(a.reply.Thinking, size) {
		out = append(out, piece(api.Message{Thinking: t}))
	}
	for _, t := range testkit.Chunks(a.reply.Text, size) {
		out = append(out, piece(api.Message{Content: t}))
	}
	for _, tc := range a.toolCalls() {
		out = append(out, piece(api.Message{ToolCalls: []api.ToolCall{tc}}))
	}
	final := piece(api.Message{})
	final.Done = true
	final.DoneReason = a.doneReason()
	final.Metrics = a.metrics()
	return append(out, final)
}

// toolCalls carries the scripted calls; an ID is sent only when the script
// gives one (newer Ollama names calls, older ones do not).
func (a answer) toolCalls() []api.ToolCall {
	var calls []api.ToolCall
	for i, tc := range a.reply.ToolCalls {
		args := api.NewToolCallFunctionArguments()
		if tc.Arguments != "" {
			if err := json.Unmarshal([]byte(tc.Arguments), &args); err != nil {
				args = api.NewToolCallFunctionArguments()
			}
		}
		calls = append(calls, api.ToolCall{ID: tc.ID, Function: api.ToolCallFunction{Index: i, Name: tc.Name, Arguments: args}})
	}
	return calls
}

// doneReason is Ollama's: "stop" (also after tool calls) or "length".
func (a answer) doneReason() string {
	switch a.reply.Finish {
	case "", "tool_calls":
		return "stop"
	default:
		return a.reply.Finish
	}
}

func (a answer) metrics() api.Metrics {
	in, out := a.promptEval, a.outputTokens()
	if u := a.reply.Usage; u != nil {
		in, out = u.InputTokens, u.OutputTokens
	}
	return api.Metrics{
		TotalDuration:      loadDuration + promptEvalDuration + evalDuration,
		LoadDuration:       loadDuration,
		PromptEvalCount:    in,
		PromptEvalDuration: promptEvalDuration,
		EvalCount:          out,
		EvalDuration:       evalDuration,
	}
}

// outputTokens counts the answer: text, thinking and tool calls.
func (a answer) outputTokens() int {
	n := testkit.CountTokens(a.reply.Text) + testkit.CountTokens(a.reply.Thinking)
	for _, tc := range a.reply.ToolCalls {
		n += testkit.CountTokens(tc.Name) + testkit.CountTokens(tc.Arguments)
	}
	return n
}

// stream writes NDJSON, one flushed line per chunk, honouring StreamError
// (an {"error"} line in place of the final chunk) and CutAfterChunks (the
// connection dropped after that many lines).
func (a answer) stream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	chunks := a.chunks()
	for i, c := range chunks {
		if a.reply.CutAfterChunks > 0 && i == a.reply.CutAfterChunks {
			cut(w)
			return
		}
		if a.reply.StreamError != "" && c.Done {
			line, _ := json.Marshal(map[string]string{"error": a.reply.StreamError})
			w.Write(append(line, '\n'))
			return
		}
		line, _ := json.Marshal(c)
		w.Write(append(line, '\n'))
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// whole writes the stream:false answer: one object with the whole message.
// Ollama answers a failure there with 500 and an {"error"} body.
func (a answer) whole(w http.ResponseWriter) {
	if a.reply.StreamError != "" {
		b, _ := json.Marshal(map[string]string{"error": a.reply.StreamError})
		writeJSON(w, http.StatusInternalServerError, string(b))
		return
	}
	final := a.chunks()
	last := final[len(final)-1]
	last.Message.Content = a.reply.Text
	last.Message.Thinking = a.reply.Thinking
	last.Message.ToolCalls = a.toolCalls()
	b, _ := json.Marshal(last)
	writeJSON(w, http.StatusOK, string(b))
}

// cut drops the connection mid-body, as a crashed server or proxy would.
func cut(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return // HTTP/2 only; the body then ends without its final chunk
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	conn.Close()
}

// errorBody is Ollama's error shape, {"error": msg}.
func errorBody(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(body))
}

// canonical names a model as Ollama lists it: no tag means ":latest".
func canonical(model string) string {
	slash := strings.LastIndex(model, "/")
	if !strings.Contains(model[slash+1:], ":") {
		return model + ":latest"
	}
	return model
}

// contextLength reads "<arch>.context_length" from model_info, 0 if absent.
func contextLength(info map[string]any) int {
	arch, _ := info["general.architecture"].(string)
	switch v := info[arch+".context_length"].(type) {
	case float64:
		return int(v)
	case int:
		return v
	}
	return 0
}

func optionInt(opts map[string]any, key string) int {
	switch v := opts[key].(type) {
	case float64:
		return int(v)
	case int:
		return v
	}
	return 0
}

func details(m ModelEntry) map[string]any {
	return map[string]any{
		"parent_model": "", "format": "gguf", "family": m.Family, "families": []string{m.Family},
		"parameter_size": m.ParameterSize, "quantization_level": m.QuantizationLevel,
	}
}

// digest is a stable stand-in for the model's manifest digest.
func digest(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:])
}

// ModelFromShow builds a ModelEntry from a real /api/show body, so tests can
// serve a recorded model's shape. size is its /api/tags size in bytes.
func ModelFromShow(name string, size int64, showBody []byte) (ModelEntry, error) {
	var show struct {
		Details struct {
			Family            string `json:"family"`
			ParameterSize     string `json:"parameter_size"`
			QuantizationLevel string `json:"quantization_level"`
		} `json:"details"`
		ModelInfo    map[string]any `json:"model_info"`
		Capabilities []string       `json:"capabilities"`
	}
	if err := json.Unmarshal(showBody, &show); err != nil {
		return ModelEntry{}, fmt.Errorf("ollamafake: show body for %s: %w", name, err)
	}
	return ModelEntry{
		Name: name, Size: size, Family: show.Details.Family,
		ParameterSize: show.Details.ParameterSize, QuantizationLevel: show.Details.QuantizationLevel,
		ModelInfo: show.ModelInfo, Capabilities: show.Capabilities,
	}, nil
}
