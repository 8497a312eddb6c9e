package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/testkit/daemontest"
)

// Outside cluster mode /healthz says nothing of a cluster, and /metrics
// has no cluster series: both are as they were before cluster mode said
// its state (cluster_e2e_test.go tests them in cluster mode).
func TestHealthzAndMetricsSayNoClusterOutsideClusterMode(t *testing.T) {
	fake := newFake(t, echoScript)
	d := daemontest.Start(t, baseConfig(t, fake.URL()), nil)
	ctx := context.Background()
	h := call(t, ctx, http.MethodGet, d.Server.URL+"/healthz", "", "")
	var health map[string]json.RawMessage
	if err := json.Unmarshal([]byte(h.body), &health); err != nil || h.status != http.StatusOK {
		t.Fatalf("/healthz: %d %s %v", h.status, h.body, err)
	}
	if c, ok := health["cluster"]; ok {
		t.Fatalf("/healthz outside cluster mode has cluster %s; want none", c)
	}
	m := call(t, ctx, http.MethodGet, d.Server.URL+"/metrics", "", "")
	if m.status != http.StatusOK || !strings.Contains(m.body, "agentd_heals_total") || strings.Contains(m.body, "agentd_cluster_") {
		t.Fatalf("/metrics outside cluster mode: %d\n%s\nwant agentd's series, none of them agentd_cluster_", m.status, m.body)
	}
}
