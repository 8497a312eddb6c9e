package modelcatalog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/providers"
)

// listed is a provider client whose model list says one window.
type listed struct{ info providers.ModelInfo }

func (l listed) Stream(context.Context, providers.Request, func(providers.Event)) (providers.Response, error) {
	return providers.Response{}, nil
}

func (l listed) Models(context.Context) ([]providers.ModelInfo, error) {
	return []providers.ModelInfo{l.info}, nil
}

// Issue 16: the window a server on this computer says it runs bounds a
// configured one; a remote list does not (there the config overrides it).
func TestListedWindowBoundsConfiguredOnLocalServers(t *testing.T) {
	tests := map[string]struct {
		company            string
		configured, listed int
		want               int
		source             string
	}{
		"local server runs less than configured": {"llamacpp", 32768, 2048, 2048, providers.SourceList},
		"configured under the local server's":    {"llamacpp", 1024, 2048, 1024, providers.SourceConfig},
		"remote list is overridden by config":    {"openai", 1047576, 128000, 1047576, providers.SourceConfig},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			company, ok := providers.LookupCompany(tc.company)
			if !ok {
				t.Fatalf("no company %s", tc.company)
			}
			c, err := New(context.Background(), nil, nil, nil, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			cfg := configs.Provider{Name: "p", Kind: "openai", Models: []configs.Model{{ID: "m", Window: tc.configured}}}
			c.entries["p"] = &entry{cfg: cfg, company: company, client: listed{providers.ModelInfo{ID: "m", Window: tc.listed, WindowSource: providers.SourceList, Local: company.Local}}}
			c.order = []string{"p"}
			c.Refresh(context.Background())
			_, mi, err := c.Resolve("p/m")
			if err != nil {
				t.Fatal(err)
			}
			if mi.Window != tc.want || mi.WindowSource != tc.source {
				t.Errorf("window %d (%s), want %d (%s)", mi.Window, mi.WindowSource, tc.want, tc.source)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		failures int
		most     time.Duration
		want     time.Duration
	}{
		{0, time.Minute, time.Second},
		{1, time.Minute, 2 * time.Second},
		{5, time.Minute, 32 * time.Second},
		{6, time.Minute, time.Minute},
		{1000, time.Minute, time.Minute},
		{0, 20 * time.Millisecond, 20 * time.Millisecond},
	}
	for _, tc := range tests {
		if got := Backoff(tc.failures, tc.most); got != tc.want {
			t.Errorf("Backoff(%d, %v) = %v, want %v", tc.failures, tc.most, got, tc.want)
		}
	}
}

// A provider down at start whose calls fail (each kicking a re-read) is
// still re-read on the doubling backoff from 1 s: the kicks' failed reads
// do not advance it, so a provider that comes back is seen within seconds.
func TestKickedFailuresDoNotDoubleTheWait(t *testing.T) {
	down := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	l := &lists{answers: [][]string{nil}, errs: []error{down}}
	c := listing(t, l)
	waits, fire := make(chan time.Duration), make(chan time.Time)
	c.timer = func(d time.Duration) (<-chan time.Time, func() bool) {
		waits <- d
		return fire, func() bool { return true }
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Watch(ctx, 5*time.Minute); close(done) }()
	defer func() { cancel(); <-done }()

	var got []time.Duration
	got = append(got, <-waits)
	for range 5 { // a down provider's call and its retries
		c.observe("p", down)
		got = append(got, <-waits)
	}
	fire <- time.Now() // the timed read fails too: now it doubles
	got = append(got, <-waits)
	want := []time.Duration{time.Second, time.Second, time.Second, time.Second, time.Second, time.Second, 2 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
}

// lists is a provider client whose list answers what each call is given.
type lists struct {
	answers [][]string
	errs    []error
	calls   int
}

func (l *lists) Stream(context.Context, providers.Request, func(providers.Event)) (providers.Response, error) {
	return providers.Response{}, nil
}

func (l *lists) Models(context.Context) ([]providers.ModelInfo, error) {
	i := min(l.calls, len(l.answers)-1)
	l.calls++
	var out []providers.ModelInfo
	for _, id := range l.answers[i] {
		out = append(out, providers.ModelInfo{ID: id, Window: 4096, WindowSource: providers.SourceList})
	}
	return out, l.errs[i]
}

// A list that answers replaces the one before; one that fails keeps it and
// is an error until the provider answers again; Check refuses only what an
// answering provider does not serve.
func TestRefreshReplacesListsAndChecks(t *testing.T) {
	down := errors.New("connection refused")
	l := &lists{answers: [][]string{nil, {"a", "b"}, {"b"}, nil}, errs: []error{down, nil, nil, down}}
	c := listing(t, l)
	ids := func() string {
		var out []string
		for _, mi := range c.Models() {
			out = append(out, mi.ID)
		}
		return strings.Join(out, ",")
	}
	steps := []struct {
		models  string
		failing bool
		refused []string
		allowed []string
	}{
		{"", true, nil, []string{"p/anything"}},
		{"a,b", false, []string{"p/c"}, []string{"p/a", "p/b"}},
		{"b", false, []string{"p/a"}, []string{"p/b"}},
		{"b", true, []string{"p/a"}, []string{"p/b"}},
	}
	for i, st := range steps {
		c.Refresh(context.Background())
		if got := ids(); got != st.models {
			t.Errorf("step %d: models %q, want %q", i, got, st.models)
		}
		if _, failing := c.ProviderErrors()["p"]; failing != st.failing {
			t.Errorf("step %d: failing %v, want %v", i, failing, st.failing)
		}
		for _, ref := range st.refused {
			if err := c.Check(ref); !errors.Is(err, ErrUnknownModel) {
				t.Errorf("step %d: Check(%s) = %v, want refused", i, ref, err)
			}
		}
		for _, ref := range st.allowed {
			if err := c.Check(ref); err != nil {
				t.Errorf("step %d: Check(%s) = %v", i, ref, err)
			}
		}
	}
	if err := c.Check("q/a"); !errors.Is(err, ErrUnknownModel) || !strings.Contains(err.Error(), "configured: p") {
		t.Errorf("Check of an unknown provider: %v", err)
	}
}

// gated is a provider client whose list answers once another provider's
// list was asked for (or its context ends).
type gated struct{ other <-chan struct{} }

func (g gated) Stream(context.Context, providers.Request, func(providers.Event)) (providers.Response, error) {
	return providers.Response{}, nil
}

func (g gated) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	select {
	case <-g.other:
		return []providers.ModelInfo{{ID: "a", Window: 4096, WindowSource: providers.SourceList}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// asked closes its channel when its list is asked for.
type asked struct {
	once sync.Once
	ch   chan struct{}
}

func (a *asked) Stream(context.Context, providers.Request, func(providers.Event)) (providers.Response, error) {
	return providers.Response{}, nil
}

func (a *asked) Models(context.Context) ([]providers.ModelInfo, error) {
	a.once.Do(func() { close(a.ch) })
	return []providers.ModelInfo{{ID: "b", Window: 2048, WindowSource: providers.SourceList}}, nil
}

// A provider whose list hangs does not hold the next one's: the lists are
// asked for together. Read one after another, the first (which answers
// only once the second was asked) hangs until its context ends.
func TestAHangingListDoesNotHoldTheOthers(t *testing.T) {
	b := &asked{ch: make(chan struct{})}
	c, err := New(context.Background(), nil, nil, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	company, _ := providers.LookupCompany("llamacpp")
	c.entries["first"] = &entry{cfg: configs.Provider{Name: "first", Kind: "openai"}, company: company, client: gated{other: b.ch}}
	c.entries["second"] = &entry{cfg: configs.Provider{Name: "second", Kind: "openai"}, company: company, client: b}
	c.order = []string{"first", "second"}
	// A bound for the old, sequential reading only; never reached otherwise.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c.Refresh(ctx)
	if errs := c.ProviderErrors(); len(errs) != 0 {
		t.Fatalf("list errors %v: the first list waited for the second, read after it", errs)
	}
}

// listing is a catalog of one OpenAI-style provider "p" whose lists l
// answers.
func listing(t *testing.T, l providers.Client) *Catalog {
	t.Helper()
	c, err := New(context.Background(), nil, nil, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	company, _ := providers.LookupCompany("openai")
	c.entries["p"] = &entry{cfg: configs.Provider{Name: "p", Kind: "openai"}, company: company, client: l}
	c.order = []string{"p"}
	return c
}

// held is a provider client whose list answers once released, counting
// the times it was asked.
type held struct {
	asked   atomic.Int32
	release chan struct{}
}

func (h *held) Stream(context.Context, providers.Request, func(providers.Event)) (providers.Response, error) {
	return providers.Response{}, nil
}

func (h *held) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	h.asked.Add(1)
	select {
	case <-h.release:
		return []providers.ModelInfo{{ID: "a", Window: 4096, WindowSource: providers.SourceList}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Refreshes asked for at once, while a provider takes its time to list its
// models, share one reading: the provider is asked once, and every caller
// returns with its answer.
func TestRefreshesAtOnceShareOneReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &held{release: make(chan struct{})}
		c := listing(t, l)
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() { c.Refresh(context.Background()) })
		}
		synctest.Wait() // every caller is waiting: for the provider, or for the reading under way
		close(l.release)
		wg.Wait()
		if n := l.asked.Load(); n != 1 {
			t.Fatalf("5 refreshes at once asked the provider %d times, want once", n)
		}
		if _, _, err := c.Resolve("p/a"); err != nil {
			t.Fatalf("the shared reading's model: %v", err)
		}
	})
}
