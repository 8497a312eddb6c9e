package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/console"
	"github.com/agentd/agentd/memory"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/ollamafake"
	"github.com/agentd/agentd/testkit/openaifake"
)

// shots, when set, is the folder the browser tests write their screenshots
// to: go test ./console/ -run Browser -shots ../docs
var shots = flag.String("shots", "", "write console screenshots (PNG) to this folder")

const chromium = "/usr/bin/chromium"

// The fake's answers. The summariser's and the learner's requests are told
// apart by their system prompts, which are wire strings of those packages.
const (
	fakeSummary = "What the person wants:\n- a pot of tea for the team meeting\nDecided or done:\n- green tea, brewed at 80 °C\nStill open:\n- how many cups"
	fakeFact    = "The person drinks green tea every morning."
)

func script(r testkit.Received) testkit.Reply {
	switch {
	case strings.Contains(r.System, summarizer.Instructions[:60]):
		return testkit.Reply{Text: fakeSummary}
	case strings.Contains(r.System, learner.Instructions[:60]):
		return testkit.Reply{Text: `["` + fakeFact + `"]`}
	}
	last := r.Messages[len(r.Messages)-1]
	switch {
	case last.Role == chat.RoleTool:
		return testkit.Reply{Text: "The result is " + last.Content + "."}
	case strings.Contains(last.Content, "forbidden"):
		return testkit.Reply{Refusal: "I'm sorry, I can't help with that."}
	case strings.Contains(last.Content, "calculate"):
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "calculate", Arguments: `{"expression":"6*7"}`}}}
	}
	// Three runes a chunk: the answer reaches the page as many deltas.
	return testkit.Reply{Text: "You said: " + last.Content, ChunkRunes: 3}
}

// rig is a daemon against the OpenAI-style fake, the console in front of
// it, and a headless Chromium looking at it.
type rig struct {
	t    testing.TB
	d    *daemontest.Daemon
	fake *openaifake.Server
	url  string
	ctx  context.Context // the browser tab, with the test's deadline
	tab  context.Context // the browser tab without the deadline, for post-mortems
	// mem is the test's stand-in memory store, set when the daemon does not
	// serve the memory API yet; nil when it does.
	mem *memory.Store

	mu   sync.Mutex
	errs []string // exceptions and console errors of the page
}

type rigOptions struct {
	window int
	tokens map[string]string
	// edit changes the daemon's config before it starts.
	edit func(*configs.Config)
	// fakeWindow is the window the fake enforces (0: window).
	fakeWindow int
	// models, when set, is the fake's model list, which the daemon reads
	// before the test starts (as agentd serve does).
	models []openaifake.ModelEntry
	// holdActivity, when set, holds every read of a chat's activity until
	// it is closed: a test orders what the page hears live before what it
	// reads back.
	holdActivity chan struct{}
	// script, when set, answers in place of script.
	script testkit.Script
	// ollamaWindow, when set, puts the daemon on the Ollama fake (model
	// ollama/m), which holds this window while the daemon is told window:
	// it cuts a longer prompt silently and answers it, as Ollama does.
	ollamaWindow int
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("browser tests need Debian's chromium at %s (apt-get install -y chromium): %v", chromium, err)
	}
	if o.fakeWindow == 0 {
		o.fakeWindow = o.window
	}
	if o.script == nil {
		o.script = script
	}
	var fake *openaifake.Server
	var cfg configs.Config
	if o.ollamaWindow > 0 {
		of := ollamafake.New(ollamafake.Options{Window: o.ollamaWindow, Script: o.script, Models: []ollamafake.ModelEntry{{Name: "m", Size: 2 << 30,
			Family: "llama", Capabilities: []string{"completion", "tools"}, ModelInfo: map[string]any{"general.architecture": "llama", "llama.context_length": o.ollamaWindow}}}})
		t.Cleanup(of.Close)
		var err error
		if cfg, err = daemontest.ConfigFor("ollama", t.TempDir(), of.URL(), o.window); err != nil {
			t.Fatal(err)
		}
	} else {
		fake = openaifake.New(openaifake.Options{Window: o.fakeWindow, Script: o.script, Models: o.models})
		t.Cleanup(fake.Close)
		cfg = daemontest.Config(t.TempDir(), fake.URL(), o.window)
	}
	cfg.Limits.RequestsPerSecond = 1000
	if o.edit != nil {
		o.edit(&cfg)
	}
	d := daemontest.Start(t, cfg, o.tokens)
	if o.models != nil {
		d.Hub.Refresh(context.Background())
	}
	r := &rig{t: t, d: d, fake: fake}
	r.url = r.serve(o.holdActivity)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	// The first action starts the browser; it must not carry a deadline.
	if err := chromedp.Listen(bctx, r.onEvent); err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	// A generous deadline for the whole test: every wait below is for a DOM
	// condition, never a duration.
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	r.ctx, r.tab = ctx, bctx
	t.Cleanup(func() {
		cancel()
		cancelBrowser()
		cancelAlloc()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.errs {
			t.Errorf("page error: %s", e)
		}
	})
	return r
}

