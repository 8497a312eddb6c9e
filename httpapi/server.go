// Package httpapi serves agentd's HTTP API (docs/api.md) and its web
// console: authentication and per-tenant limits, JSON in and out, and
// Server-Sent Events for turns and watchers. It talks to the daemon only
// through the Hub interface it declares (hub.go).
package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/telemetry"
)

// Server is the HTTP handler of agentd.
type Server struct {
	hub    Hub
	cfg    configs.Config
	log    zerolog.Logger
	tokens map[string]string // token → tenant; empty: one "default" tenant, loopback only
	mux    *routeMux
	guard  *webGuard
	tracer trace.Tracer
	// handler is the mux behind the guard.
	handler http.Handler

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	// forwarder carries chat-scoped requests to their chat's node.
	forwarder *forwarder
	// answering counts the handlers still answering their clients: every
	// authenticated route's but the event streams', which end as their
	// connections close (answered).
	answering sync.WaitGroup
	// refusals samples the log lines of 4xx answers (logRefusal).
	refusals refusalLogs
}

// Drain waits until every handler but the event streams' has written its
// answer, or ctx ends. On shutdown the hub marks the turns it stops, and a
// read the store's close cut says agentd is stopping; Drain lets those
// answers reach their clients before the process closes their connections.
func (s *Server) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.answering.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Option changes how New builds the server.
type Option func(*Server)

// WithTracerProvider gives each request a span of tp (docs/tracing.md);
// without it requests are not traced.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(s *Server) { s.tracer = telemetry.Tracer(tp) }
}

// New builds the handler. tokens maps bearer tokens to tenants.
func New(h Hub, cfg configs.Config, tokens map[string]string, log zerolog.Logger, opts ...Option) *Server {
	s := &Server{hub: h, cfg: cfg, log: log, tokens: tokens, mux: &routeMux{ServeMux: http.NewServeMux()}, limiters: map[string]*rate.Limiter{},
		tracer: telemetry.Tracer(nil), forwarder: newForwarder(cfg.Limits.TurnTimeout.Duration * time.Duration(cfg.Limits.TurnsPerChat+1))}
	for _, o := range opts {
		o(s)
	}
	s.guard = newWebGuard(cfg.HTTP.AllowedHosts, len(tokens) > 0, log)
	s.handler = s.withRequest(s.guard.wrap(s.mux))
	s.routes()
	return s
}

// DefaultTenant owns every chat when no token is configured.
const DefaultTenant = configs.DefaultTenant

// tenants lists the tenants the tokens name (DefaultTenant without any).
func (s *Server) tenants() []string {
	if len(s.tokens) == 0 {
		return []string{DefaultTenant}
	}
	return slices.Compact(slices.Sorted(maps.Values(s.tokens)))
}

