// Package ollama is agentd's adapter for Ollama's native API: one streamed
// /api/chat call per turn, and the models a server has with the window agentd
// asks each to load (/api/tags, /api/show, /api/ps). It sizes num_ctx from the
// model's own shape and the machine's memory (SizeWindow), sends the same
// number for a model every time so Ollama never reloads it, and turns
// Ollama's silent cutting of an over-long prompt into a "too long" refusal.
//
// A Client is safe for concurrent use; its configuration never changes after
// New. Stream calls emit on the caller's goroutine and returns when the
// stream ends or ctx is done.
package ollama

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// DefaultBaseURL is where a local Ollama listens unless told otherwise.
const DefaultBaseURL = "http://127.0.0.1:11434"

// ErrIncompleteStream means the stream ended without Ollama's final
// done:true chunk: the connection was cut, or the server died mid-answer.
var ErrIncompleteStream = errors.New("stream ended before the final chunk")

// Config configures one Ollama server.
type Config struct {
	// Name is the provider name agentd knows this server by. Optional.
	// Defaults to "ollama".
	Name string
	// BaseURL is the server's address. Optional. Defaults to DefaultBaseURL.
	BaseURL string
	// Models limits Models() to these names. Optional. Defaults to every
	// model /api/tags lists.
	Models []string
	// Windows fixes num_ctx for a model, skipping sizing. Optional.
	Windows map[string]int
	// MemoryBytes is the memory sizing may plan with. Optional. Defaults to
	// the machine's total memory (8 GiB when it cannot be read).
	MemoryBytes uint64
	// HTTPClient carries the requests. Optional. Defaults to a client with
	// no overall timeout: a turn's context bounds each call instead.
	HTTPClient *http.Client
	// NoTruncate sends "truncate": false, so an Ollama that knows the field
	// refuses an over-long prompt with 400 instead of cutting its front.
	// Optional. Defaults to false (Ollama's own default, cutting silently,
	// which Stream detects). Detection stays on either way, for servers that
	// ignore the field.
	NoTruncate bool
}

// Client is one configured Ollama server.
type Client struct {
	name string
	api  *api.Client
	// lists asks for the model lists (/api/tags, /api/ps, /api/show), whose
	// answers the SDK reads whole: each is bounded by providers.MaxListBytes.
	lists      *api.Client
	models     []string
	fixed      map[string]int
	mem        uint64
	noTruncate bool

	mu    sync.Mutex
	known map[string]modelFacts // per model, sized once and then reused
}

// modelFacts is what the client learned of a model from /api/show.
type modelFacts struct {
	window int
	source string
	vision bool
}

// assumedMemory is what sizing plans with when the machine will not say:
// small enough to keep the conservative 16K floor.
const assumedMemory = 8 << 30

// New builds a Client. It does no I/O except reading the machine's memory
// size when cfg.MemoryBytes is 0.
func New(cfg Config) (*Client, error) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("ollama: base url %q: must be absolute (scheme and host)", base)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	name := cfg.Name
	if name == "" {
		name = "ollama"
	}
	mem := cfg.MemoryBytes
	if mem == 0 {
		if mem = totalMemory(); mem == 0 {
			mem = assumedMemory
		}
	}
	fixed := make(map[string]int, len(cfg.Windows))
	for m, n := range cfg.Windows {
		fixed[canonical(m)] = n
	}
	lc := *hc
	lc.Transport = listTransport{base: hc.Transport}
	cc := *hc
	cc.Transport = statusTransport{base: hc.Transport}
	return &Client{
		name:       name,
		api:        api.NewClient(u, &cc),
		lists:      api.NewClient(u, &lc),
		models:     append([]string(nil), cfg.Models...),
		fixed:      fixed,
		mem:        mem,
		noTruncate: cfg.NoTruncate,
		known:      make(map[string]modelFacts),
	}, nil
}

