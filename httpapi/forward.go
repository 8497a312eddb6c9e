package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// ForwardedHeader marks a request another agentd node forwarded to the
// node that owns its chat (cluster mode). Such a request is always served
// where it arrives, whatever this node's view of the membership: a chat is
// forwarded at most once, never back and forth, and the store's
// single-writer fence keeps it safe if two views disagree.
const ForwardedHeader = "Agentd-Forwarded"

// forwarder proxies chat-scoped requests to the chat's owner node.
type forwarder struct{ transport *http.Transport }

// newForwarder bounds the dial and, with headerWait, how long an owner
// may take to start its answer (a turn queued behind others starts late).
func newForwarder(headerWait time.Duration) *forwarder {
	return &forwarder{transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: headerWait,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   64,
	}}
}

// forward serves r from the node at owner (its base URL): the body, the
// query, the Host and the client's Authorization go as they came (the
// owner authenticates and checks again), the answer streams back, each SSE event flushed at
// once. An owner that does not answer is 503 with Retry-After; a body
// the client sent too large or too slowly is refused as one node refuses
// it (413, 408); nothing is stored for the request on this node.
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request, owner string, writeError errorWriter) {
	target, err := url.Parse(owner)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", fmt.Sprintf("the chat's node has a bad address %q: %v", owner, err))
		return
	}
	body := &readBody{ReadCloser: r.Body}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = body
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The owner's Host and cross-origin checks see what this
			// node's saw (the nodes share one configuration).
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			pr.Out.Header.Set(ForwardedHeader, "1")
		},
		Transport:     f.transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// Reading the body ends the request's context when it times
			// out: the proxy's own error says only that.
			if refuseBody(w, body.failed(), writeError) {
				return
			}
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "unavailable", fmt.Sprintf("the node that holds this chat (%s) did not answer: %v; nothing was stored, send it again", owner, err))
		},
	}
	p.ServeHTTP(w, r)
}

// readBody remembers the first error reading a body, for the proxy's
// error handler, which the transport's read of it may race.
type readBody struct {
	io.ReadCloser
	mu  sync.Mutex
	err error
}

func (b *readBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *readBody) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// chatRouted serves a chat-scoped route on the node that owns the chat:
// here when this node owns it (always outside cluster mode) or the request
// was forwarded already, else through forward. The chat is resolved in
// the caller's tenant first: another tenant's id is the same 404 as on
// one node.
func (s *Server) chatRouted(h func(http.ResponseWriter, *http.Request, string), chatOf func(*http.Request) string, writeHubError func(http.ResponseWriter, *http.Request, error), writeError errorWriter) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, tenant string) {
		id := chatOf(r)
		if id == "" || r.Header.Get(ForwardedHeader) != "" {
			h(w, r, tenant)
			return
		}
		owner, err := s.hub.Owner(r.Context(), tenant, id)
		if err != nil {
			writeHubError(w, r, err)
			return
		}
		if owner == "" {
			h(w, r, tenant)
			return
		}
		s.forwarder.forward(w, r, owner, writeError)
	}
}

// pathChat is the chat id of a native route's {id}.
func pathChat(r *http.Request) string { return r.PathValue("id") }