func (s *Server) routes() {
	api := func(pattern string, h func(w http.ResponseWriter, r *http.Request, tenant string)) {
		s.mux.Handle(pattern, s.authed(s.answered(h), false))
	}
	// A chat's own routes are served on the node that holds it (cluster
	// mode; forward.go).
	chatAPI := func(pattern string, h func(w http.ResponseWriter, r *http.Request, tenant string)) {
		api(pattern, s.chatRouted(h, pathChat, writeHubError, writeError))
	}
	api("POST /v1/chats", s.createChat)
	api("GET /v1/chats", s.listChats)
	chatAPI("GET /v1/chats/{id}", s.getChat)
	chatAPI("PATCH /v1/chats/{id}", s.patchChat)
	chatAPI("DELETE /v1/chats/{id}", s.deleteChat)
	chatAPI("GET /v1/chats/{id}/export", s.exportChat)
	// An import is bounded by limits.max_import_bytes, not max_body_bytes.
	s.mux.Handle("POST /v1/chats/import", s.authedRaw(s.answered(s.importChat), false, writeError))
	chatAPI("POST /v1/chats/{id}/messages", s.sendMessage)
	// The one event stream a browser's EventSource opens: it cannot set
	// headers, so the token may come in the query here, and only here.
	s.mux.Handle("GET /v1/chats/{id}/events", s.authed(s.chatRouted(s.watch, pathChat, writeHubError, writeError), true))
	chatAPI("GET /v1/chats/{id}/transcript", s.transcript)
	chatAPI("GET /v1/chats/{id}/context", s.context)
	chatAPI("GET /v1/chats/{id}/activity", s.activity)
	chatAPI("POST /v1/chats/{id}/compact", s.compact)
	chatAPI("POST /v1/chats/{id}/tool-results", s.toolResults)
	api("GET /v1/toolsets", s.listToolsets)
	api("GET /v1/toolsets/{name}", s.getToolset)
	api("PUT /v1/toolsets/{name}", s.putToolset)
	api("DELETE /v1/toolsets/{name}", s.deleteToolset)
	// OpenAI's routes: the same tokens, OpenAI's error shape. A history a Chat
	// Completions client re-sends whole is bounded by max_history_bytes.
	surface := oai.New(s.hub, s.cfg, s.log)
	// What pauses that ended while agentd was down left in its index.
	surface.SweepPauses(context.Background(), s.tenants())
	oaiRoutes := func(routes []oai.Route, maxBody int64) {
		for _, rt := range routes {
			h := rt.Handle
			if rt.Chat != nil {
				h = s.chatRouted(h, rt.Chat, oai.WriteHubError, oai.WriteNativeError)
			}
			s.mux.Handle(rt.Pattern, s.authedAs(s.answered(h), false, oai.WriteNativeError, maxBody))
		}
	}
	oaiRoutes(surface.Routes(), s.cfg.Limits.MaxBodyBytes)
	oaiRoutes(surface.HistoryRoutes(), s.cfg.Limits.MaxHistoryBytes)
	api("POST /v1/models/refresh", s.refreshModels)
	api("GET /v1/memories", s.listMemories)
	api("GET /v1/memory-runs", s.listRuns)
	api("POST /v1/memories/{id}/approve", s.approveMemory)
	api("PATCH /v1/memories/{id}", s.editMemory)
	api("DELETE /v1/memories/{id}", s.deleteMemory)
	api("POST /v1/memory-runs/{id}/undo", s.undoRun)
	s.mux.Handle("POST /v1/attachments", s.authedRaw(s.answered(s.upload), false, writeError))
	s.mux.HandleFunc("GET /healthz", s.health)
	s.mux.HandleFunc("GET /openapi.json", serveOpenAPI)
	if s.cfg.Metrics.Listen == "" {
		s.mux.Handle("GET /metrics", s.authedRaw(func(w http.ResponseWriter, r *http.Request, _ string) { s.metrics().ServeHTTP(w, r) }, false, writeError))
	}
	s.mountConsole()
	s.mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		if openAIPath(r.URL.Path) {
			oai.WriteError(w, http.StatusNotFound, "unknown_url", "", fmt.Sprintf("unknown request URL: %s %s; agentd offers the routes of OpenAI's API that docs/openai.md lists", r.Method, r.URL.Path))
			return
		}
		// The path is the client's, any length: it is repeated as an id would be.
		if allow := s.allowed(r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s %s: this route takes %s (see docs/api.md)", clip(r.Method, 20), clip(r.URL.Path, echoLimit), strings.Join(allow, ", ")))
			return
		}
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no API route %s %s (see docs/api.md)", clip(r.Method, 20), clip(r.URL.Path, echoLimit)))
	})
}

// allowed lists the methods the native API serves r's path with: the
// catch-all route matches every method, so the mux cannot say 405 itself.
func (s *Server) allowed(r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/v1/" {
			allow = append(allow, m)
		}
	}
	return allow
}

// nativePrefixes are the paths under /v1/ that agentd's own API owns
// (docs/api.md), each with all below it.
var nativePrefixes = []string{"/v1/chats", "/v1/toolsets", "/v1/memories", "/v1/memory-runs", "/v1/attachments", "/v1/models/refresh"}

// openAIPath reports whether path is in OpenAI's namespace: everything
// under /v1/ that the native API does not own. An OpenAI client pointed at
// /v1 may call any of OpenAI's routes, those agentd does not offer
// included, and must read the answer as OpenAI's error.
func openAIPath(path string) bool {
	if !strings.HasPrefix(path, "/v1/") {
		return false
	}
	for _, p := range nativePrefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return false
		}
	}
	return true
}