// Stream sends one chat request and streams the answer. num_ctx is
// req.NumCtx when set, else the model's sized window (the same number on
// every call). When Ollama silently cut the prompt (see silentTruncation),
// the answer is returned together with a *providers.Error{TooLong: true}: the
// events were already emitted, and the caller must treat the turn as refused
// for length, not store the answer as a reply.
func (c *Client) Stream(ctx context.Context, req providers.Request, emit func(providers.Event)) (providers.Response, error) {
	if req.Model == "" {
		return providers.Response{}, &providers.Error{Provider: c.name, Err: errors.New("request names no model")}
	}
	numCtx := req.NumCtx
	if numCtx <= 0 {
		numCtx, _ = c.windowFor(ctx, req.Model, -1)
	}
	creq, err := c.chatRequest(req, numCtx)
	if err != nil {
		return providers.Response{}, &providers.Error{Provider: c.name, Err: err}
	}
	acc := newAccumulator(req, emit)
	status := 0
	if err := c.api.Chat(context.WithValue(ctx, statusKey{}, &status), creq, acc.add); err != nil {
		if acc.budget.Over() {
			resp := acc.response()
			resp.Message.Partial = true
			return resp, acc.budget.Err(c.name)
		}
		if terr := c.overWindow(ctx, req, numCtx, err); terr != nil {
			return acc.response(), terr
		}
		return acc.response(), c.wrap(ctx, "chat", err)
	}
	if !acc.done {
		// The api client stops quietly when the body ends early; only the
		// missing final chunk tells a cut stream from a finished one.
		if ctx.Err() != nil {
			return acc.response(), c.wrap(ctx, "chat", ctx.Err())
		}
		if status >= http.StatusBadRequest {
			// An error status with an empty body (a proxy in front: Caddy
			// answers 502 when Ollama is down, 401 for a missing login),
			// which the api client passes over in silence.
			return acc.response(), c.classified(status, "", fmt.Errorf("chat %s: %d %s with an empty body", req.Model, status, http.StatusText(status)))
		}
		return acc.response(), &providers.Error{Provider: c.name, Status: http.StatusOK, Retryable: true, Err: fmt.Errorf("chat %s: %w", req.Model, ErrIncompleteStream)}
	}
	resp := acc.response()
	if terr := silentTruncation(c.name, req.EstimatedInput, c.effectiveWindow(ctx, req, numCtx, resp.Usage.InputTokens), resp.Usage.InputTokens); terr != nil {
		return resp, terr
	}
	return resp, nil
}

// effectiveWindow is the window the server really ran with. Ollama lowers a
// num_ctx above the model's trained length without a word, so when the
// count it reports is clearly under the estimate (a cut, or only a cache
// hit), /api/ps is asked what the loaded model holds.
func (c *Client) effectiveWindow(ctx context.Context, req providers.Request, numCtx, reported int) int {
	if req.EstimatedInput <= 0 || reported*100 >= req.EstimatedInput*reportedSharePct {
		return numCtx
	}
	if running := c.runningWindow(ctx, req.Model); running > 0 {
		return min(numCtx, running)
	}
	return numCtx
}

// psTimeout bounds the /api/ps question asked after a failed request.
const psTimeout = 5 * time.Second

// overWindow turns the failure of a request agentd estimated longer than
// the window the server runs into a "too long" refusal. Ollama cuts such a
// prompt, and the cut prompt can then hang the runner and end in a 500
// (seen on 0.17.4 with window 65536 configured for a model run at 32768):
// that is the server refusing for length, and every later, longer turn
// would fail the same way unless the window is learned. It asks /api/ps on
// a context of its own, since ctx may be the one a hang ended.
func (c *Client) overWindow(ctx context.Context, req providers.Request, numCtx int, cause error) *providers.Error {
	if req.EstimatedInput <= 0 {
		return nil
	}
	psCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), psTimeout)
	defer cancel()
	w := numCtx
	if running := c.runningWindow(psCtx, req.Model); running > 0 && (w <= 0 || running < w) {
		w = running
	}
	if w <= 0 || req.EstimatedInput <= w {
		return nil
	}
	pe := c.wrap(ctx, "chat", cause)
	pe.TooLong, pe.Retryable, pe.Window, pe.Requested = true, false, w, req.EstimatedInput
	pe.Body = fmt.Sprintf("about %d input tokens sent to a model the server runs with a window of %d, and the request failed: %v",
		req.EstimatedInput, w, cause)
	return pe
}

