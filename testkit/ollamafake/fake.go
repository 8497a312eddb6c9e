// Package ollamafake is an httptest server that speaks Ollama's native API
// (/api/chat streaming NDJSON and not, /api/show, /api/tags, /api/ps) the way
// a real Ollama does, so the ollama adapter is tested exactly as it runs.
//
// Wire format, from Ollama's API reference
// (https://github.com/ollama/ollama/blob/main/docs/api.md and
// https://docs.ollama.com/api-reference/show-model-details) and its server
// source (github.com/ollama/ollama v0.17.4, server/routes.go, server/prompt.go,
// runner/ollamarunner/runner.go): one JSON object per line with
// message.content / message.thinking pieces and done:false; tool calls whole,
// one chunk each, with empty content; a final done:true chunk carrying
// done_reason, prompt_eval_count, eval_count and the durations; an error
// after HTTP 200 arrives as an {"error": "..."} line.
//
// Like the real server, an over-long prompt is NOT refused: its oldest
// messages are dropped (system messages and the last message kept), then the
// front of what is left is cut, and the answer comes with HTTP 200 and a
// prompt_eval_count of what was kept, at most num_ctx. Only a request with
// "truncate": false gets Ollama's real 400 refusal.
//
// A Server is safe for concurrent use. Close it when done.
package ollamafake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
)

// Real Ollama bodies (github.com/ollama/ollama v0.17.4).
const (
	// runner/ollamarunner/runner.go errorInputTooLong, sent as 400 by
	// server/routes.go ChatHandler when the request says "truncate": false.
	bodyTooLong = `{"error":"the input length exceeds the context length"}`
	// server/routes.go handleScheduleError, 404 for a model not pulled
	// (the message; errorBody wraps it as gin.H{"error": ...} does).
	msgChatNotFound = "model %q not found, try pulling it first"
	// server/routes.go ShowHandler, 404.
	msgShowNotFound = "model '%s' not found"
)

// defaultNumCtx is the window a request without options.num_ctx gets (the
// smallest of Ollama's memory-based defaults, "4k/32k/256k based on VRAM").
const defaultNumCtx = 4096

// defaultText answers a request when no Script is given.
const defaultText = "OK, noted."

// ModelEntry is one model the fake serves.
type ModelEntry struct {
	Name              string // as /api/tags lists it, e.g. "llama3.2:3b"
	Size              int64  // weights on disk, /api/tags "size"
	Family            string // details.family
	ParameterSize     string // details.parameter_size, e.g. "3.2B"
	QuantizationLevel string // details.quantization_level, e.g. "Q4_K_M"
	// ModelInfo is /api/show model_info: "general.architecture",
	// "<arch>.context_length", "<arch>.block_count", ...
	ModelInfo    map[string]any
	Capabilities []string // "completion", "tools", "thinking", "vision"
	Loaded       bool     // in /api/ps before any chat
}

// Options configures a Server.
type Options struct {
	// Window caps the window in effect: num_ctx (or 4096 when the request
	// sends none) above it is lowered to it, as Ollama lowers num_ctx to the
	// model's trained length. 0: the model's <arch>.context_length, if any.
	Window int
	// Script decides each reply; nil answers a short fixed text.
	Script testkit.Script
	// Models are what /api/tags, /api/show and /api/ps describe. Empty: any
	// model name is served and the list endpoints are empty.
	Models []ModelEntry
	// Latency is slept before the first byte (0 for benchmarks).
	Latency time.Duration
}

// Server is a running fake.
type Server struct {
	opts Options
	ts   *httptest.Server
	log  testkit.Log

	mu     sync.Mutex
	loaded map[string]int // model → the num_ctx it is loaded with
	loads  map[string]int // model → how many times it was (re)loaded
}

