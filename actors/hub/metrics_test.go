package hub

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentd/agentd/chat"
)

// scrapeTurns is GET /metrics's lines of the turn and token counters.
func scrapeTurns(t *testing.T, m *Metrics) string {
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
		if strings.Contains(line, "agentd_turns_total") || strings.Contains(line, "agentd_tokens_total") {
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
				m.TurnDone("", chat.Usage{InputTokens: 10, OutputTokens: 3, CachedTokens: 2})
				m.TurnDone(chat.ProblemTooLong, chat.Usage{InputTokens: 7})
			}
		})
	}
	wg.Wait()
	m.TurnDone(chat.ProblemProvider, chat.Usage{OutputTokens: 1})
	want := `# HELP agentd_tokens_total Tokens reported by providers for turns, by direction.
# TYPE agentd_tokens_total counter
agentd_tokens_total{direction="cached"} 800
agentd_tokens_total{direction="in"} 6800
agentd_tokens_total{direction="out"} 1201
# HELP agentd_turns_total Turns finished, by problem kind (empty: answered).
# TYPE agentd_turns_total counter
agentd_turns_total{problem=""} 400
agentd_turns_total{problem="provider"} 1
agentd_turns_total{problem="too-long"} 400`
	if got := scrapeTurns(t, m); got != want {
		t.Fatalf("after the turns:\n%s\nwant\n%s", got, want)
	}
}