// chatRequest translates a provider-neutral request into Ollama's.
func (c *Client) chatRequest(req providers.Request, numCtx int) (*api.ChatRequest, error) {
	msgs, err := toAPIMessages(req.System, req.Messages)
	if err != nil {
		return nil, err
	}
	tools, err := toAPITools(req.Tools)
	if err != nil {
		return nil, err
	}
	opts := map[string]any{"num_ctx": numCtx}
	if req.MaxTokens > 0 {
		opts["num_predict"] = req.MaxTokens
	}
	st := req.Settings
	if st.Temperature != nil {
		opts["temperature"] = *st.Temperature
	}
	if st.TopP != nil {
		opts["top_p"] = *st.TopP
	}
	if len(st.Stop) > 0 {
		opts["stop"] = st.Stop
	}
	stream := true
	creq := &api.ChatRequest{Model: req.Model, Messages: msgs, Tools: tools, Options: opts, Stream: &stream}
	if err := c.CheckSettings(st); err != nil {
		return nil, err
	}
	if st.ReasoningEffort != "" {
		creq.Think = &api.ThinkValue{Value: st.ReasoningEffort}
	}
	if c.noTruncate {
		f := false
		creq.Truncate = &f
	}
	return creq, nil
}

// ollamaEfforts are the think levels Ollama names.
var ollamaEfforts = []string{"low", "medium", "high"}

// CheckSettings: Ollama takes a reasoning effort as its think level.
func (c *Client) CheckSettings(s chat.Settings) error {
	return providers.CheckEffort("the Ollama protocol", s.ReasoningEffort, ollamaEfforts...)
}

// wrap turns an api client failure into a *providers.Error, classifying
// Ollama's error bodies (an HTTP status, or an {"error"} line mid-stream).
func (c *Client) wrap(ctx context.Context, op string, err error) *providers.Error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return &providers.Error{Provider: c.name, Err: fmt.Errorf("%s: %w", op, ctxErr)}
	}
	var se api.StatusError
	if errors.As(err, &se) {
		body, _ := json.Marshal(map[string]string{"error": se.ErrorMessage})
		return c.classified(se.StatusCode, string(body), fmt.Errorf("%s: %w", op, err))
	}
	var ae api.AuthorizationError
	if errors.As(err, &ae) {
		return &providers.Error{Provider: c.name, Status: ae.StatusCode, Err: fmt.Errorf("%s: %w", op, err)}
	}
	if errors.Is(err, providers.ErrBodyTooLarge) {
		return &providers.Error{Provider: c.name, Err: fmt.Errorf("%s: %w", op, err)}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// No answer at all: the server is down or unreachable.
		return &providers.Error{Provider: c.name, Retryable: true, Err: fmt.Errorf("%s: %w", op, err)}
	}
	// After HTTP 200 the api client reports an {"error": "..."} line, or a
	// line that is not JSON, as a bare error carrying the text.
	return c.classified(http.StatusOK, err.Error(), fmt.Errorf("%s: %w", op, err))
}

func (c *Client) classified(status int, body string, err error) *providers.Error {
	// "ollama" picks the detector's Ollama wordings; the error then carries
	// this server's configured name.
	pe := providers.ClassifyHTTPError("ollama", status, body, nil)
	pe.Provider = c.name
	if pe.Err == nil {
		pe.Err = err
	}
	return pe
}

// statusKey is the context key of the *int statusTransport records a chat
// answer's HTTP status in.
type statusKey struct{}

// statusTransport records the status of each answer base (nil: the default
// transport) gives, for a request whose context carries a statusKey. It runs
// on the goroutine of the call that reads the status after it.
type statusTransport struct{ base http.RoundTripper }

func (t statusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := orDefault(t.base).RoundTrip(req)
	if p, ok := req.Context().Value(statusKey{}).(*int); ok && err == nil {
		*p = res.StatusCode
	}
	return res, err
}

