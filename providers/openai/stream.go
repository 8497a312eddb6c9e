package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/tidwall/gjson"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// Stream sends one request and streams the answer; see providers.Client.
// Every failure is a *providers.Error (a context's end is wrapped in one, so
// errors.Is(err, context.DeadlineExceeded) still holds).
func (c *Client) Stream(ctx context.Context, req providers.Request, emit func(providers.Event)) (providers.Response, error) {
	if emit == nil {
		emit = func(providers.Event) {}
	}
	body, err := newSentBody(func(dst []byte) ([]byte, error) { return c.body(dst, req) })
	if err != nil {
		return providers.Response{}, &providers.Error{Provider: c.provider(), Err: fmt.Errorf("build request: %w", err)}
	}
	defer body.done()
	first, err := body.reader()
	if err != nil {
		return providers.Response{}, &providers.Error{Provider: c.provider(), Err: fmt.Errorf("build request: %w", err)}
	}
	var (
		raw   *http.Response
		watch doneWatcher
	)
	opts := append(c.perModel(req.Model), option.WithRequestBody("application/json", first),
		option.WithResponseInto(&raw), option.WithMiddleware(body.middleware, watch.middleware))
	// The body is ours (request.go) and says "stream":true itself. Not
	// ChatCompletionService.NewStreaming: it encodes its (empty) params
	// and then sets "stream" in the body with sjson, which reads and
	// copies the whole body once more; the events are read with
	// ssestream's decoder, so framing and errors are the SDK's as before.
	err = c.api.Post(ctx, "chat/completions", nil, &raw, opts...)
	stream := newChunkStream(ssestream.NewDecoder(raw), err)
	if raw != nil {
		stream.body = raw.Body
	}
	defer stream.close()

	a := newAssembler(providers.NewAnswerBudget(req))
	for stream.next() {
		if err := a.add(stream.cur, emit); err != nil {
			return a.partial(req, c), c.streamEventError(err.Error())
		}
		if a.budget.Over() {
			return a.partial(req, c), a.budget.Err(c.provider())
		}
	}
	if err := stream.err; err != nil {
		return a.partial(req, c), c.failure(ctx, err, raw, &watch)
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return a.partial(req, c), &providers.Error{Provider: c.provider(), Err: ctxErr}
	}
	if !watch.done && !(a.finished && a.sawUsage) {
		return a.partial(req, c), c.incomplete(&watch, a, raw)
	}
	if !a.finished {
		// [DONE] without any finish_reason: the server ended the answer
		// without saying why; take it as a plain stop.
		a.finish = providers.FinishStop
		a.flushCalls(emit)
	}
	if a.sawUsage {
		u := a.usage
		emit(providers.Event{Kind: providers.EventUsage, Usage: &u})
	}
	return a.response(req, c), nil
}

// perModel gives the options that depend on the model: Azure's deployments
// API puts the deployment in the path and wants an api-version.
func (c *Client) perModel(model string) []option.RequestOption {
	if !c.co.azure {
		return nil
	}
	var opts []option.RequestOption
	if !c.azureV1 {
		root := *c.base
		root.Path = strings.TrimSuffix(strings.TrimSuffix(root.Path, "/"), "/openai") + "/openai/deployments/" + url.PathEscape(model) + "/"
		opts = append(opts, option.WithBaseURL(root.String()))
	}
	if c.apiVer != "" {
		opts = append(opts, option.WithQuery("api-version", c.apiVer))
	}
	return opts
}

// failure turns the SDK's error into a *providers.Error.
func (c *Client) failure(ctx context.Context, err error, raw *http.Response, watch *doneWatcher) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return &providers.Error{Provider: c.provider(), Err: ctxErr}
	}
	if raw != nil && raw.StatusCode >= 300 {
		// The SDK buffered the body again before building its error, so it
		// can be read here even when its own decoding failed.
		body, _ := io.ReadAll(io.LimitReader(raw.Body, 1<<20))
		return c.classify(raw.StatusCode, string(body), raw.Header)
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		return c.streamEventError(string(se.Event.Data))
	}
	var bad *chunkError
	if errors.As(err, &bad) {
		return &providers.Error{Provider: c.provider(), Status: http.StatusOK, Body: watch.headText(),
			Err: fmt.Errorf("the stream is not OpenAI-style chunks: %w", err)}
	}
	// A transport failure before any answer (connection refused, no such
	// host) or mid-stream (connection reset, unexpected EOF): worth another
	// try, and named for what it is.
	if providers.Unreachable(err) {
		return &providers.Error{Provider: c.provider(), Retryable: true, Err: fmt.Errorf("cannot connect: %w", err)}
	}
	return &providers.Error{Provider: c.provider(), Retryable: true, Err: fmt.Errorf("stream interrupted: %w", err)}
}

