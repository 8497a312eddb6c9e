package httpapi

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// connLimiter bounds the connections of a listener so that clients who
// never authenticate cannot crowd out those who do: about maxUnauth
// connections on which no request has authenticated yet — a new one beyond
// that closes the oldest such once it has had unauthGrace to send a
// request, or at once past twice maxUnauth — and at most perTenant per
// tenant once a request on them has. A flood of silent or slow connections
// so costs a real client at most one retry, and a burst of real ones is not
// cut before the server has read their first request.
type connLimiter struct {
	net.Listener
	maxUnauth, perTenant int

	mu      sync.Mutex
	unauth  *list.List // of *trackedConn, oldest first
	tenants map[string]int
}

// trackedConn is one accepted connection and what the limiter counts it as.
type trackedConn struct {
	net.Conn
	l *connLimiter

	since time.Time // accepted at

	// Guarded by l.mu.
	elem     *list.Element // in l.unauth while no request has authenticated
	tenant   string        // the tenant it is counted for, once one has
	released bool
}

// unauthGrace is how long a new connection may take to send a request that
// authenticates before a newer one may close it.
const unauthGrace = time.Second

func newConnLimiter(ln net.Listener, maxUnauth, perTenant int) *connLimiter {
	return &connLimiter{Listener: ln, maxUnauth: maxUnauth, perTenant: perTenant, unauth: list.New(), tenants: map[string]int{}}
}

// Accept returns the next connection, counted as unauthenticated.
func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l, since: time.Now()}
	var evicted *trackedConn
	l.mu.Lock()
	if n := l.unauth.Len(); n >= max(l.maxUnauth, 1) {
		oldest := l.unauth.Front().Value.(*trackedConn)
		if n >= 2*l.maxUnauth || time.Since(oldest.since) >= unauthGrace {
			l.unauth.Remove(oldest.elem)
			oldest.elem, evicted = nil, oldest
		}
	}
	tc.elem = l.unauth.PushBack(tc)
	l.mu.Unlock()
	if evicted != nil {
		_ = evicted.Close()
	}
	return tc, nil
}

// admission is what admit says of a connection's first authenticated
// request.
type admission int

const (
	admitted   admission = iota
	tenantFull           // the tenant holds as many as it may
	closing              // closed, or being closed, for a newer connection
)

// admit counts the connection for tenant when its first request has
// authenticated.
func (c *trackedConn) admit(tenant string) admission {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case c.released:
		return closing
	case c.tenant != "":
		return admitted
	}
	if c.elem != nil {
		l.unauth.Remove(c.elem)
		c.elem = nil
	}
	if l.tenants[tenant] >= l.perTenant {
		return tenantFull
	}
	l.tenants[tenant]++
	c.tenant = tenant
	return admitted
}

// Close closes the connection and frees what it was counted as.
func (c *trackedConn) Close() error {
	l := c.l
	l.mu.Lock()
	if !c.released {
		c.released = true
		if c.elem != nil {
			l.unauth.Remove(c.elem)
			c.elem = nil
		}
		if c.tenant != "" {
			if l.tenants[c.tenant]--; l.tenants[c.tenant] == 0 {
				delete(l.tenants, c.tenant)
			}
		}
	}
	l.mu.Unlock()
	return c.Conn.Close()
}

type connKey struct{}

// withConn puts the limiter's connection in each request's context.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// admitConn counts r's connection for tenant (admitted also when the
// server counts no connections, as in a test's plain server). A connection
// closing for a newer one has its socket closed here, before any answer:
// its closer may not have reached the socket yet, and an answer written in
// between would tell the client its tenant is over its bound.
func admitConn(r *http.Request, tenant string) admission {
	tc, ok := r.Context().Value(connKey{}).(*trackedConn)
	if !ok {
		return admitted
	}
	a := tc.admit(tenant)
	if a == closing {
		_ = tc.Conn.Close()
	}
	return a
}

// Listener wraps ln with the connection bounds of http.max_unauthenticated
// and http.conns_per_tenant; serve it with HTTPServer.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return newConnLimiter(ln, s.cfg.HTTP.MaxUnauthenticated, s.cfg.HTTP.ConnsPerTenant)
}

// HTTPServer is the http.Server for s, with the header and idle timeouts of
// the configuration. It sets no ReadTimeout or WriteTimeout: those would cut
// long event streams; bodies get their own deadline (limitBody, in
// withRequest).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.cfg.HTTP.ReadHeaderTimeout.Duration,
		IdleTimeout:       s.cfg.HTTP.IdleTimeout.Duration,
		ConnContext:       withConn,
	}
}

// bodyFits answers 413 at once, reading nothing, when r announces a body
// over limit bytes: it would be refused once read, and reading it would
// cost the server the bytes and the client the wait. The connection closes
// after the answer.
func bodyFits(w http.ResponseWriter, r *http.Request, limit int64, writeError errorWriter) bool {
	if r.ContentLength <= limit {
		return true
	}
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body of %d bytes over the limit of %d bytes", r.ContentLength, limit))
	return false
}

// limitBody gives r's body a read deadline of d from now, lifted once the
// body is read to its end so that the answer — an event stream may last a
// whole turn — is not cut by it.
func limitBody(w http.ResponseWriter, r *http.Request, d time.Duration) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(d)) != nil {
		return // a writer without deadlines (a test's recorder)
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
}

type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.lifted {
		b.lifted = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// bodyTimedOut reports whether err is a body read cut by limitBody.
func bodyTimedOut(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
