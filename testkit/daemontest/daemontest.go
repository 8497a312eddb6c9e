// Package daemontest runs a whole agentd — hub, actors, Badger and the HTTP
// API — in a test, against the protocol fakes, so end-to-end tests drive it
// exactly as a client would.
package daemontest

import (
	"context"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/pgtest"
)

// Daemon is a running agentd.
type Daemon struct {
	T      testing.TB
	Cfg    configs.Config
	Hub    *hub.Hub
	Server *httptest.Server
	Client *api.Client
	Tokens map[string]string
	opts   hub.Options
	closed bool
}

// Config returns a configuration with one OpenAI-style provider named
// "fake" at baseURL serving model "m" with the given window, data in dir.
func Config(dir, baseURL string, window int) configs.Config {
	return testkit.Config(dir, baseURL, window)
}

// Start runs a daemon with cfg until the test ends (or Close); opts, when
// given, pass hub options (e.g. tools of the test's own).
func Start(t testing.TB, cfg configs.Config, tokens map[string]string, opts ...hub.Options) *Daemon {
	t.Helper()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	if testing.Verbose() {
		log = log.Level(zerolog.InfoLevel)
	}
	var o hub.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.RefreshEvery == 0 {
		// The fakes script every request a test expects: the daemon reads
		// the lists when the test asks, unless it asks for the watcher.
		o.RefreshEvery = -1
	}
	// The listener first: in cluster mode the hub tells the other nodes
	// its address.
	srv := httptest.NewUnstartedServer(nil)
	if o.AdvertiseHTTP == "" {
		o.AdvertiseHTTP = "http://" + srv.Listener.Addr().String()
	}
	h, err := hub.New(context.Background(), cfg, log, o)
	if err != nil {
		_ = srv.Listener.Close()
		t.Fatal(err)
	}
	// The server as agentd serve runs it: its timeouts and connection bounds.
	handler := httpapi.New(h, cfg, tokens, log, httpapi.WithTracerProvider(o.TracerProvider))
	srv.Config = handler.HTTPServer()
	srv.Listener = handler.Listener(srv.Listener)
	srv.Start()
	d := &Daemon{T: t, Cfg: cfg, Hub: h, Server: srv, Client: &api.Client{BaseURL: srv.URL}, Tokens: tokens, opts: o}
	t.Cleanup(d.Close)
	return d
}

// Close stops the HTTP server and the daemon, as a clean shutdown does.
func (d *Daemon) Close() {
	if d.closed {
		return
	}
	d.closed = true
	// Clients first, then the hub (which ends running turns, so no handler
	// waits on one), then the server (which waits for its handlers).
	d.Server.CloseClientConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Hub.Close(ctx); err != nil {
		d.T.Errorf("close hub: %v", err)
	}
	d.Server.Close()
}

// Restart closes the daemon and starts a new one on the same data folder.
func (d *Daemon) Restart() *Daemon {
	d.Close()
	return Start(d.T, d.Cfg, d.Tokens, d.opts)
}

// EachStore is pgtest.EachStore: f on cfg for Badger, then for Postgres.
func EachStore(t *testing.T, cfg configs.Config, f func(t *testing.T, cfg configs.Config)) {
	pgtest.EachStore(t, cfg, f)
}
