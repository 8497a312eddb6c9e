package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/eventbus"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/tools"
)

// tenant is the one tenant the bench drives.
const tenant = "default"

// daemon is a real agentd (hub, actors, Badger) in this process, its
// providers reached through a transport that times every model call.
type daemon struct {
	hub   *hub.Hub
	cfg   configs.Config
	model *modelClock
	// transport holds the provider connections, a pool as big as a run's
	// calls in flight.
	transport *http.Transport
}

type daemonOptions struct {
	dir       string
	cfg       *configs.Config // nil: one fake provider at fakeURL
	fakeURL   string
	window    int
	inMemory  bool
	idleAfter time.Duration
	// results answer bench_lookup by report id (nil: the tool is not registered).
	results map[string]string
	// maxConns caps connections to the provider (0: unlimited).
	maxConns int
	// daemonDefaults keeps the daemon's own compact_threshold and
	// fold_as_lines; otherwise chats fill their window and fold as lines,
	// as in the tests, so overhead and scale measure one chat size.
	daemonDefaults bool
	// ingestLimit is limits.ingest_bytes_per_second (0: none, as -1).
	ingestLimit int64
}

func startDaemon(ctx context.Context, o daemonOptions) (*daemon, error) {
	var cfg configs.Config
	if o.cfg != nil {
		cfg = *o.cfg
		cfg.DataDir = o.dir
	} else {
		cfg = testkit.Config(o.dir, o.fakeURL, o.window)
		if o.daemonDefaults {
			cfg.Limits.CompactThreshold, cfg.Limits.FoldAsLines = configs.DefaultCompactThreshold, false
		}
		on := true
		cfg.Providers[0].PromptCacheKey = &on // the fake takes it, as OpenAI does
	}
	cfg.Limits.ChatsPerTenant = 1 << 20
	cfg.Limits.TurnsPerChat = 8
	// Unless asked, none: one tenant's turns back to back, pasted logs among them.
	cfg.Limits.IngestBytesPerSecond = cmp.Or(o.ingestLimit, -1)
	if o.idleAfter > 0 {
		cfg.IdleAfter.Duration = o.idleAfter
	} else {
		cfg.IdleAfter.Duration = time.Hour
	}
	clock := &modelClock{}
	tr := hub.ProviderTransport() // the daemon's own
	// Every connection a run may open is kept for the next call: closing
	// and dialling again is work a long-running daemon does not do.
	tr.MaxIdleConnsPerHost = max(256, o.maxConns)
	tr.MaxIdleConns = tr.MaxIdleConnsPerHost
	tr.MaxConnsPerHost = o.maxConns
	opts := hub.Options{InMemory: o.inMemory, HTTPClient: &http.Client{Transport: &timedTransport{base: tr, clock: clock}}}
	if o.results != nil {
		results := o.results
		opts.Tools = func(r *tools.Registry) error {
			return tools.Register(r, ToolName, "Look up a report by id and return its full text.",
				func(_ context.Context, a lookupArgs) (tools.Result, error) {
					text, ok := results[a.Report]
					if !ok {
						return tools.Result{IsError: true, Text: "no report " + a.Report}, nil
					}
					return tools.Result{Text: text}, nil
				})
		}
	}
	h, err := hub.New(ctx, cfg, zerolog.Nop(), opts)
	if err != nil {
		return nil, fmt.Errorf("start agentd: %w", err)
	}
	return &daemon{hub: h, cfg: cfg, model: clock, transport: tr}, nil
}

type lookupArgs struct {
	Report string `json:"report" jsonschema:"description=the report id, like r-12"`
}

func (d *daemon) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return d.hub.Close(ctx)
}

func (d *daemon) newChat(ctx context.Context, model string) (string, error) {
	c, err := d.hub.CreateChat(ctx, tenant, api.CreateChatRequest{Model: model})
	if err != nil {
		return "", fmt.Errorf("create chat: %w", err)
	}
	return c.ID, nil
}

func (d *daemon) newChatFor(ctx context.Context, tenant string) (string, error) {
	c, err := d.hub.CreateChat(ctx, tenant, api.CreateChatRequest{})
	if err != nil {
		return "", fmt.Errorf("create chat: %w", err)
	}
	return c.ID, nil
}

// turnOutcome is one finished turn as the bench sees it.
type turnOutcome struct {
	result api.TurnResult
	wall   time.Duration
}

// chatDriver sends a chat's turns one after another over one long-lived
// subscription, so events between turns (a background fold) are counted.
type chatDriver struct {
	d      *daemon
	chatID string
	sub    *eventbus.Sub
	done   chan api.TurnResult
	folds  atomic.Int64
	heals  atomic.Int64
	wg     sync.WaitGroup
}

func (d *daemon) drive(chatID string) *chatDriver {
	sub := d.hub.Subscribe(chatID, 1<<14, api.EventCompacted, api.EventHealed, api.EventTurnCompleted)
	c := &chatDriver{d: d, chatID: chatID, sub: sub, done: make(chan api.TurnResult, 4)}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for ev := range c.sub.C {
			switch ev.Type {
			case api.EventCompacted:
				c.folds.Add(1)
			case api.EventHealed:
				c.heals.Add(1)
			case api.EventTurnCompleted:
				if res, ok := ev.Data.(api.TurnResult); ok {
					c.done <- res
				}
			}
		}
	}()
	return c
}