// New starts a fake Ollama on a loopback port.
func New(opts Options) *Server {
	s := &Server{opts: opts, loaded: map[string]int{}, loads: map[string]int{}}
	for _, m := range opts.Models {
		if m.Loaded {
			s.loaded[canonical(m.Name)] = defaultNumCtx
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/chat", s.handleChat)
	mux.HandleFunc("POST /api/show", s.handleShow)
	mux.HandleFunc("GET /api/tags", s.handleTags)
	mux.HandleFunc("GET /api/ps", s.handlePs)
	s.ts = httptest.NewServer(mux)
	return s
}

// URL is the base URL to configure the adapter with.
func (s *Server) URL() string { return s.ts.URL }

// Requests returns every chat request received so far.
func (s *Server) Requests() []testkit.Received { return s.log.All() }

// Loads says how many times a model was loaded: once at first use, and once
// more every time a request asks for a different num_ctx (a real Ollama
// reloads the model then, which is what agentd must avoid).
func (s *Server) Loads(model string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads[canonical(model)]
}

// Close shuts the server down, dropping open connections.
func (s *Server) Close() {
	s.ts.CloseClientConnections()
	s.ts.Close()
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	var req api.ChatRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		// Ollama (gin) answers a body it cannot decode with 400.
		writeJSON(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	entry, known := s.model(req.Model)
	if !known && len(s.opts.Models) > 0 {
		writeJSON(w, http.StatusNotFound, errorBody(fmt.Sprintf(msgChatNotFound, req.Model)))
		return
	}
	rec := received(&req, raw)
	s.log.Add(rec)
	reply := testkit.Reply{Text: defaultText}
	if s.opts.Script != nil {
		reply = s.opts.Script(rec)
	}
	if !testkit.Sleep(r.Context(), s.opts.Latency, nil) {
		return
	}
	// Ollama loads the model before it runs anything, so /api/ps shows it
	// even when the request then hangs or fails.
	window := s.window(entry, rec.NumCtx)
	s.load(req.Model, window)
	if reply.Hang {
		<-r.Context().Done()
		return
	}
	if reply.Status != 0 {
		writeJSON(w, reply.Status, reply.Body)
		return
	}
	kept := keptTokens(&req, window)
	if kept < rec.InputTokens && req.Truncate != nil && !*req.Truncate {
		writeJSON(w, http.StatusBadRequest, bodyTooLong)
		return
	}
	if reply.Garbage {
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, "<html><body>502 Bad Gateway</body></html>\nnot json either\n")
		return
	}
	a := answer{model: req.Model, reply: reply, promptEval: kept}
	if req.Stream != nil && !*req.Stream {
		a.whole(w)
		return
	}
	a.stream(w)
}

// window is the context in effect for a request: num_ctx (or the default)
// capped by Options.Window or the model's own context length.
func (s *Server) window(entry ModelEntry, numCtx int) int {
	n := numCtx
	if n <= 0 {
		n = defaultNumCtx
	}
	limit := s.opts.Window
	if limit <= 0 {
		limit = contextLength(entry.ModelInfo)
	}
	if limit > 0 && n > limit {
		n = limit
	}
	return n
}

// load records the model as loaded with this window, counting a reload when
// the window changed.
func (s *Server) load(model string, window int) {
	key := canonical(model)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.loaded[key]; !ok || n != window {
		s.loads[key]++
	}
	s.loaded[key] = window
}

func (s *Server) model(name string) (ModelEntry, bool) {
	key := canonical(name)
	for _, m := range s.opts.Models {
		if canonical(m.Name) == key {
			return m, true
		}
	}
	return ModelEntry{}, false
}

func (s *Server) handleShow(w http.ResponseWriter, r *http.Request) {
	var req api.ShowRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	name := req.Model
	if name == "" {
		//lint:ignore SA1019 older clients still send "name"; Ollama accepts it, and so does its fake
		name = req.Name
	}
	m, ok := s.model(name)
	if !ok {
		writeJSON(w, http.StatusNotFound, errorBody(fmt.Sprintf(msgShowNotFound, name)))
		return
	}
	body, _ := json.Marshal(map[string]any{
		"details":      details(m),
		"model_info":   m.ModelInfo,
		"capabilities": m.Capabilities,
		"modified_at":  fixedTime.Format(time.RFC3339Nano),
	})
	writeJSON(w, http.StatusOK, string(body))
}

func (s *Server) handleTags(w http.ResponseWriter, _ *http.Request) {
	models := make([]map[string]any, 0, len(s.opts.Models))
	for _, m := range s.opts.Models {
		models = append(models, map[string]any{
			"name": m.Name, "model": m.Name, "modified_at": fixedTime.Format(time.RFC3339Nano),
			"size": m.Size, "digest": digest(m.Name), "details": details(m),
		})
	}
	body, _ := json.Marshal(map[string]any{"models": models})
	writeJSON(w, http.StatusOK, string(body))
}

func (s *Server) handlePs(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	models := []map[string]any{}
	for _, m := range s.opts.Models {
		n, ok := s.loaded[canonical(m.Name)]
		if !ok {
			continue
		}
		models = append(models, map[string]any{
			"name": m.Name, "model": m.Name, "size": m.Size, "digest": digest(m.Name),
			"details": details(m), "expires_at": fixedTime.Add(5 * time.Minute).Format(time.RFC3339Nano),
			"size_vram": m.Size, "context_length": n,
		})
	}
	body, _ := json.Marshal(map[string]any{"models": models})
	writeJSON(w, http.StatusOK, string(body))
}

// received turns Ollama's request into the protocol-neutral record.
func received(req *api.ChatRequest, raw []byte) testkit.Received {
	rec := testkit.Received{Model: req.Model, Raw: raw}
	rec.NumCtx = optionInt(req.Options, "num_ctx")
	rec.MaxTokens = optionInt(req.Options, "num_predict")
	var system []string
	for _, m := range req.Messages {
		rec.InputTokens += messageTokens(m)
		if m.Role == "system" {
			system = append(system, m.Content)
			continue
		}
		cm := chat.Message{Role: chat.Role(m.Role), Content: m.Content, Thinking: m.Thinking,
			ToolName: m.ToolName, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments.String()})
		}
		for _, img := range m.Images {
			cm.Images = append(cm.Images, chat.Image{Data: img})
		}
		rec.Messages = append(rec.Messages, cm)
	}
	rec.System = strings.Join(system, "\n\n")
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Function.Name)
		rec.InputTokens += toolTokens(t)
	}
	return rec
}

// messageTokens counts every text a message carries.
func messageTokens(m api.Message) int {
	n := testkit.CountTokens(m.Content) + testkit.CountTokens(m.Thinking)
	for _, tc := range m.ToolCalls {
		n += testkit.CountTokens(tc.Function.Name) + testkit.CountTokens(tc.Function.Arguments.String())
	}
	return n
}

// toolTokens counts a tool's whole schema as sent.
func toolTokens(t api.Tool) int {
	b, _ := json.Marshal(t)
	return testkit.CountTokens(string(b))
}

// keptTokens is what Ollama reads of a request in a window: like
// chatPrompt, drop messages from the front (keeping system messages and the
// last message) until the rest fits; then, like the runner, cut the front of
// what is left to the window.
func keptTokens(req *api.ChatRequest, window int) int {
	tools := 0
	for _, t := range req.Tools {
		tools += toolTokens(t)
	}
	msgs := req.Messages
	for i := range msgs {
		n := tools
		for j, m := range msgs {
			if j >= i || m.Role == "system" {
				n += messageTokens(m)
			}
		}
		if n <= window || i == len(msgs)-1 {
			return min(n, window)
		}
	}
	return min(tools, window)
}
