package hub

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/pgtest"
)

// pgProxy forwards a loopback port to the test's Postgres, so a test can
// make the server unreachable (cut) and reachable again (serve) on the
// same address.
type pgProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
	wg           sync.WaitGroup
}

func (p *pgProxy) serve(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, s); _ = c.Close() })
		}
	})
}

// cut closes the port and every connection through it.
func (p *pgProxy) cut() {
	p.mu.Lock()
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// TestPostgresOutOfReachIsDegradedThenFailing: on Postgres /healthz never
// said failing, so the Kubernetes sketch's liveness probe never restarted
// a node that had lost the server for good (only Badger's failed sync
// counted). Now a server that does not answer is degraded, with
// store_error (200: a Postgres restart restarts no node), failing (503)
// once it has lasted store.failing_after, and ok again once it answers.
func TestPostgresOutOfReachIsDegradedThenFailing(t *testing.T) {
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Skipf("the test DSN is not a URL: %v", err)
	}
	proxy := &pgProxy{addr: "127.0.0.1:0", target: u.Host}
	proxy.serve(t)
	defer proxy.cut()
	u.Host = proxy.addr
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	t.Setenv("AGENTD_HEALTH_PG_DSN", u.String())
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 4096)
	cfg.Store = configs.Store{Kind: configs.StorePostgres, DSNEnv: "AGENTD_HEALTH_PG_DSN", FailingAfter: configs.Duration{Duration: time.Hour}}
	h, err := New(context.Background(), cfg, zerolog.Nop(), Options{RefreshEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Close(context.Background()) }()
	if got := h.Health(); got.StoreError != "" {
		t.Fatalf("a Postgres that answers: store_error %q", got.StoreError)
	}

	// The store pings once a second: wait on the next ping's answer.
	wait := func(done func(api.Health) bool) api.Health {
		deadline := time.Now().Add(time.Minute)
		got := h.Health()
		for !done(got) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			got = h.Health()
		}
		return got
	}
	proxy.cut()
	got := wait(func(h api.Health) bool { return h.StoreError != "" })
	if got.StoreError == "" || got.Status == api.HealthFailing {
		t.Fatalf("Postgres just gone: %+v; want store_error, not failing (a restart of the server restarts no node)", got)
	}
	if h.pgFailingAfter != time.Hour {
		t.Fatalf("store.failing_after 1h: the hub fails after %v", h.pgFailingAfter)
	}
	h.pgFailingAfter = time.Nanosecond
	got = wait(func(h api.Health) bool { return h.Status == api.HealthFailing })
	if got.Status != api.HealthFailing || got.StoreError == "" {
		t.Fatalf("Postgres gone past store.failing_after: %+v; want failing with store_error", got)
	}

	proxy.serve(t)
	got = wait(func(h api.Health) bool { return h.StoreError == "" })
	if got.StoreError != "" || got.Status == api.HealthFailing {
		t.Fatalf("Postgres back: %+v; want no store_error", got)
	}
}
