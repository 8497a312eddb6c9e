package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/telemetry"
)

// statusWriter remembers the status a handler answered, for the request's
// span, and bounds each write of the answer: a piece of at most
// writePiece bytes, or a flush, that its client does not take within wait
// (http.write_timeout) fails, so no handler waits on a client that reads
// nothing for as long as it keeps the connection (a JSON answer of
// megabytes was written at once, unbounded, and its handler held it for
// good). Unwrap lets http.ResponseController reach the connection (SSE's
// flushes).
type statusWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	wait time.Duration
	code int
	// refusal keeps the head of a 4xx answer (its error), for the log.
	refusal []byte
	// by, once set (unix nanoseconds), bounds every later write (WriteBy).
	by atomic.Int64
}

// writePiece is the most bytes one write deadline covers: a client that
// reads slowly but reads is not cut for an answer's size.
const writePiece = 64 << 10

// newStatusWriter arms the deadline at once: one the connection's last
// answer left must not cut this one, and what net/http writes of this one
// by itself (a 100 Continue) is bounded too.
func newStatusWriter(w http.ResponseWriter, wait time.Duration) *statusWriter {
	sw := &statusWriter{ResponseWriter: w, rc: http.NewResponseController(w), wait: wait}
	sw.deadline()
	return sw
}

// deadline bounds the next write; a writer without deadlines (a test's
// recorder) is written to unbounded.
func (w *statusWriter) deadline() {
	if w.wait > 0 {
		at := time.Now().Add(w.wait)
		if by := w.by.Load(); by != 0 && by < at.UnixNano() {
			at = time.Unix(0, by)
		}
		_ = w.rc.SetWriteDeadline(at)
	}
}

// WriteBy bounds every later write of the answer by at, what net/http
// writes after the handler included: a stream's last events (oai) are
// written by then however slowly its client reads, where each write's own
// bound would give every one of them a fresh http.write_timeout.
func (w *statusWriter) WriteBy(at time.Time) { w.by.Store(at.UnixNano()) }

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if w.code >= 400 && w.code < 500 && len(w.refusal) < refusalLogBytes {
		w.refusal = append(w.refusal, b[:min(len(b), refusalLogBytes-len(w.refusal))]...)
	}
	n := 0
	for {
		piece := b[n:min(len(b), n+writePiece)]
		w.deadline()
		m, err := w.ResponseWriter.Write(piece)
		n += m
		if err != nil || n == len(b) {
			return n, err
		}
	}
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		w.deadline()
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// RequestIDHeader carries each request's id: the client's own when it sends
// a usable one, else a new one; every answer returns it and every log line
// the request causes in the HTTP layer carries it as request_id.
const RequestIDHeader = "X-Request-Id"

// requestID returns the client's id if it is short and plain, else a new one.
func requestID(r *http.Request) string {
	if id := r.Header.Get(RequestIDHeader); len(id) > 0 && len(id) <= 64 && plainID(id) {
		return id
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func plainID(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// withRequest gives each request its id (header, context, and logger in
// the context) and its span, a child of the caller's trace context when it
// sends one; it turns a handler's panic into one logged line with its
// stack and a generic 500 naming the request id.
func (s *Server) withRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := requestID(r)
		w.Header().Set(RequestIDHeader, id)
		log := s.log.With().Str("request_id", id).Logger()
		ctx, span := s.tracer.Start(telemetry.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header)), r.Method,
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLPath(r.URL.Path),
				attribute.String("agentd.request_id", id)))
		sw := newStatusWriter(w, s.cfg.HTTP.WriteTimeout.Duration)
		// Every body is bounded, a route's that reads none too: net/http
		// reads what is left of it before the answer.
		limitBody(w, r, s.cfg.HTTP.ReadTimeout.Duration)
		defer func() {
			// The mux named the route on r by now.
			if r.Pattern != "" {
				span.SetName(r.Pattern)
				span.SetAttributes(semconv.HTTPRoute(r.Pattern))
			}
			span.SetAttributes(semconv.HTTPResponseStatusCode(sw.status()))
			if sw.status() >= 500 {
				span.SetStatus(codes.Error, http.StatusText(sw.status()))
			}
			span.End()
		}()
		w = sw
		r = r.WithContext(log.WithContext(telemetry.WithRequestID(ctx, id)))
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error().Str("method", r.Method).Str("path", clip(r.URL.Path, 200)).Str("panic", fmt.Sprint(v)).
					Str("stack", string(debug.Stack())).Msg("http handler panicked")
				errorWriterFor(r.URL.Path)(w, http.StatusInternalServerError, "internal", internalMessage(id))
			}
		}()
		note := &requestNote{}
		r = r.WithContext(context.WithValue(r.Context(), requestNoteKey{}, note))
		next.ServeHTTP(w, r)
		s.logRefusal(r, sw, id, note.tenant)
		// What net/http writes once the handler returns (the buffered
		// tail, a chunked body's terminator, an answer of headers only)
		// is bounded as every write of the handler's: lifted, a client that
		// stopped reading just before it held the connection for good.
		sw.deadline()
	})
}