func (r *rig) onEvent(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		msg = ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			msg += " " + ev.ExceptionDetails.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError {
			return
		}
		for _, a := range ev.Args {
			msg += " " + string(a.Value) + a.Description
		}
	default:
		return
	}
	r.mu.Lock()
	r.errs = append(r.errs, msg)
	r.mu.Unlock()
}

// serve returns the URL the browser opens. When the daemon's own handler
// serves the console (httpapi mounts it), that is the daemon's URL; until
// then the test puts the console and the API on one server of its own, as
// the mount will. The same goes for the memory API: when the daemon answers
// 404, a stand-in over a real memory.Store on the daemon's Badger serves
// the documented routes, so the page is tested against the shape it will get.
// With hold set, the test's own server stands in front of the daemon and
// holds activity reads until hold is closed.
func (r *rig) serve(hold chan struct{}) string {
	api := r.d.Server.Config.Handler
	mounted := false
	if resp, err := http.Get(r.d.Server.URL + "/"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		mounted = resp.StatusCode == 200 && strings.Contains(string(b), "app.js")
	}
	memMounted := false
	if resp, err := http.Get(r.d.Server.URL + "/v1/memories?state=active"); err == nil {
		resp.Body.Close()
		memMounted = resp.StatusCode != http.StatusNotFound
	}
	if mounted && memMounted && hold == nil {
		return r.d.Server.URL
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	if hold != nil {
		mux.HandleFunc("GET /v1/chats/{id}/activity", func(w http.ResponseWriter, req *http.Request) {
			select {
			case <-hold:
				api.ServeHTTP(w, req)
			case <-req.Context().Done():
			}
		})
	}
	if mounted {
		mux.Handle("/", api)
	} else {
		r.t.Log("httpapi does not mount the console yet: the test serves console.Handler() beside the API")
		mux.Handle("/", console.Handler())
	}
	if !memMounted {
		r.t.Log("memory API not mounted (GET /v1/memories is 404): the test serves a stand-in over memory.Store")
		r.mem = memory.New(r.d.Hub.Store(), memory.Options{})
		r.standInMemoryAPI(mux)
	}
	srv := httptest.NewServer(mux)
	r.t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}

// standInMemoryAPI serves the memory routes of state.md for tenant
// "default" (the tests run without tokens when they use memories).
func (r *rig) standInMemoryAPI(mux *http.ServeMux) {
	const tenant = "default"
	reply := func(w http.ResponseWriter, v any, err error) {
		if errors.Is(err, memory.ErrNotFound) {
			http.Error(w, `{"error":"not found","kind":"not_found"}`, http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, `{"error":"internal","kind":"internal"}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /v1/memories", func(w http.ResponseWriter, req *http.Request) {
		ms, err := r.mem.List(req.Context(), tenant, req.URL.Query().Get("state"))
		if ms == nil {
			ms = []memory.Memory{}
		}
		reply(w, map[string]any{"memories": ms}, err)
	})
	mux.HandleFunc("GET /v1/memory-runs", func(w http.ResponseWriter, req *http.Request) {
		rs, err := r.mem.Runs(req.Context(), tenant)
		if rs == nil {
			rs = []memory.Run{}
		}
		reply(w, map[string]any{"runs": rs}, err)
	})
	mux.HandleFunc("POST /v1/memories/{id}/approve", func(w http.ResponseWriter, req *http.Request) {
		m, err := r.mem.Approve(req.Context(), tenant, req.PathValue("id"))
		reply(w, m, err)
	})
	mux.HandleFunc("POST /v1/memory-runs/{id}/undo", func(w http.ResponseWriter, req *http.Request) {
		run, err := r.mem.UndoRun(req.Context(), tenant, req.PathValue("id"))
		reply(w, run, err)
	})
}

// do runs browser actions, failing the test on the first error.
func (r *rig) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	r.t.Helper()
	if err := chromedp.Do(r.ctx, steps...); err != nil {
		r.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](r *rig, expr string) T {
	r.t.Helper()
	v, err := chromedp.Run(r.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		r.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// until waits for a JavaScript condition to hold. A condition that throws
// (an element the page has not drawn yet) counts as not holding yet: a
// throw would otherwise end the browser's polling for good, and the wait
// would run out however the page went on. If the wait runs out, the page's
// route and what the last evaluation threw ("" when it ran and was false)
// are reported.
func (r *rig) until(what, cond string) {
	r.t.Helper()
	guarded := `(() => { try { const ok = !!(` + cond + `); window.__untilThrew = ""; return ok; } catch (e) { window.__untilThrew = String(e); return false; } })()`
	if _, err := chromedp.Run(r.ctx, chromedp.Poll[chromedp.Void](guarded, chromedp.WithPollingTimeout(0))); err != nil {
		ctx, cancel := context.WithTimeout(r.tab, 5*time.Second)
		defer cancel()
		last, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[location.hash, window.__untilThrew || ""]`))
		last = append(last, "", "")
		r.t.Fatalf("waiting for %s (%s): %v; the page at %q, the condition last threw %q", what, cond, err, last[0], last[1])
	}
}

// shoot saves a screenshot of the page (or of one element) when -shots is set.
func (r *rig) shoot(name, sel string) {
	r.t.Helper()
	if *shots == "" {
		return
	}
	var png []byte
	var err error
	if sel == "" {
		// A viewport as tall as the page puts sticky parts (the message box,
		// the context view) where they sit in the page, not over it.
		size := eval[[]int64](r, `[window.innerWidth, document.documentElement.scrollHeight]`)
		r.do("grow the viewport", chromedp.EmulateViewport(size[0], size[1]))
		png, err = chromedp.Run(r.ctx, chromedp.FullScreenshot(100))
		r.do("restore the viewport", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, emulation.ClearDeviceMetricsOverride, cdp.Empty{})
			return err
		}))
	} else {
		png, err = chromedp.Run(r.ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	}
	if err != nil {
		r.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(*shots, name), png, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// open navigates to a console route and waits for the page's script.
func (r *rig) open(hash string) {
	r.t.Helper()
	r.do("open "+hash, chromedp.Navigate(r.url+"/"+hash))
	r.until("the console to start", `document.readyState === "complete" && document.querySelector("main").children.length > 0`)
}

// js quotes a Go string as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func waitFor(ctx context.Context, t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// pressCtrl presses Ctrl and a letter together, as a keyboard shortcut is.
func pressCtrl(letter string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		code := "Key" + strings.ToUpper(letter)
		vk := int64(strings.ToUpper(letter)[0])
		down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeRawKeyDown, Key: letter, Code: code,
			WindowsVirtualKeyCode: vk, NativeVirtualKeyCode: vk, Modifiers: int64(chromedp.ModifierCtrl)}
		if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, down); err != nil {
			return err
		}
		up := down
		up.Type = input.DispatchKeyEventTypeKeyUp
		_, err := cdp.Call(ctx, t, input.DispatchKeyEvent, up)
		return err
	})
}

// pressEnter presses Enter the way a keyboard does: one keyDown carrying the
// text "\r", so a keydown handler that calls preventDefault stops the new
// line (chromedp's KeyEvent sends a separate char event, which no page can
// stop). shift holds Shift down.
func pressEnter(shift bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		var mods int64
		if shift {
			mods = int64(chromedp.ModifierShift)
		}
		down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13, Text: "\r", UnmodifiedText: "\r", Modifiers: mods}
		if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, down); err != nil {
			return err
		}
		up := down
		up.Type, up.Text, up.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
		_, err := cdp.Call(ctx, t, input.DispatchKeyEvent, up)
		return err
	})
}