// streamEventError classifies an error sent as a stream event after HTTP 200.
func (c *Client) streamEventError(body string) error {
	return c.classify(http.StatusOK, body, nil)
}

func (c *Client) classify(status int, body string, header http.Header) error {
	// The company picks the detector's wordings; the error then carries
	// this provider's configured name, as the other adapters' do, so two
	// OpenAI-style servers' problems are told apart.
	e := providers.ClassifyHTTPError(c.co.name, status, body, header)
	if e == nil {
		e = &providers.Error{Status: status, Body: body}
	}
	e.Provider = c.provider()
	if hint := c.missingVersionHint(status, body); hint != "" && !e.TooLong {
		e.Err = fmt.Errorf("status %d: %s (%s)", status, clip(strings.TrimSpace(body), 200), hint)
	}
	return e
}

// versionSegment matches an API version in a base URL's path: /v1,
// /v1beta, /api/v2.
var versionSegment = regexp.MustCompile(`(^|/)v\d+[a-z0-9]*(/|$)`)

// missingVersionHint says what to change when a server answers 404 for the
// route itself (not for a model) and base_url names no API version: Ollama,
// vLLM and LM Studio serve their OpenAI-style routes under /v1 only, and
// their bare "404 page not found" names neither the key nor the fix.
func (c *Client) missingVersionHint(status int, body string) string {
	if status != http.StatusNotFound || c.co.azure || versionSegment.MatchString(strings.Trim(c.base.Path, "/")) ||
		strings.Contains(strings.ToLower(body), "model") {
		return ""
	}
	fixed := *c.base
	fixed.Path = strings.TrimSuffix(fixed.Path, "/") + "/v1"
	return fmt.Sprintf("is base_url missing /v1? OpenAI-style servers such as Ollama, vLLM and LM Studio answer under it: try base_url: %s", fixed.String())
}

// incomplete explains a body that ended without [DONE] and without a finish.
func (c *Client) incomplete(watch *doneWatcher, a *assembler, raw *http.Response) error {
	head := watch.headText()
	if watch.dataLines == 0 && onlyComments(head) {
		// Headers, then nothing (or keep-alive comments) and a clean end:
		// the server or a proxy closed the stream, which is no answer in
		// another format; another try may well be answered.
		return &providers.Error{Provider: c.provider(), Retryable: true,
			Err: errors.New("the stream ended before its first event (the server closed it)")}
	}
	if watch.dataLines == 0 {
		// Not SSE at all. A proxy or server that answered 200 with a JSON
		// error body is still an error body.
		if t := strings.TrimSpace(head); strings.HasPrefix(t, "{") && strings.Contains(t, "error") {
			var h http.Header
			if raw != nil {
				h = raw.Header
			}
			return c.classify(http.StatusOK, t, h)
		}
		return &providers.Error{Provider: c.provider(), Status: http.StatusOK, Body: head,
			Err: fmt.Errorf("the answer is not an SSE stream (no data lines); body began %q", clip(head, 120))}
	}
	return &providers.Error{Provider: c.provider(), Retryable: true,
		Err: fmt.Errorf("stream ended after %d chunks without [DONE] or a finish reason", a.chunks)}
}

// onlyComments reports a body head with no SSE field: empty, or only
// comment lines (": keep-alive").
func onlyComments(head string) bool {
	for line := range strings.Lines(head) {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, ":") {
			return false
		}
	}
	return true
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// chunkStream reads the answer's events with the SDK's SSE decoder and
// decodes each one in one pass (decodeChunk). It keeps the rules of the
// SDK's ssestream.Stream.Next, which decoded every event twice (json.Unmarshal's
// validity scan, then the chunk's own decoding): data starting "[DONE]"
// ends the stream, data with an "error" field is a *ssestream.StreamError,
// a "thread." event is the SDK's wrapped object (no chunk fields), and the
// decoder's error or the request's is the stream's. It closes the decoder
// as soon as it ends, as the SDK's does.
type chunkStream struct {
	dec ssestream.Decoder
	// body is the response's body, read to its end after [DONE] (drain);
	// nil: nothing to drain.
	body   io.ReadCloser
	cur    chunk
	err    error
	closed bool
}

// What reading a body to its end after [DONE] may take: a server ends its
// response right after it, and one that does not is cut off as before.
const (
	drainWait  = 100 * time.Millisecond
	drainBytes = 64 << 10
)

func newChunkStream(dec ssestream.Decoder, err error) *chunkStream {
	return &chunkStream{dec: dec, err: err}
}

