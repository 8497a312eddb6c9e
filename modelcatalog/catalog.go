// Package modelcatalog turns the configured providers into clients and keeps
// what agentd knows of each model: its window and where that figure came
// from (config, the provider's list, a refusal, or the default), windows
// learned from refusals (persisted, shared by every chat), and which model
// summarises for which.
package modelcatalog

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/singleflight"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/anthropic"
	"github.com/agentd/agentd/providers/ollama"
	"github.com/agentd/agentd/providers/openai"
)

// ErrUnknownModel is returned for a "provider/model" nobody configured.
var ErrUnknownModel = errors.New("unknown model")

// ErrNoProvider is returned when no provider is configured at all.
var ErrNoProvider = errors.New("no model provider is configured")

// WindowStore persists windows learned from refusals.
type WindowStore interface {
	LearnWindow(ctx context.Context, provider, model string, window int) (int, error)
	LearnedWindows(ctx context.Context) (map[string]int, error)
}

type entry struct {
	cfg     configs.Provider
	company providers.Company
	client  providers.Client
}

// Catalog is safe for concurrent use.
type Catalog struct {
	store WindowStore
	log   zerolog.Logger

	mu      sync.RWMutex
	entries map[string]*entry
	order   []string
	listed  map[string]providers.ModelInfo // from providers' own lists
	learned map[string]int                 // "provider/model" → window from a refusal
	errs    map[string]error               // last list error per provider
	listOK  map[string]bool                // the provider's last list answered
	kick    chan struct{}                  // asks Watch to re-read now
	reading singleflight.Group             // Refresh calls at once share one reading
	// timer starts Watch's wait (a test's stands in for time.NewTimer).
	timer func(time.Duration) (<-chan time.Time, func() bool)
}

// New builds a client for every configured provider and loads the learned
// windows. It does no network I/O; call Refresh for the providers' lists.
func New(ctx context.Context, cfgs []configs.Provider, store WindowStore, httpClient *http.Client, log zerolog.Logger) (*Catalog, error) {
	c := &Catalog{store: store, log: log, entries: map[string]*entry{}, listed: map[string]providers.ModelInfo{}, learned: map[string]int{}, errs: map[string]error{},
		listOK: map[string]bool{}, kick: make(chan struct{}, 1), timer: newTimer}
	for _, pc := range cfgs {
		e, err := newEntry(pc, httpClient)
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", pc.Name, err)
		}
		e.client = watched{Client: e.client, cat: c, name: pc.Name}
		c.entries[pc.Name] = e
		c.order = append(c.order, pc.Name)
	}
	if store != nil {
		learned, err := store.LearnedWindows(ctx)
		if err != nil {
			return nil, fmt.Errorf("load learned windows: %w", err)
		}
		c.learned = learned
	}
	return c, nil
}

func newEntry(pc configs.Provider, hc *http.Client) (*entry, error) {
	company, ok := providers.LookupCompany(pc.Company)
	if !ok {
		switch pc.Kind {
		case "anthropic", "ollama":
			company, _ = providers.LookupCompany(pc.Kind)
		default:
			company = providers.CompanyFromBaseURL(pc.BaseURL)
		}
	}
	if pc.BaseURL == "" {
		pc.BaseURL = company.BaseURL
	}
	if pc.Cheapest != "" {
		company.Cheapest = pc.Cheapest
	}
	if pc.Small != "" {
		company.Small = pc.Small
	}
	key := ""
	if pc.APIKeyEnv != "" {
		key = os.Getenv(pc.APIKeyEnv)
	}
	windows := map[string]int{}
	var models []string
	for _, m := range pc.Models {
		models = append(models, m.ID)
		if m.Window > 0 {
			windows[m.ID] = m.Window
		}
	}
	var client providers.Client
	var err error
	switch pc.Kind {
	case "openai":
		client, err = openai.New(openai.Config{Name: pc.Name, Company: company.Name, BaseURL: pc.BaseURL, APIKey: key, Models: models, Windows: windows, HTTPClient: hc, PromptCacheKey: pc.PromptCacheKey})
	case "anthropic":
		client, err = anthropic.New(anthropic.Config{Name: pc.Name, BaseURL: pc.BaseURL, APIKey: key, Models: models, Windows: windows, HTTPClient: hc})
	case "ollama":
		client, err = ollama.New(ollama.Config{Name: pc.Name, BaseURL: pc.BaseURL, Models: models, Windows: windows, HTTPClient: hc})
	default:
		err = fmt.Errorf("kind %q is not openai, anthropic or ollama", pc.Kind)
	}
	if err != nil {
		return nil, err
	}
	return &entry{cfg: pc, company: company, client: client}, nil
}

