// Package anthropicfake is an httptest server that speaks the Anthropic
// Messages API (POST /v1/messages, streaming and not, and GET /v1/models)
// closely enough that the real SDK cannot tell it from the real thing: the
// SSE event sequence, tool_use input split across input_json_delta events,
// thinking blocks with a signature it checks on replay, usage in
// message_start and message_delta, and the real refusal bodies.
//
// Wire format: https://docs.anthropic.com/en/docs/build-with-claude/streaming
// and https://docs.anthropic.com/en/api/messages; models list:
// https://docs.anthropic.com/en/api/models-list, one model or alias:
// https://docs.anthropic.com/en/api/models; error shapes:
// https://docs.anthropic.com/en/api/errors. Where a body is copied from a
// real answer, SOURCES.md names the issue it came from.
//
// A Server is safe for concurrent requests. Close it when done.
package anthropicfake

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/testkit"
)

// ModelEntry is one model the list returns, in Anthropic's own fields.
type ModelEntry struct {
	ID          string
	DisplayName string
	// MaxInputTokens is the input window (max_input_tokens).
	MaxInputTokens int
	// MaxTokens is the largest max_tokens the model accepts (max_tokens).
	MaxTokens int
	// Vision sets capabilities.image_input.supported.
	Vision bool
	// Aliases are other names GET /v1/models/{model_id} resolves to this
	// model ("claude-haiku-4-5" for "claude-haiku-4-5-20251001"); the list
	// never shows them.
	Aliases []string
}

// Options configures a Server. The zero value is a fake with no window
// limit that answers every request with a short fixed text.
type Options struct {
	// Window is the input window. A request whose counted input exceeds it
	// gets the real 400 "prompt is too long: N tokens > M maximum". 0: none.
	Window int
	// CountOutput makes the window cover input plus max_tokens, answered
	// with the real "input length and `max_tokens` exceed context limit"
	// body, as Anthropic did for older models.
	CountOutput bool
	// Script decides each answer; nil answers DefaultText.
	Script testkit.Script
	// Models is what GET /v1/models returns; nil returns one model,
	// DefaultModel, with Window (or 200000) as its max_input_tokens.
	Models []ModelEntry
	// Latency is the delay before the first byte.
	Latency time.Duration
	// PageSize caps the models page below the client's limit, so paging
	// can be tested with a few models. 0: the API's own cap (1000).
	PageSize int
}

// DefaultText is the answer when Options.Script is nil.
const DefaultText = "Hello from the Anthropic fake."

// RateLimitWaitSeconds is the retry-after a 429 answer carries.
const RateLimitWaitSeconds = 1

// DefaultModel is the model listed when Options.Models is nil.
const DefaultModel = "claude-fake-1"

// Server is a running fake.
type Server struct {
	opts Options
	srv  *httptest.Server
	log  testkit.Log
	seq  atomic.Int64
	// cache answers cache reads and writes by Anthropic's prompt-cache rule.
	cache testkit.PromptCache
}

// New starts a fake on a loopback port.
func New(opts Options) *Server {
	s := &Server{opts: opts}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.handleMessages)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /v1/models/{model_id}", s.handleModel)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found_error", "Not Found")
	})
	s.srv = httptest.NewServer(mux)
	return s
}

// URL is the base URL to configure the adapter with (no /v1 suffix: the
// SDK adds "v1/messages" itself).
func (s *Server) URL() string { return s.srv.URL }

// Requests returns every Messages request received so far, in order.
func (s *Server) Requests() []testkit.Received { return s.log.All() }

// Close stops the server and waits for its handlers.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Sign is the signature the fake gives a thinking text; a replayed thinking
// block must carry exactly this, as the real API refuses an edited one.
func Sign(thinking string) string {
	sum := sha256.Sum256([]byte("anthropicfake-thinking\x00" + thinking))
	return "Eq" + base64.StdEncoding.EncodeToString(sum[:])
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "could not read body")
		return
	}
	p, err := parseRequest(raw)
	if err != nil {
		// The real API's wording for a body that is not valid JSON is not
		// recorded here; the shape is the documented error shape.
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if p.problem == "" && s.tooLong(p.received) == "" {
		p.received.CachedTokens, p.received.CacheWriteTokens = s.cache.Anthropic(p.blocks)
	}
	s.log.Add(p.received)
	if !testkit.Sleep(r.Context(), s.opts.Latency, nil) {
		return
	}
	if p.problem != "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", p.problem)
		return
	}
	if msg := s.tooLong(p.received); msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	reply := testkit.Reply{Text: DefaultText}
	if s.opts.Script != nil {
		reply = s.opts.Script(p.received)
	}
	s.answer(w, r, p, reply)
}

// tooLong returns the real refusal message when the request does not fit,
// "" when it does. Wordings: SOURCES.md (A015, A033).
func (s *Server) tooLong(r testkit.Received) string {
	win := s.opts.Window
	if win <= 0 {
		return ""
	}
	if r.InputTokens > win {
		return fmt.Sprintf("prompt is too long: %d tokens > %d maximum", r.InputTokens, win)
	}
	if s.opts.CountOutput && r.InputTokens+r.MaxTokens > win {
		return fmt.Sprintf("input length and `max_tokens` exceed context limit: %d + %d > %d, decrease input length or `max_tokens` and try again", r.InputTokens, r.MaxTokens, win)
	}
	return ""
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, p parsed, reply testkit.Reply) {
	switch {
	case reply.Hang:
		<-r.Context().Done()
	case reply.Status != 0 && reply.Status/100 != 2:
		writeRaw(w, reply.Status, reply.Body)
	case !p.wire.Stream:
		s.writeMessage(w, p, reply)
	default:
		s.stream(w, r, p, reply)
	}
}

func (s *Server) nextID(prefix string) string {
	return fmt.Sprintf("%s_fake%06d", prefix, s.seq.Add(1))
}