// orDefault is base, or http.DefaultTransport when base is nil.
func orDefault(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		return http.DefaultTransport
	}
	return base
}

// listTransport bounds the body of every answer base (nil: the default
// transport) gives to providers.MaxListBytes.
type listTransport struct{ base http.RoundTripper }

func (t listTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := orDefault(t.base).RoundTrip(req)
	if err != nil {
		return nil, err
	}
	res.Body = providers.LimitBody(res.Body, providers.MaxListBytes)
	return res, nil
}

// canonical names a model the way Ollama lists it: a name without a tag is
// the ":latest" tag.
func canonical(model string) string {
	slash := strings.LastIndex(model, "/")
	if !strings.Contains(model[slash+1:], ":") {
		return model + ":latest"
	}
	return model
}

// stableCallID names a tool call Ollama left unnamed. It depends only on the
// request's length, the call's place in the answer and its content, so the
// same answer to the same request always gets the same id, and calls in
// different turns of a chat differ.
func stableCallID(model string, nMessages, index int, name, args string) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%s\x00%s", model, nMessages, index, name, args))
	return "call_" + hex.EncodeToString(h[:8])
}

// accumulator assembles streamed chunks into a Response and emits events.
type accumulator struct {
	model     string
	nMessages int
	emit      func(providers.Event)

	text, thinking strings.Builder
	calls          []chat.ToolCall
	usage          chat.Usage
	doneReason     string
	done           bool
	budget         *providers.AnswerBudget
}

func newAccumulator(req providers.Request, emit func(providers.Event)) *accumulator {
	if emit == nil {
		emit = func(providers.Event) {}
	}
	return &accumulator{model: req.Model, nMessages: len(req.Messages), emit: emit, budget: providers.NewAnswerBudget(req)}
}

func (a *accumulator) add(r api.ChatResponse) error {
	if a.done {
		return errors.New("chunk after the final chunk")
	}
	a.budget.Keep(&a.thinking, providers.EventThinking, r.Message.Thinking, a.emit)
	a.budget.Keep(&a.text, providers.EventText, r.Message.Content, a.emit)
	for _, tc := range r.Message.ToolCalls {
		// The id and name count as the answer's bytes, as the arguments
		// do: calls of empty arguments held whatever ids they came with.
		if _, fits := a.budget.Take(tc.ID + tc.Function.Name); !fits {
			break
		}
		args, fits := a.budget.Take(tc.Function.Arguments.String())
		if !fits {
			break
		}
		id := tc.ID
		if id == "" {
			id = stableCallID(a.model, a.nMessages, len(a.calls), tc.Function.Name, args)
		}
		call := chat.ToolCall{ID: id, Name: tc.Function.Name, Arguments: args}
		a.calls = append(a.calls, call)
		a.emit(providers.Event{Kind: providers.EventToolCall, ToolCall: &call})
	}
	if a.budget.Over() {
		return providers.ErrAnswerTooLarge
	}
	if r.Done {
		a.done = true
		a.doneReason = r.DoneReason
		a.usage = chat.Usage{InputTokens: r.PromptEvalCount, OutputTokens: r.EvalCount}
		u := a.usage
		a.emit(providers.Event{Kind: providers.EventUsage, Usage: &u})
	}
	return nil
}

func (a *accumulator) response() providers.Response {
	return providers.Response{
		Message: chat.Message{
			Role:      chat.RoleAssistant,
			Content:   a.text.String(),
			Thinking:  a.thinking.String(),
			ToolCalls: append([]chat.ToolCall(nil), a.calls...),
			Model:     a.model,
		},
		Usage:        a.usage,
		FinishReason: finishReason(a.doneReason, len(a.calls) > 0),
	}
}

// finishReason normalises Ollama's done_reason. Ollama says "stop" when the
// answer is tool calls; agentd says tool_calls so the caller runs them.
func finishReason(doneReason string, calledTools bool) string {
	switch {
	case doneReason == "length":
		return providers.FinishLength
	case calledTools:
		return providers.FinishToolCalls
	case doneReason == "" || doneReason == "stop":
		return providers.FinishStop
	default:
		return doneReason
	}
}
