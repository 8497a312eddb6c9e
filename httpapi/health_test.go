package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentd/agentd/api"
)

// healthHub reports the health it is given.
type healthHub struct {
	brokenHub
	h api.Health
}

func (h healthHub) Health() api.Health { return h.h }

// TestAFailingStoreAnswersHealthz503: a store that refuses every write
// until a restart answered 200, so the liveness probe of the Kubernetes
// sketch (and curl -f) never restarted it; now 503, with the same body,
// which api.Client.Health still reads. Degraded providers stay 200.
func TestAFailingStoreAnswersHealthz503(t *testing.T) {
	for status, want := range map[string]int{api.HealthOK: 200, api.HealthDegraded: 200, api.HealthFailing: 503} {
		t.Run(status, func(t *testing.T) {
			s, _ := testServer(healthHub{h: api.Health{Status: status}}, nil, nil)
			if got := serveOne(s, httptest.NewRequest(http.MethodGet, "/healthz", nil)).Code; got != want {
				t.Fatalf("/healthz of a daemon %s answered %d, want %d", status, got, want)
			}
			srv := httptest.NewServer(s)
			defer srv.Close()
			h, err := (&api.Client{BaseURL: srv.URL}).Health(context.Background())
			if err != nil || h.Status != status {
				t.Fatalf("api.Client.Health: %+v, %v; want status %s", h, err, status)
			}
		})
	}
}
