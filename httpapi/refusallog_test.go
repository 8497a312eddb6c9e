package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestOneTenantsRefusalsHideNoOthersLine: the refusals' lines were sampled
// per status across every tenant, so one tenant's flood of 400s (or 429s)
// left another tenant's refusal of the same status unlogged for 10 s. Now
// each tenant's first is logged, and the same tenant's again is not.
func TestOneTenantsRefusalsHideNoOthersLine(t *testing.T) {
	s, logs := testServer(brokenHub{}, map[string]string{"tok-acme": "acme", "tok-other": "other"}, nil)
	send := func(token string) {
		r := httptest.NewRequest(http.MethodPost, "/v1/chats", strings.NewReader(`{"bogus": 1}`))
		r.Header.Set("Authorization", "Bearer "+token)
		if code := serveOne(s, r).Code; code != http.StatusBadRequest {
			t.Fatalf("a bad body answered %d, want 400", code)
		}
	}
	for range 5 {
		send("tok-acme")
	}
	send("tok-other")
	send("tok-other")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"tenant":"acme"`) || !strings.Contains(lines[1], `"tenant":"other"`) {
		t.Fatalf("five 400s of acme then two of other: want one line each, acme's then other's; got %d: %s", len(lines), logs)
	}
}

// TestRefusalSamplersAreBounded: a count of tenants past maxRefusalKeys
// does not grow the samplers; the pairs past it share one sampler per
// status (one line, then none within the interval), and once the
// remembered pairs' interval is over they are forgotten for new ones.
func TestRefusalSamplersAreBounded(t *testing.T) {
	var l refusalLogs
	now := time.Unix(1_000_000, 0)
	for i := range maxRefusalKeys {
		if !l.allow(fmt.Sprint("t", i), 429, now) {
			t.Fatalf("tenant %d's first 429 was not logged", i)
		}
	}
	logged := 0
	for i := range 3 * maxRefusalKeys {
		if l.allow(fmt.Sprint("more", i), 429, now) {
			logged++
		}
	}
	if len(l.last) > maxRefusalKeys || logged != 1 {
		t.Fatalf("past the bound: %d pairs remembered (at most %d), %d lines logged (want the shared sampler's one)", len(l.last), maxRefusalKeys, logged)
	}
	later := now.Add(refusalLogEvery)
	if !l.allow("new", 429, later) || len(l.last) != 1 {
		t.Fatalf("after the interval a new tenant's 429: want it logged and the old pairs forgotten; %d remembered", len(l.last))
	}
}