func (s *chunkStream) next() bool {
	if s.err != nil || s.closed || s.dec == nil {
		s.close()
		return false
	}
	if !s.dec.Next() {
		return s.end(s.dec.Err())
	}
	ev := s.dec.Event()
	if bytes.HasPrefix(ev.Data, []byte("[DONE]")) {
		s.drain()
		return s.end(nil)
	}
	if !strings.HasPrefix(ev.Type, "thread.") {
		if c, ok := commonChunk(ev.Data); ok { // an object without "error"
			s.cur = c
			return true
		}
	}
	if e := gjson.GetBytes(ev.Data, "error"); e.Exists() {
		return s.end(&ssestream.StreamError{Message: "received error while streaming: " + e.String(), Event: ev})
	}
	if strings.HasPrefix(ev.Type, "thread.") {
		// The SDK decodes {"event":…,"data":…} here, which sets no field
		// of a chunk, once the data proved to be JSON.
		if !json.Valid(ev.Data) {
			return s.end(fmt.Errorf("thread event: data is not JSON"))
		}
		s.cur = chunk{}
		return true
	}
	s.cur, s.err = decodeChunk(ev.Data)
	if s.err != nil {
		return s.end(s.err)
	}
	return true
}

// drain reads the body to its end, bounded by drainWait and drainBytes.
// net/http keeps a connection for the next call only when its body was
// read to the end before it was closed. Closed right after [DONE], before
// the last chunk of a chunked HTTP/1.1 body came, the connection was reset
// and the next call dialled again: against a server in another process,
// nearly every call did.
func (s *chunkStream) drain() {
	if s.body == nil {
		return
	}
	cut := time.AfterFunc(drainWait, func() { _ = s.body.Close() })
	defer cut.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(s.body, drainBytes))
}

func (s *chunkStream) end(err error) bool {
	s.err = err
	s.close()
	return false
}

func (s *chunkStream) close() {
	if !s.closed && s.dec != nil {
		_ = s.dec.Close()
	}
	s.closed = true
}

// doneWatcher sees the response body as the SDK reads it and notes whether
// "data: [DONE]" went by, since the SDK ends a stream the same way on [DONE]
// and on a bare EOF. It also keeps the head of the body for error messages.
// It is used by one request on one goroutine.
type doneWatcher struct {
	line      []byte
	done      bool
	dataLines int
	head      []byte
}

const headMax = 512

func (w *doneWatcher) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err == nil && res != nil && res.Body != nil && res.StatusCode < 300 {
		res.Body = &watchedBody{ReadCloser: res.Body, w: w}
	}
	return res, err
}

func (w *doneWatcher) observe(p []byte) {
	if n := min(headMax-len(w.head), len(p)); n > 0 {
		w.head = append(w.head, p[:n]...)
	}
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			w.keep(p)
			return
		}
		w.keep(p[:i])
		w.endLine()
		p = p[i+1:]
	}
}

// keep appends to the current line, capped: only short lines can be
// "data: [DONE]".
func (w *doneWatcher) keep(p []byte) {
	if room := 24 - len(w.line); room > 0 {
		w.line = append(w.line, p[:min(room, len(p))]...)
	}
}

func (w *doneWatcher) endLine() {
	if v, ok := bytes.CutPrefix(w.line, []byte("data:")); ok {
		w.dataLines++
		if string(bytes.TrimSpace(v)) == "[DONE]" {
			w.done = true
		}
	}
	w.line = w.line[:0]
}

func (w *doneWatcher) headText() string { return string(w.head) }

type watchedBody struct {
	io.ReadCloser
	w *doneWatcher
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.w.observe(p[:n])
	return n, err
}

// assembler folds chunks into the answer, emitting events as they come.
type assembler struct {
	text, thinking strings.Builder
	calls          []*chat.ToolCall
	byIndex        map[int64]*chat.ToolCall
	flushed        bool
	finish         string
	finished       bool
	refused        bool // a delta carried refusal text
	usage          chat.Usage
	sawUsage       bool
	chunks         int
	budget         *providers.AnswerBudget
}

func newAssembler(b *providers.AnswerBudget) *assembler {
	return &assembler{byIndex: map[int64]*chat.ToolCall{}, budget: b}
}