func (c *chatDriver) close() {
	c.sub.Close()
	c.wg.Wait()
}

// send submits one person's message and waits for its turn to complete.
func (c *chatDriver) send(ctx context.Context, text string) (turnOutcome, error) {
	start := time.Now()
	turnID, err := c.d.hub.Submit(ctx, tenant, c.chatID, api.SendMessageRequest{Content: text})
	if err != nil {
		return turnOutcome{}, fmt.Errorf("submit: %w", err)
	}
	for {
		select {
		case res := <-c.done:
			if res.TurnID != turnID {
				continue
			}
			return turnOutcome{result: res, wall: time.Since(start)}, nil
		case <-ctx.Done():
			return turnOutcome{}, fmt.Errorf("turn %s: %w", turnID, ctx.Err())
		}
	}
}

// onceBuffer is a short-lived subscription's buffer: that of an HTTP
// request waiting for its turn's end, so a turn of the scale run costs what
// a client's turn costs (1,024 events allocated 72 KB a turn, 2% of the
// run's CPU, counted as agentd's).
const onceBuffer = 16

// sendOnce submits a message on a short-lived subscription (many chats at
// once) and waits for its turn.
func (d *daemon) sendOnce(ctx context.Context, tenant, chatID, text string) (api.TurnResult, error) {
	sub := d.hub.Subscribe(chatID, onceBuffer, api.EventTurnCompleted)
	defer sub.Close()
	turnID, err := d.hub.Submit(ctx, tenant, chatID, api.SendMessageRequest{Content: text})
	if err != nil {
		return api.TurnResult{}, fmt.Errorf("submit: %w", err)
	}
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				return api.TurnResult{}, fmt.Errorf("chat %s: subscription closed", chatID)
			}
			if ev.TurnID == turnID && ev.Type == api.EventTurnCompleted {
				res, _ := ev.Data.(api.TurnResult)
				return res, nil
			}
		case <-ctx.Done():
			return api.TurnResult{}, ctx.Err()
		}
	}
}

// callTool runs a registered tool the way the session does, as chatID.
func (d *daemon) callTool(ctx context.Context, chatID, name string, args any) (string, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return "", err
	}
	ctx = tools.WithCallInfo(ctx, tools.CallInfo{Tenant: tenant, ChatID: chatID})
	res, err := d.hub.Tools().Call(ctx, chat.ToolCall{ID: "bench", Name: name, Arguments: string(raw)}, tools.Limits{Timeout: time.Minute})
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		return "", fmt.Errorf("%s: %s", name, res.Text)
	}
	return res.Text, nil
}

// modelClock sums the time spent inside the chat's own model calls: from
// sending the request to reading the last byte of the answer. The
// summariser's and the learner's calls run beside a turn, not in it, so
// they are not counted: taking them off a turn's time made a fold turn's
// own latency come out below zero.
type modelClock struct{ nanos atomic.Int64 }

func (m *modelClock) total() time.Duration { return time.Duration(m.nanos.Load()) }

// backgroundMarks are the starts of the summariser's and the learner's
// instructions as they appear in a request body (JSON-quoted; none has a
// character JSON escapes).
var backgroundMarks = func() [][]byte {
	var marks [][]byte
	for _, text := range []string{summarizer.Instructions, summarizer.CondenseInstructions, learner.Instructions} {
		marks = append(marks, []byte(text[:40]))
	}
	return marks
}()

// bodyCopies keep background's copies of request bodies: the bench's own
// work runs in agentd's process and on its turn's clock, and io.ReadAll
// grew a fresh copy of every ≈100 KB body from nothing (4% of a turn's
// profile samples).
var bodyCopies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// background reports whether r is a summariser's or learner's request.
func background(r *http.Request) bool {
	if r.GetBody == nil {
		return false
	}
	body, err := r.GetBody()
	if err != nil {
		return false
	}
	defer body.Close()
	b := bodyCopies.Get().(*bytes.Buffer)
	defer bodyCopies.Put(b)
	b.Reset()
	if _, err := b.ReadFrom(body); err != nil {
		return false
	}
	for _, m := range backgroundMarks {
		if bytes.Contains(b.Bytes(), m) {
			return true
		}
	}
	return false
}

type timedTransport struct {
	base  http.RoundTripper
	clock *modelClock
}

func (t *timedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if background(r) {
		return t.base.RoundTrip(r)
	}
	start := time.Now()
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		t.clock.nanos.Add(int64(time.Since(start)))
		return resp, err
	}
	resp.Body = &timedBody{ReadCloser: resp.Body, start: start, clock: t.clock}
	return resp, nil
}

type timedBody struct {
	io.ReadCloser
	start time.Time
	clock *modelClock
	once  sync.Once
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.stop()
	}
	return n, err
}

func (b *timedBody) Close() error {
	b.stop()
	return b.ReadCloser.Close()
}

func (b *timedBody) stop() {
	b.once.Do(func() { b.clock.nanos.Add(int64(time.Since(b.start))) })
}