// errorWriterFor is the error shape of the surface path belongs to, for
// answers given before a route's own handler runs (the web guard, a panic).
func errorWriterFor(path string) errorWriter {
	if openAIPath(path) {
		return oai.WriteNativeError
	}
	return writeError
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

func (s *Server) metrics() http.Handler {
	return promhttp.HandlerFor(s.hub.Gatherer(), promhttp.HandlerOpts{})
}

// MetricsHandler serves /metrics alone, without a token, behind the Host
// check: for metrics.listen, the address an operator gives a scraper.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metrics())
	return newWebGuard(s.cfg.HTTP.AllowedHosts, false, s.log).wrap(mux)
}

// tenantOf returns the caller's tenant, or "" when the token is missing or
// wrong. The query's access_token counts only where inQuery allows it.
func (s *Server) tenantOf(r *http.Request, inQuery bool) string {
	if len(s.tokens) == 0 {
		return DefaultTenant
	}
	// The scheme is case-insensitive (RFC 7235, 2.1): "bearer x" is "Bearer x".
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	ok = ok && strings.EqualFold(scheme, "Bearer")
	if !ok {
		tok = ""
	}
	if !ok && inQuery {
		tok = r.URL.Query().Get("access_token")
	}
	tenant := ""
	for t, ten := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			tenant = ten
		}
	}
	return tenant
}

// answered is h counted in answering, for Drain.
func (s *Server) answered(h func(http.ResponseWriter, *http.Request, string)) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, tenant string) {
		s.answering.Add(1)
		defer s.answering.Done()
		h(w, r, tenant)
	}
}

// authed authenticates, rate-limits and bounds the body in size (in time,
// withRequest bounds every body).
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, string), tokenInQuery bool) http.Handler {
	return s.authedAs(h, tokenInQuery, writeError, s.cfg.Limits.MaxBodyBytes)
}

// errorWriter writes an error in one surface's shape: the native API's
// (writeError) or OpenAI's (oai.WriteNativeError).
type errorWriter func(w http.ResponseWriter, status int, kind, msg string)

// authedAs is authed with refusals written by writeError and bodies
// bounded to maxBody.
func (s *Server) authedAs(h func(http.ResponseWriter, *http.Request, string), tokenInQuery bool, writeError errorWriter, maxBody int64) http.Handler {
	return s.authedRaw(func(w http.ResponseWriter, r *http.Request, tenant string) {
		if !bodyFits(w, r, maxBody, writeError) {
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		h(w, r, tenant)
	}, tokenInQuery, writeError)
}

// authedRaw authenticates and rate-limits without bounding the body (the
// upload route bounds it itself), refusing with writeError. A refused
// request's body is never read: its connection closes after the answer.
func (s *Server) authedRaw(h func(http.ResponseWriter, *http.Request, string), tokenInQuery bool, writeError errorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := s.tenantOf(r, tokenInQuery)
		noteTenant(r, tenant)
		if tenant == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentd"`)
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or unknown bearer token")
			return
		}
		switch admitConn(r, tenant) {
		case closing:
			return // its socket is closed: nothing reaches the client
		case tenantFull:
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, "busy", fmt.Sprintf("this tenant holds %d connections, the most allowed (http.conns_per_tenant); reuse one", s.cfg.HTTP.ConnsPerTenant))
			return
		}
		if wait, ok := s.allow(tenant); !ok {
			w.Header().Set("Retry-After", fmt.Sprint(int(math.Ceil(wait.Seconds()))))
			writeError(w, http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("more than %g requests a second for this tenant; retry in %s", s.cfg.Limits.RequestsPerSecond, wait.Round(time.Millisecond)))
			return
		}
		h(w, r, tenant)
	})
}

// allow takes one token of the tenant's bucket, or says how long to wait.
func (s *Server) allow(tenant string) (time.Duration, bool) {
	s.mu.Lock()
	l, ok := s.limiters[tenant]
	if !ok {
		rps := s.cfg.Limits.RequestsPerSecond
		l = rate.NewLimiter(rate.Limit(rps), int(math.Max(1, 2*rps)))
		s.limiters[tenant] = l
	}
	s.mu.Unlock()
	res := l.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return max(d, time.Second), false
	}
	return 0, true
}