// add folds one chunk in. It returns a non-nil error only for an error the
// server put in the stream (a finish_reason of "error").
func (a *assembler) add(ch chunk, emit func(providers.Event)) error {
	a.chunks++
	if u := ch.usage(); u != nil {
		a.usage = usageOf(u)
		a.sawUsage = true
	}
	for _, choice := range ch.Choices {
		if choice.Index != 0 {
			continue // agentd asks for one choice
		}
		d := choice.Delta
		a.budget.Keep(&a.thinking, providers.EventThinking, d.thinking(), emit)
		a.budget.Keep(&a.text, providers.EventText, string(d.Content), emit)
		if d.Refusal != "" {
			// The refusal is what the person reads in place of an answer.
			a.refused = true
			a.budget.Keep(&a.text, providers.EventText, string(d.Refusal), emit)
		}
		for _, tc := range d.ToolCalls {
			a.toolDelta(tc)
		}
		if a.budget.Over() {
			return nil
		}
		if choice.FinishReason != "" && !a.finished {
			if strings.EqualFold(string(choice.FinishReason), "error") {
				return fmt.Errorf("%s", ch.raw)
			}
			a.finished = true
			a.finish = normaliseFinish(string(choice.FinishReason))
			a.flushCalls(emit)
		}
	}
	return nil
}

// toolDelta merges one tool-call delta, keyed by its index. A server that
// sends no index (some compatible servers send each call whole) gets a new
// slot for each new id.
func (a *assembler) toolDelta(tc toolCallDelta) {
	var call *chat.ToolCall
	id := string(tc.ID)
	switch {
	case tc.Index != nil:
		call = a.byIndex[int64(*tc.Index)]
		if call == nil {
			call = &chat.ToolCall{}
			a.byIndex[int64(*tc.Index)] = call
			a.calls = append(a.calls, call)
		}
	case len(a.calls) > 0 && (id == "" || id == a.calls[len(a.calls)-1].ID):
		call = a.calls[len(a.calls)-1]
	default:
		call = &chat.ToolCall{}
		a.calls = append(a.calls, call)
	}
	if id != "" && id != call.ID {
		// An id counts as the answer's bytes: a server that sent a new
		// call of a megabyte's id in each chunk was held whole.
		call.ID, _ = a.budget.Take(id)
	}
	name, _ := a.budget.Take(string(tc.Function.Name))
	args, _ := a.budget.Take(string(tc.Function.Arguments))
	call.Name += name
	call.Arguments += args
}

// flushCalls emits each finished tool call once.
func (a *assembler) flushCalls(emit func(providers.Event)) {
	if a.flushed {
		return
	}
	a.flushed = true
	for i, call := range a.calls {
		if call.ID == "" {
			// Some local servers send no id; the tool result must still be
			// linkable to its call.
			call.ID = fmt.Sprintf("call_%d", i)
		}
		tc := *call
		emit(providers.Event{Kind: providers.EventToolCall, ToolCall: &tc})
	}
	if len(a.calls) > 0 && a.finish == providers.FinishStop {
		// vLLM and others say "stop" after tool calls.
		a.finish = providers.FinishToolCalls
	}
}

func (a *assembler) message(req providers.Request, c *Client) chat.Message {
	m := chat.Message{Role: chat.RoleAssistant, Content: a.text.String(), Thinking: a.thinking.String(), Model: c.provider() + "/" + req.Model}
	for _, call := range a.calls {
		m.ToolCalls = append(m.ToolCalls, *call)
	}
	return m
}

func (a *assembler) response(req providers.Request, c *Client) providers.Response {
	finish := a.finish
	if a.refused && finish == providers.FinishStop {
		// OpenAI ends a refusal with "stop"; it is no answer.
		finish = providers.FinishFilter
	}
	return providers.Response{Message: a.message(req, c), Usage: a.usage, FinishReason: finish}
}

// partial is what arrived before a failure, marked as such.
func (a *assembler) partial(req providers.Request, c *Client) providers.Response {
	r := a.response(req, c)
	r.Message.Partial = true
	return r
}

// thinking reads a thinking delta. When both fields are present they
// carry the same text.
func (d delta) thinking() string {
	if d.ReasoningContent != "" {
		return d.ReasoningContent
	}
	return d.Reasoning
}

func usageOf(u *chunkUsage) chat.Usage {
	out := chat.Usage{InputTokens: int(u.PromptTokens), OutputTokens: int(u.CompletionTokens), CachedTokens: int(u.PromptTokensDetails.CachedTokens),
		ReasoningTokens: int(u.CompletionTokensDetails.ReasoningTokens)}
	if out.CachedTokens == 0 {
		// DeepSeek reports its cache as prompt_cache_hit_tokens.
		out.CachedTokens = u.PromptCacheHitTokens
	}
	return out
}

// normaliseFinish maps the finish reasons seen across compatible servers.
func normaliseFinish(r string) string {
	switch strings.ToLower(r) {
	case "length", "max_tokens", "model_length":
		return providers.FinishLength
	case "tool_calls", "function_call", "tool_use":
		return providers.FinishToolCalls
	case "content_filter", "safety", "sensitive":
		return providers.FinishFilter
	default: // stop, eos, end_turn, stop_sequence, …
		return providers.FinishStop
	}
}