// Refresh asks every provider for its models. A provider that answers
// replaces what it listed before (a model it no longer serves goes); one
// that cannot be reached keeps its configured models and its error is
// remembered until it answers again. Calls at once share one reading:
// each would ask every provider for its whole list again. The reading is
// not cut short when the caller that started it leaves, as the others wait
// for it (listTimeout bounds each list); a caller whose ctx ends returns.
func (c *Catalog) Refresh(ctx context.Context) {
	read := c.reading.DoChan("", func() (any, error) {
		c.refresh(context.WithoutCancel(ctx))
		return nil, nil
	})
	select {
	case <-read:
	case <-ctx.Done():
	}
}

// refresh reads every provider's list once.
func (c *Catalog) refresh(ctx context.Context) {
	c.mu.RLock()
	names := append([]string(nil), c.order...)
	c.mu.RUnlock()
	// Each list at once: one after another, a provider that hangs held
	// every later one's list (and the window it reads) for listTimeout.
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() { c.refreshOne(ctx, name) })
	}
	wg.Wait()
}

// refreshOne reads one provider's list and keeps what it says.
func (c *Catalog) refreshOne(ctx context.Context, name string) {
	c.mu.RLock()
	e := c.entries[name]
	c.mu.RUnlock()
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	infos, err := e.client.Models(lctx)
	cancel()
	c.mu.Lock()
	was, seen := c.errs[name]
	c.errs[name] = err
	if err == nil {
		c.listOK[name] = true
		for ref := range c.listed {
			if strings.HasPrefix(ref, name+"/") {
				delete(c.listed, ref)
			}
		}
	}
	for _, mi := range infos {
		mi.Provider = name
		c.listed[name+"/"+mi.ID] = mi
	}
	c.mu.Unlock()
	// Said once when it changes, not at every re-read.
	switch {
	case err != nil && (!seen || was == nil):
		c.log.Warn().Err(err).Str("provider", name).Str("base_url", e.cfg.BaseURL).Msg("provider's model list unavailable; agentd keeps trying")
	case err == nil && was != nil:
		c.log.Info().Str("provider", name).Int("models", len(infos)).Msg("provider answers again")
	}
}

// listTimeout bounds one provider's answer to a list request, so a server
// that hangs cannot stall the others.
const listTimeout = 30 * time.Second

// Watch re-reads the providers' lists until ctx ends: at once, then every
// `every` while all answer, sooner (Backoff) while one does not, and at
// once after a call finds a provider unreachable or back. The caller owns
// the goroutine that runs it.
func (c *Catalog) Watch(ctx context.Context, every time.Duration) {
	failures := 0
	for {
		c.refresh(ctx) // not Refresh: a caller's Refresh must not join a timed reading begun before it asked
		failing := len(c.ProviderErrors()) > 0
		wait := every
		if failing {
			wait = Backoff(failures, every)
		} else {
			failures = 0
		}
		fired, stop := c.timer(wait)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-c.kick:
			// A re-read a failing call asked for does not double the wait:
			// a down provider's retried calls kick several times a
			// second, which would push the next timed read minutes away
			// and leave a provider that came back unseen that long.
		case <-fired:
			if failing {
				failures++
			}
		}
		stop()
	}
}

func newTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// Backoff is the wait before the next read of a list after n failed reads
// in a row: one second, doubling, never more than most.
func Backoff(n int, most time.Duration) time.Duration {
	d := time.Second
	for i := 0; i < n && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// watched notes what each call says of its provider: unreachable, or
// answering again after it was; either asks Watch to re-read the lists.
type watched struct {
	providers.Client
	cat  *Catalog
	name string
}

// Stream passes the call on, and makes every usage its provider reports
// sane (chat.Usage.Sane): here, where each provider's answers come in.
func (w watched) Stream(ctx context.Context, req providers.Request, emit func(providers.Event)) (providers.Response, error) {
	pass := emit
	if emit != nil {
		pass = func(ev providers.Event) {
			if ev.Usage != nil {
				sane := ev.Usage.Sane() // a copy: the adapter may keep its own
				ev.Usage = &sane
			}
			emit(ev)
		}
	}
	res, err := w.Client.Stream(ctx, req, pass)
	w.cat.observe(w.name, err)
	res.Usage = res.Usage.Sane()
	return res, err
}

// CheckSettings passes the check to the wrapped client: the wrapper must
// hide no protocol's rules.
func (w watched) CheckSettings(s chat.Settings) error {
	if c, ok := w.Client.(providers.SettingsChecker); ok {
		return c.CheckSettings(s)
	}
	return nil
}

var _ providers.SettingsChecker = watched{}

func (c *Catalog) observe(name string, err error) {
	c.mu.Lock()
	was := c.errs[name]
	down := providers.Unreachable(err)
	if down {
		c.errs[name] = err
	}
	c.mu.Unlock()
	if down || (err == nil && was != nil) {
		select {
		case c.kick <- struct{}{}:
		default: // a re-read is already asked for
		}
	}
}

// ProviderErrors returns the last list error of each provider that failed.
func (c *Catalog) ProviderErrors() map[string]error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string]error{}
	for k, v := range c.errs {
		if v != nil {
			out[k] = v
		}
	}
	return out
}

// Split parses "provider/model".
func Split(ref string) (provider, model string, err error) {
	provider, model, ok := strings.Cut(ref, "/")
	if !ok || provider == "" || model == "" {
		return "", "", fmt.Errorf("model %q: want \"provider/model\": %w", ref, ErrUnknownModel)
	}
	return provider, model, nil
}

// Resolve returns the client and what is known of a model.
func (c *Catalog) Resolve(ref string) (providers.Client, providers.ModelInfo, error) {
	pname, model, err := Split(ref)
	if err != nil {
		return nil, providers.ModelInfo{}, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return nil, providers.ModelInfo{}, ErrNoProvider
	}
	e, ok := c.entries[pname]
	if !ok {
		return nil, providers.ModelInfo{}, fmt.Errorf("model %q: no provider named %q (configured: %s): %w", ref, pname, strings.Join(c.order, ", "), ErrUnknownModel)
	}
	return e.client, c.infoLocked(e, model), nil
}

// Check refuses a model its provider does not serve: one neither configured
// nor in the provider's last list. A provider whose list has never answered
// cannot say, so any name of it passes.
func (c *Catalog) Check(ref string) error {
	if _, _, err := c.Resolve(ref); err != nil {
		return err
	}
	pname, model, _ := Split(ref)
	c.mu.RLock()
	ok := !c.listOK[pname]
	c.mu.RUnlock()
	var known []string
	for _, mi := range c.Models() {
		if mi.Provider == pname {
			ok = ok || mi.ID == model
			known = append(known, pname+"/"+mi.ID)
		}
	}
	if ok {
		return nil
	}
	return fmt.Errorf("model %q: %s does not serve it; it serves %s: %w", ref, pname, strings.Join(known, ", "), ErrUnknownModel)
}

