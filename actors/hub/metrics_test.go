package hub

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
)

// scrapeTurns is GET /metrics's lines of the turn and token counters.
func scrapeTurns(t *testing.T, m *Metrics) string {
	return scrape(t, m, "agentd_turns_total", "agentd_tokens_total")
}

// scrape is GET /metrics's lines that name one of names.
func scrape(t *testing.T, m *Metrics, names ...string) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if slices.ContainsFunc(names, func(n string) bool { return strings.Contains(line, n) }) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestTurnDoneSeries: before any turn /metrics has no turn or token
// series; after turns from many chats at once, one series per problem kind
// and per direction, each the sum of its turns.
func TestTurnDoneSeries(t *testing.T) {
	m := newMetrics()
	if got := scrapeTurns(t, m); got != "" {
		t.Fatalf("before any turn:\n%s", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				m.TurnDone("", chat.Usage{InputTokens: 10, OutputTokens: 3, CachedTokens: 2, ReasoningTokens: 2})
				m.TurnDone(chat.ProblemTooLong, chat.Usage{InputTokens: 7})
			}
		})
	}
	wg.Wait()
	m.TurnDone(chat.ProblemProvider, chat.Usage{OutputTokens: 1})
	want := `# HELP agentd_tokens_total Tokens reported by providers, by purpose (turn, summary, learn) and direction (in, out; cached is part of in, reasoning part of out).
# TYPE agentd_tokens_total counter
agentd_tokens_total{direction="cached",purpose="turn"} 800
agentd_tokens_total{direction="in",purpose="turn"} 6800
agentd_tokens_total{direction="out",purpose="turn"} 1201
agentd_tokens_total{direction="reasoning",purpose="turn"} 800
# HELP agentd_turns_total Turns finished, by problem kind (empty: answered).
# TYPE agentd_turns_total counter
agentd_turns_total{problem=""} 400
agentd_turns_total{problem="provider"} 1
agentd_turns_total{problem="too-long"} 400`
	if got := scrapeTurns(t, m); got != want {
		t.Fatalf("after the turns:\n%s\nwant\n%s", got, want)
	}
}

// TestAFoldsTokensAreCountedAsSummary: the tokens a fold's model calls
// cost reach agentd_tokens_total under purpose "summary", apart from the
// turns' tokens; the learner's run on the folded words under "learn".
func TestAFoldsTokensAreCountedAsSummary(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "The person asked twice about the weather in Paris; it was sunny.", Usage: &chat.Usage{InputTokens: 700, OutputTokens: 30, CachedTokens: 100}}
	}})
	defer fake.Close()
	h := hubOn(t, testkit.Config(t.TempDir(), fake.URL(), 32768), func(s Store) Store { return s })
	ctx := context.Background()
	c, err := h.CreateChat(ctx, "alice", api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []api.Message
	for range 3 {
		msgs = append(msgs, api.Message{Role: api.RoleUser, Content: "What is the weather in Paris?"}, api.Message{Role: api.RoleAssistant, Content: "Sunny."})
	}
	if _, err := h.AddMessages(ctx, "alice", c.ID, "", msgs); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Compact(ctx, "alice", c.ID, ""); err != nil {
		t.Fatal(err)
	}
	got := scrape(t, h.metrics, "agentd_tokens_total{")
	for _, line := range []string{`agentd_tokens_total{direction="in",purpose="summary"} 700`, `agentd_tokens_total{direction="out",purpose="summary"} 30`,
		`agentd_tokens_total{direction="cached",purpose="summary"} 100`} {
		if !strings.Contains(got, line) {
			t.Fatalf("after a fold /metrics has\n%s\nwant the line %s", got, line)
		}
	}
	if strings.Contains(got, `purpose="turn"`) {
		t.Fatalf("a fold was counted as a turn:\n%s", got)
	}
	// The fold hands the person's words to the learner, whose run asks
	// the model once.
	learnt := `agentd_tokens_total{direction="in",purpose="learn"} 700`
	deadline := time.Now().Add(time.Minute) // a liveness bound, not a speed check
	for got = scrape(t, h.metrics, "agentd_tokens_total{"); !strings.Contains(got, learnt); got = scrape(t, h.metrics, "agentd_tokens_total{") {
		if time.Now().After(deadline) {
			t.Fatalf("the learner's run is not counted: /metrics has\n%s\nwant the line %s", got, learnt)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDurableBucketsAreRoundAndFine: /metrics names each bucket of the
// durable batches by a round bound (at most two significant digits), from
// 20 µs or less to 5 s or more, each at most 1.5 times the one before, and
// a batch of 1.2 ms lands under 1.5 ms, not under 1 ms.
func TestDurableBucketsAreRoundAndFine(t *testing.T) {
	m := newMetrics()
	m.storeDurable(1200 * time.Microsecond)
	le := regexp.MustCompile(`^agentd_store_durable_seconds_bucket\{le="([^"]+)"\} (\d+)$`)
	var bounds []float64
	counts := map[string]string{}
	for _, line := range strings.Split(scrape(t, m, "agentd_store_durable_seconds_bucket"), "\n") {
		sub := le.FindStringSubmatch(line)
		if sub == nil {
			t.Fatalf("bucket line %q", line)
		}
		counts[sub[1]] = sub[2]
		if sub[1] == "+Inf" {
			continue
		}
		b, err := strconv.ParseFloat(sub[1], 64)
		if err != nil {
			t.Fatalf("bound %q: %v", sub[1], err)
		}
		mantissa, _, _ := strings.Cut(sub[1], "e")
		if digits := strings.Trim(strings.ReplaceAll(mantissa, ".", ""), "0"); len(digits) > 2 {
			t.Errorf("bound %q is not round", sub[1])
		}
		if n := len(bounds); n > 0 && (b <= bounds[n-1] || b > 1.5*bounds[n-1]*(1+1e-9)) {
			t.Errorf("bound %g after %g: want above it and at most 1.5 times it", b, bounds[n-1])
		}
		bounds = append(bounds, b)
	}
	if len(bounds) == 0 || bounds[0] > 20e-6 || bounds[len(bounds)-1] < 5 {
		t.Fatalf("bounds %v: want 20 µs or less to 5 s or more", bounds)
	}
	if counts["0.001"] != "0" || counts["0.0015"] != "1" || counts["+Inf"] != "1" {
		t.Errorf("a batch of 1.2 ms: counts under 1 ms, 1.5 ms and +Inf are %q, %q, %q; want 0, 1, 1", counts["0.001"], counts["0.0015"], counts["+Inf"])
	}
}
