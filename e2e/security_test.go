package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/testkit/openaifake"
)

// TestServeGuardsTheWebAndServesMetricsApart runs the binary as an
// operator would, with /metrics on its own address: the API's address no
// longer serves them, theirs does without a token, and both refuse a Host
// that is not the daemon's (issue 15, items 4 and 6).
func TestServeGuardsTheWebAndServesMetricsApart(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: newBrain(3).Script})
	defer fake.Close()
	metricsPort := freePort(t)
	d := newDaemon(t, daemonConfig{FakeURL: fake.URL(), Window: 32000, Extra: fmt.Sprintf("metrics:\n  listen: \":%d\"\n", metricsPort)})
	d.start()
	get := func(url, host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := d.Client.HTTP.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	if status, body := get(metrics, ""); status != 200 || !strings.Contains(body, "agentd_") {
		t.Fatalf("GET %s: %d %.200s", metrics, status, body)
	}
	if status, _ := get(d.Client.BaseURL+"/metrics", ""); status != 404 {
		t.Fatalf("/metrics on the API's address with metrics.listen set: %d", status)
	}
	for _, url := range []string{metrics, d.Client.BaseURL + "/v1/chats"} {
		if status, _ := get(url, "attacker.example"); status != http.StatusMisdirectedRequest {
			t.Fatalf("GET %s for Host attacker.example: %d, want 421", url, status)
		}
	}
}