func (c *Catalog) infoLocked(e *entry, model string) providers.ModelInfo {
	ref := e.cfg.Name + "/" + model
	mi, listed := c.listed[ref]
	if !listed {
		mi = providers.ModelInfo{ID: model, Local: e.company.Local}
	}
	mi.Provider = e.cfg.Name
	// A server on this computer lists the window it runs: a configured
	// window may lower that figure, never raise it (issue 16).
	serverBound := listed && e.company.Local && mi.WindowSource == providers.SourceList && mi.Window > 0
	for _, m := range e.cfg.Models {
		if m.ID == model {
			if m.Window > 0 && (!serverBound || m.Window < mi.Window) {
				mi.Window, mi.WindowSource = m.Window, providers.SourceConfig
			}
			mi.Vision = mi.Vision || m.Vision
			mi.ToolsInWords = m.Tools == "words"
		}
	}
	if mi.Window <= 0 {
		mi.Window, mi.WindowSource = providers.DefaultRemoteWindow, providers.SourceDefault
		if e.company.Local {
			mi.Window = providers.DefaultLocalWindow
		}
	}
	if w := c.learned[ref]; w > 0 && w < mi.Window {
		mi.Window, mi.WindowSource = w, providers.SourceRefusal
	}
	return mi
}

// Models lists every configured or listed model, sorted by provider order.
func (c *Catalog) Models() []providers.ModelInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []providers.ModelInfo
	for _, name := range c.order {
		e := c.entries[name]
		seen := map[string]bool{}
		var ids []string
		for _, m := range e.cfg.Models {
			ids = append(ids, m.ID)
		}
		for ref, mi := range c.listed {
			if strings.HasPrefix(ref, name+"/") {
				ids = append(ids, mi.ID)
			}
		}
		sort.Strings(ids[len(e.cfg.Models):])
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				out = append(out, c.infoLocked(e, id))
			}
		}
	}
	return out
}

// Learn records a window a refusal named for ref; the smaller one wins and
// is persisted for every chat of the daemon.
func (c *Catalog) Learn(ctx context.Context, ref string, window int) (int, error) {
	if window <= 0 {
		return 0, nil
	}
	pname, model, err := Split(ref)
	if err != nil {
		return 0, err
	}
	kept := window
	if c.store != nil {
		if kept, err = c.store.LearnWindow(ctx, pname, model, window); err != nil {
			return 0, err
		}
	}
	c.mu.Lock()
	c.learned[ref] = kept
	c.mu.Unlock()
	return kept, nil
}

// SummaryModels returns the models to try for summarising a chat on ref, in
// order: the provider's cheapest, its small model, then the chat's own. A
// model on this computer only ever uses the chat's own model (already
// loaded; loading a second would evict it).
func (c *Catalog) SummaryModels(ref string) []string {
	pname, _, err := Split(ref)
	if err != nil {
		return nil
	}
	c.mu.RLock()
	e, ok := c.entries[pname]
	c.mu.RUnlock()
	if !ok || e.company.Local {
		return []string{ref}
	}
	var out []string
	for _, m := range []string{e.company.Cheapest, e.company.Small} {
		if m != "" && pname+"/"+m != ref {
			out = append(out, pname+"/"+m)
		}
	}
	return append(out, ref)
}

// Default returns the model for a chat that names none: the configured
// default, else the first model a provider lists or configures ("" when
// there is none).
func (c *Catalog) Default(configured string) string {
	if configured != "" {
		return configured
	}
	for _, mi := range c.Models() {
		if !mi.Local || mi.Loaded || mi.WindowSource != providers.SourceDefault {
			return mi.Provider + "/" + mi.ID
		}
	}
	if ms := c.Models(); len(ms) > 0 {
		return ms[0].Provider + "/" + ms[0].ID
	}
	return ""
}

// Bigger returns a ready model that reads clearly more than need tokens
// (at least 1.5 times), preferring the smallest such window.
func (c *Catalog) Bigger(need int) (ref string, window int, ok bool) {
	for _, mi := range c.Models() {
		if mi.Local && !mi.Loaded {
			continue
		}
		if mi.Window*2 >= need*3 && (!ok || mi.Window < window) {
			ref, window, ok = mi.Provider+"/"+mi.ID, mi.Window, true
		}
	}
	return ref, window, ok
}