// writeInternal answers a 500 without internal detail: the operator finds
// it in the log by the request id.
func writeInternal(w http.ResponseWriter, id string) {
	writeError(w, http.StatusInternalServerError, "internal", internalMessage(id))
}

func internalMessage(id string) string {
	return "internal error; the operator's log has it under request id " + id
}

// logInternal logs err once, with the request's id, for a 500.
func logInternal(r *http.Request, err error) {
	zerolog.Ctx(r.Context()).Error().Str("error", clipEchoes(r, err.Error())).Str("method", r.Method).Str("path", clip(r.URL.Path, 200)).Msg("internal error answered 500")
}

// refusalLogBytes is how much of a refusal's answer its log line keeps:
// the error's message and kind, an echoed id clipped before it.
const refusalLogBytes = 400

// requestNote is what the handlers learn of a request that its log line
// wants: the tenant its token names.
type requestNote struct{ tenant string }

type requestNoteKey struct{}

// noteTenant records the request's tenant for its refusal's log line.
func noteTenant(r *http.Request, tenant string) {
	if n, ok := r.Context().Value(requestNoteKey{}).(*requestNote); ok {
		n.tenant = tenant
	}
}

// refusalLogs samples the refusals' log lines per source and status (a
// tenant for the API's refusals; the Host or Origin named for the web
// guard's 421s and 403s, which come before any tenant is known): each
// pair is logged at most once per refusalLogEvery, so a flood of refusals
// costs one line each 10 s (docs/security.md), and one tenant's or page's
// flood does not hide another's. It remembers at most maxRefusalKeys
// pairs; past them (pairs all logged within the interval) the rest share
// one sampler per status.
type refusalLogs struct {
	mu     sync.Mutex
	last   map[refusalKey]time.Time
	swept  time.Time
	shared [100]rate.Sometimes
}

type refusalKey struct {
	source string
	code   int
}

// maxRefusalKeys bounds the pairs remembered: tenants come from the
// config's tokens, hosts and origins from anyone, and a hostile count of
// them must not grow memory.
const maxRefusalKeys = 1024

// allow reports whether a refusal of code to source at now is logged.
func (l *refusalLogs) allow(source string, code int, now time.Time) bool {
	k := refusalKey{source, code}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[refusalKey]time.Time{}
	}
	if t, ok := l.last[k]; ok {
		if now.Sub(t) < refusalLogEvery {
			return false
		}
		l.last[k] = now
		return true
	}
	// Full: forget the pairs past their interval, at most once a second
	// so a flood of new pairs does not sweep the map on every request.
	if len(l.last) >= maxRefusalKeys && now.Sub(l.swept) >= time.Second {
		l.swept = now
		for k, t := range l.last {
			if now.Sub(t) >= refusalLogEvery {
				delete(l.last, k)
			}
		}
	}
	if len(l.last) >= maxRefusalKeys {
		if l.shared[code-400].Interval == 0 {
			l.shared[code-400].Interval = refusalLogEvery
		}
		logged := false
		l.shared[code-400].Do(func() { logged = true })
		return logged
	}
	l.last[k] = now
	return true
}

// logRefusal logs a 4xx answer with what the client was told. The web
// guard logs its own (403, 421), and a client that went away (499) is
// no refusal.
func (s *Server) logRefusal(r *http.Request, sw *statusWriter, id, tenant string) {
	code := sw.status()
	if code < 400 || code > 499 || code == http.StatusForbidden || code == http.StatusMisdirectedRequest || code == oai.StatusClientGone {
		return
	}
	if !s.refusals.allow(tenant, code, time.Now()) {
		return
	}
	ev := s.log.Info()
	if code == http.StatusUnauthorized {
		ev = s.log.Warn()
	}
	if tenant != "" {
		ev = ev.Str("tenant", tenant)
	}
	ev.Str("request_id", id).Int("status", code).Str("method", r.Method).Str("path", clip(r.URL.Path, 200)).
		Str("remote", r.RemoteAddr).Str("answer", strings.TrimSpace(string(sw.refusal))).
		Msgf("refused a request (%d); further %d refusals of this tenant are logged at most every 10s", code, code)
}
