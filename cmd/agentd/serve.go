package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/telemetry"
)

// shutdownGrace is how long in-flight turns get to finish on SIGTERM before
// they are marked as cut short; a second signal cuts it short. A variable
// for the tests.
var shutdownGrace = 20 * time.Second

func init() {
	var (
		configPath string
		flags      configs.Config
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon (HTTP API and web console)",
		Long: `Run the daemon. Configuration: defaults < the yaml file (--config) < AGENTD_* environment < flags.
With no provider configured it tries Ollama at 127.0.0.1:11434.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := configs.Load(configPath)
			if err != nil {
				return err
			}
			applyFlags(cmd, &cfg, flags)
			if err := cfg.Validate(); err != nil {
				return err
			}
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			return serve(cmd.Context(), cfg, sigs)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", os.Getenv("AGENTD_CONFIG"), "yaml configuration file (example: configs/agentd.yaml)")
	f.StringVar(&flags.Listen, "listen", "", "HTTP address (default 127.0.0.1:8420)")
	f.StringVar(&flags.DataDir, "data-dir", "", "data folder for Badger and attachments (default ./data)")
	f.StringVar(&flags.DefaultModel, "default-model", "", "model for new chats, provider/model")
	f.StringVar(&flags.LogLevel, "log-level", "", "debug, info, warn or error (default info)")
	rootCmd.AddCommand(cmd)
}

func applyFlags(cmd *cobra.Command, cfg *configs.Config, f configs.Config) {
	set := func(name string, dst *string, v string) {
		if cmd.Flags().Changed(name) {
			*dst = v
		}
	}
	set("listen", &cfg.Listen, f.Listen)
	set("data-dir", &cfg.DataDir, f.DataDir)
	set("default-model", &cfg.DefaultModel, f.DefaultModel)
	set("log-level", &cfg.LogLevel, f.LogLevel)
}

// newLogger builds the one log stream: JSON lines on stderr.
func newLogger(level string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(os.Stderr).Level(lvl).With().Timestamp().Logger()
}

// serve runs the daemon until ctx ends or a signal arrives on sigs; a
// second signal ends the shutdown's grace at once.
func serve(ctx context.Context, cfg configs.Config, sigs <-chan os.Signal) error {
	log := newLogger(cfg.LogLevel)
	tokens, err := cfg.Tokens(os.Getenv)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-sigs:
			stop()
		case <-ctx.Done():
		}
	}()
	if err := prepareDataDir(cfg.DataDir); err != nil {
		return err
	}
	tp, flush, err := telemetry.NewTracerProvider(ctx, cfg.Tracing)
	if err != nil {
		return err
	}
	defer flushTraces(flush, log)
	// The listener first: in cluster mode the hub tells the other nodes
	// the address it really got (listen may name port 0).
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	h, err := hub.New(ctx, cfg, log, hub.Options{TracerProvider: tp, AdvertiseHTTP: "http://" + ln.Addr().String()})
	if err != nil {
		_ = ln.Close()
		return err
	}
	logConfig(log, cfg, len(tokens), os.Getenv)

	api := httpapi.New(h, cfg, tokens, log, httpapi.WithTracerProvider(tp))
	srv := api.HTTPServer()
	served := make(chan error, 2)
	// /metrics first: the API's listener already takes connections (the
	// hub needed its address), so a client that reached the API finds
	// metrics.listen up too.
	metrics, err := serveMetrics(api, cfg, log, served)
	if err != nil {
		_ = ln.Close()
		closeHub(h, log)
		return err
	}
	servers := 1
	if metrics != nil {
		servers++
	}
	go func() { served <- srv.Serve(api.Listener(ln)) }()
	log.Info().Str("listen", "http://"+ln.Addr().String()).Msg("agentd is serving; open it in a browser for the console")

	// The stop rule: stop intake (Shutdown, bounded), then wait for every
	// Serve goroutine to return, then stop the hub, bounded, and let the
	// handlers of cut turns tell their clients before connections close.
	select {
	case err = <-served:
		servers--
		_ = srv.Close()
	case <-ctx.Done():
		log.Info().Msg("shutting down: finishing in-flight turns")
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		go func() {
			select {
			case <-sigs:
				log.Warn().Msg("second signal: cutting in-flight turns short now (each is marked and its client told)")
				cancel()
			case <-sctx.Done():
			}
		}()
		err = srv.Shutdown(sctx)
		cancel()
	}
	if metrics != nil {
		_ = metrics.Close()
	}
	for ; servers > 0; servers-- {
		<-served
	}
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = nil
	}
	// Turns still running are marked as cut and their clients told, then
	// the store closes.
	if cerr := closeHub(h, log); cerr != nil && err == nil {
		err = cerr
	}
	dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = api.Drain(dctx)
	cancel()
	// Only now close the connections Shutdown could not drain: the streams
	// of cut turns have had their turn.completed, and a request whose read
	// the store's close cut its 503 (Drain waits for every answer).
	_ = srv.Close()
	log.Info().Msg("agentd stopped")
	return err
}

// flushTraces sends the spans still queued, within 5 seconds: a collector
// that is down must not hold the exit.
func flushTraces(flush func(context.Context) error, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := flush(ctx); err != nil {
		log.Warn().Err(err).Msg("flush traces")
	}
}

// hubCloseWait bounds how long stopping the hub may take.
const hubCloseWait = 30 * time.Second

// closeHub stops the hub within hubCloseWait, logging what it left.
func closeHub(h *hub.Hub, log zerolog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), hubCloseWait)
	defer cancel()
	err := h.Close(ctx)
	if err != nil {
		log.Error().Err(err).Msg("stop the hub")
	}
	return err
}

// serveMetrics serves /metrics on metrics.listen when it is set; the
// server's end is sent on served.
func serveMetrics(api *httpapi.Server, cfg configs.Config, log zerolog.Logger, served chan<- error) (*http.Server, error) {
	if cfg.Metrics.Listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.Metrics.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on metrics.listen %s: %w", cfg.Metrics.Listen, err)
	}
	srv := &http.Server{Handler: api.MetricsHandler(), ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout.Duration, IdleTimeout: cfg.HTTP.IdleTimeout.Duration}
	go func() { served <- srv.Serve(ln) }()
	if !configs.IsLoopback(cfg.Metrics.Listen) {
		log.Warn().Str("metrics_listen", cfg.Metrics.Listen).Msg("/metrics is served without a token on a non-loopback address")
	}
	log.Info().Str("metrics", "http://"+ln.Addr().String()+"/metrics").Msg("metrics are served on their own address, without a token")
	return srv, nil
}

// logConfig logs the effective configuration once, secrets left out, and
// warns of what is allowed but probably not meant (configs.Config.Warnings;
// get reads the environment).
func logConfig(log zerolog.Logger, cfg configs.Config, tokens int, get func(string) string) {
	ev := log.Info().Str("data_dir", cfg.DataDir).Str("default_model", cfg.DefaultModel).Int("auth_tokens", tokens)
	for _, p := range cfg.Providers {
		ev = ev.Str("provider_"+p.Name, p.Kind+" "+p.BaseURL)
	}
	if cfg.Tracing.Endpoint != "" {
		ev = ev.Str("tracing", cfg.Tracing.Endpoint)
	}
	ev.Msg("configuration")
	if tokens == 0 {
		log.Warn().Str("listen", cfg.Listen).Msg("no auth tokens configured: serving loopback only, every chat belongs to the tenant \"default\"")
	}
	if cfg.DefaultModel == "" {
		// Not "new chats must name one": a chat that names none takes the
		// first model a provider lists (modelcatalog.Default).
		log.Warn().Msg("no default_model: a new chat that names no model takes the first one a provider lists (set default_model, \"provider/model\", to choose). If none answers: " + hub.NoProviderHelp)
	}
	for _, w := range cfg.Warnings(get) {
		log.Warn().Msg(w)
	}
}

// prepareDataDir creates the data folder and checks that agentd may write
// in it, so a data_dir that is a file or read-only is refused at start
// under its key and path, not later as a Badger or attachments error that
// names neither.
func prepareDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data_dir %q: cannot create the folder: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".agentd-write-check-*")
	if err != nil {
		return fmt.Errorf("data_dir %q: agentd cannot write in it: %w", dir, err)
	}
	_ = f.Close()
	if err := os.Remove(f.Name()); err != nil {
		return fmt.Errorf("data_dir %q: %w", dir, err)
	}
	return nil
}