// decode reads a JSON body strictly into v, answering the error itself.
// Bytes that are not UTF-8 are refused, not replaced: what is stored is what
// was sent. The body is already bounded by MaxBytesReader; opts add to the
// strict rules (boundedList).
func decode(w http.ResponseWriter, r *http.Request, v any, opts ...jsonv2.Options) bool {
	body, err := io.ReadAll(r.Body)
	if err == nil && !utf8.Valid(body) {
		writeError(w, http.StatusBadRequest, "bad_request", "request body is not valid UTF-8")
		return false
	}
	if err == nil && len(bytes.TrimSpace(body)) == 0 {
		err = io.EOF
	}
	if err == nil {
		// JSON v2's rules: a member's name matches a field exactly as
		// written, and at most once ({"content":"a","content":"b"} or
		// {"Content":…} is refused, not read as one of them, as a proxy
		// that checked the other would not expect); an unknown name is
		// refused; the body is one value.
		err = jsonv2.Unmarshal(body, v, append(opts, jsonv2.RejectUnknownMembers(true))...)
	}
	var tooLong *listTooLongError
	switch {
	case err == nil:
		return true
	case refuseBody(w, err, writeError):
	case errors.As(err, &tooLong):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", tooLong.Error())
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "bad_request", "request body is empty; send a JSON object")
	default:
		writeError(w, http.StatusBadRequest, "bad_request", "malformed JSON: "+err.Error())
	}
	return false
}

// boundedList has decode read every JSON list of T in a body into []Ts
// of at most most elements together (what names them and the setting that
// bounds them, for the refusal), refusing the body where it passes the
// bound: a list of tiny values costs per element far more than its bytes
// say (4 MiB of {"role":"user"} took 300 MB as an import's messages), so
// it is not decoded whole to be counted after. Join several with
// jsonv2.JoinUnmarshalers; each counts for one decode.
func boundedList[T any](most int, what, setting string) *jsonv2.Unmarshalers {
	n := 0
	return jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *[]T) error {
		if dec.PeekKind() != '[' {
			return jsonv2.SkipFunc
		}
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		var list []T
		for dec.PeekKind() != ']' {
			if n == most {
				return &listTooLongError{most: most, what: what, setting: setting}
			}
			n++
			var e T
			if err := jsonv2.UnmarshalDecode(dec, &e); err != nil {
				return err
			}
			list = append(list, e)
		}
		*v = list
		_, err := dec.ReadToken()
		return err
	})
}

// skipList has decode leave every JSON list of T unread, though checked
// as JSON: what a body may carry that its handler does not keep.
func skipList[T any]() *jsonv2.Unmarshalers {
	return jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, _ *[]T) error {
		if dec.PeekKind() != '[' {
			return jsonv2.SkipFunc
		}
		return dec.SkipValue()
	})
}

// listTooLongError is boundedList's refusal.
type listTooLongError struct {
	most          int
	what, setting string
}

func (e *listTooLongError) Error() string {
	return fmt.Sprintf("more than %d %s in all; the limit is %d (%s)", e.most, e.what, e.most, e.setting)
}

// refuseBody answers a body read that failed for the client's fault, too
// large (413) or too slow (408, and the connection closes), with
// writeError, and reports whether it did.
func refuseBody(w http.ResponseWriter, err error, writeError errorWriter) bool {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over the limit of %d bytes", tooBig.Limit))
	case bodyTimedOut(err):
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestTimeout, "timeout", "the request body did not arrive within http.read_timeout")
	default:
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, kind, msg string) {
	writeJSON(w, status, api.Error{Message: msg, Kind: kind})
}

