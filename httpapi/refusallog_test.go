package httpapi

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/configs"
)

// TestRefusalsAreLoggedSayingWhyAtMostEvery10s: docs/security.md promises
// every refusal is logged, at most once every few seconds per kind, with no
// secret in the line. A 401, a 400 and a 429 each leave one line naming the
// status, what the client was told and (once known) the tenant; the same
// refusal again within 10 s leaves none, and a wrong token is not logged.
func TestRefusalsAreLoggedSayingWhyAtMostEvery10s(t *testing.T) {
	s, logs := testServer(brokenHub{}, map[string]string{"tok-acme": "acme"}, func(c *configs.Config) { c.Limits.RequestsPerSecond = 1 })
	send := func(token, body string) int {
		r := httptest.NewRequest(http.MethodPost, "/v1/chats", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+token)
		return serveOne(s, r).Code
	}
	// Burst 2: two bad bodies reach the handler, the third is rate-limited.
	got := []int{send("wrong-secret-token", "{}"), send("tok-acme", `{"bogus": 1}`), send("tok-acme", `{"bogus": 2}`), send("tok-acme", "{}")}
	if want := []int{401, 400, 400, 429}; !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want one line for each of 401, 400, 429 (the second 400 sampled away), got %d: %s", len(lines), logs)
	}
	for i, want := range []struct{ status, says, tenant string }{
		{`"status":401`, "missing or unknown bearer token", ""},
		{`"status":400`, "bogus", `"tenant":"acme"`},
		{`"status":429`, "rate_limited", `"tenant":"acme"`},
	} {
		l := lines[i]
		if !strings.Contains(l, want.status) || !strings.Contains(l, want.says) || !strings.Contains(l, want.tenant) || !strings.Contains(l, `"request_id"`) {
			t.Errorf("line %d %s: want %s, %q and %s", i, l, want.status, want.says, want.tenant)
		}
	}
	if strings.Contains(logs.String(), "wrong-secret-token") || strings.Contains(logs.String(), "tok-acme") {
		t.Fatalf("a token is in the log: %s", logs)
	}
}