// writeHubError maps the hub's errors to statuses, once, here. An id or
// name of the path that the error repeats is clipped (clipEchoes).
func writeHubError(w http.ResponseWriter, r *http.Request, err error) {
	say := func(w http.ResponseWriter, status int, kind, msg string) {
		writeError(w, status, kind, clipEchoes(r, msg))
	}
	if oai.ClientGone(w, r, err) {
		return
	}
	var limited *hub.RateLimitedError
	var paused *hub.PausedError
	switch {
	case errors.As(err, &paused):
		say(w, http.StatusConflict, "paused", fmt.Sprintf("a turn of chat %s waits for the results of calls %s: post them first (POST /v1/chats/%s/tool-results), or send this message as SSE (Accept: text/event-stream) to wait its turn, kept alive, for up to toolsets.results_wait",
			r.PathValue("id"), strings.Join(paused.Calls, ", "), r.PathValue("id")))
	case bodyTimedOut(err):
		w.Header().Set("Connection", "close")
		say(w, http.StatusRequestTimeout, "timeout", "the request body did not arrive in time (http.read_timeout; uploads: http.upload_timeout)")
	case errors.Is(err, hub.ErrNotFound):
		say(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, hub.ErrStorageFull):
		say(w, http.StatusRequestEntityTooLarge, "storage_full", err.Error())
	case errors.Is(err, hub.ErrInvalid):
		say(w, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, hub.ErrBusy), errors.Is(err, hub.ErrTenantBusy), errors.Is(err, hub.ErrConnectsBusy):
		w.Header().Set("Retry-After", "1")
		say(w, http.StatusTooManyRequests, "busy", err.Error())
	case errors.As(err, &limited):
		w.Header().Set("Retry-After", strconv.Itoa(limited.Seconds()))
		say(w, http.StatusTooManyRequests, "rate_limited", err.Error())
	case errors.Is(err, hub.ErrLimit):
		say(w, http.StatusTooManyRequests, "limit", err.Error())
	case errors.Is(err, hub.ErrNotPaused), errors.Is(err, hub.ErrKeyInProgress):
		say(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, hub.ErrKeyReused):
		say(w, http.StatusUnprocessableEntity, "key_reused", err.Error())
	case errors.Is(err, hub.ErrStopping):
		say(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	case hub.StoreClosed(err):
		// The bare sentence: the store's error is the operator's.
		w.Header().Set("Retry-After", "1")
		say(w, http.StatusServiceUnavailable, "unavailable", hub.ErrStopping.Error())
	case errors.Is(err, hub.ErrMoved):
		// The bare sentence: the cause (epochs, the store's own error)
		// is the operator's, in the session's log.
		w.Header().Set("Retry-After", "1")
		say(w, http.StatusServiceUnavailable, "moved", hub.ErrMoved.Error())
	case errors.Is(err, hub.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		say(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	case errors.Is(err, hub.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		say(w, http.StatusGatewayTimeout, "timeout", err.Error())
	case errors.Is(err, hub.ErrIndexFailed):
		// A bug (the panic's stack is in err), the operator's to read.
		logInternal(r, err)
		say(w, http.StatusInternalServerError, "internal", "indexing the toolset failed; the operator's log has it under request id "+w.Header().Get(RequestIDHeader))
	case errors.Is(err, hub.ErrFailed):
		// The bare sentence: the panic is the operator's, in the log.
		say(w, http.StatusInternalServerError, "internal", hub.ErrFailed.Error())
	case hub.StoreUnavailable(err):
		oai.LogStoreUnavailable(r, err)
		w.Header().Set("Retry-After", "1")
		say(w, http.StatusServiceUnavailable, "unavailable", hub.ErrStoreUnavailable.Error())
	default:
		logInternal(r, err)
		writeInternal(w, w.Header().Get(RequestIDHeader))
	}
}

// statusClientGone is recorded for a request whose client left before its
// answer (oai.ClientGone).
const statusClientGone = oai.StatusClientGone

// echoLimit is the most of a path's id or name an error's text repeats.
const echoLimit = 200

// clipEchoes clips, in msg, the path's id and name to echoLimit bytes: a
// tenant's 60 KB id is not sent back, nor logged, whole.
func clipEchoes(r *http.Request, msg string) string {
	for _, k := range []string{"id", "name"} {
		if v := r.PathValue(k); len(v) > echoLimit {
			msg = strings.ReplaceAll(msg, v, clip(v, echoLimit))
		}
	}
	return msg
}
