package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestWebGuardDecides(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	cases := map[string]struct {
		tokens  bool
		allowed []string
		method  string
		host    string
		header  map[string]string
		want    int
	}{
		"loopback address":                 {method: "GET", host: "127.0.0.1:8420", want: 204},
		"other loopback address":           {method: "GET", host: "127.3.2.1:8420", want: 204},
		"localhost without port":           {method: "GET", host: "localhost", want: 204},
		"localhost in capitals, final dot": {method: "GET", host: "LocalHost.:8420", want: 204},
		"ipv6 loopback":                    {method: "GET", host: "[::1]:8420", want: 204},
		"ipv6 loopback without port":       {method: "GET", host: "[::1]", want: 204},
		"rebinding name":                   {method: "GET", host: "attacker.example:8420", want: 421},
		"rebinding name without port":      {method: "GET", host: "attacker.example", want: 421},
		"a subdomain of localhost":         {method: "GET", host: "evil.localhost.attacker.example", want: 421},
		"private address":                  {method: "GET", host: "192.168.1.5:8420", want: 421},
		"no host":                          {method: "GET", host: "", want: 421},
		"configured name":                  {allowed: []string{"Agentd.LAN"}, method: "GET", host: "agentd.lan:8420", want: 204},
		"tokens: any host":                 {tokens: true, method: "GET", host: "agentd.example.com", want: 204},
		"tokens and a list: the list":      {tokens: true, allowed: []string{"agentd.lan"}, method: "GET", host: "other.example", want: 421},
		"post without origin (curl)":       {method: "POST", host: "127.0.0.1:8420", want: 204},
		"post from its own origin":         {method: "POST", host: "127.0.0.1:8420", header: map[string]string{"Origin": "http://127.0.0.1:8420", "Sec-Fetch-Site": "same-origin"}, want: 204},
		"post, own origin, no fetch data":  {method: "POST", host: "localhost:8420", header: map[string]string{"Origin": "http://localhost:8420"}, want: 204},
		"post from a foreign origin":       {method: "POST", host: "127.0.0.1:8420", header: map[string]string{"Origin": "https://attacker.example"}, want: 403},
		"post from another port":           {method: "POST", host: "127.0.0.1:8420", header: map[string]string{"Origin": "http://127.0.0.1:3000"}, want: 403},
		"post same-site, another port":     {method: "POST", host: "localhost:8420", header: map[string]string{"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}, want: 403},
		"post cross-site, no origin":       {method: "POST", host: "127.0.0.1:8420", header: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403},
		"post from an opaque origin":       {method: "POST", host: "127.0.0.1:8420", header: map[string]string{"Origin": "null"}, want: 403},
		"delete from a foreign origin":     {method: "DELETE", host: "127.0.0.1:8420", header: map[string]string{"Origin": "https://attacker.example"}, want: 403},
		"patch cross-site with tokens":     {tokens: true, method: "PATCH", host: "agentd.example.com", header: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403},
		"get from a foreign origin":        {method: "GET", host: "127.0.0.1:8420", header: map[string]string{"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"}, want: 204},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newWebGuard(tc.allowed, tc.tokens, zerolog.Nop()).wrap(ok)
			r := httptest.NewRequest(tc.method, "/v1/chats", strings.NewReader("{}"))
			r.Host = tc.host
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.want, w.Body)
			}
			if w.Code >= 400 && !strings.Contains(w.Body.String(), `"kind"`) {
				t.Fatalf("the refusal is not the API's error shape: %s", w.Body)
			}
		})
	}
}

func TestWebGuardLogsRefusalsOnceAWhileWithoutSecrets(t *testing.T) {
	var logs bytes.Buffer
	h := newWebGuard(nil, false, zerolog.New(&logs)).wrap(http.NotFoundHandler())
	for range 5 {
		r := httptest.NewRequest("GET", "/v1/chats/x/events?access_token=s3cret-token", nil)
		r.Host = "attacker.example"
		h.ServeHTTP(httptest.NewRecorder(), r)
		r = httptest.NewRequest("POST", "/v1/chats?access_token=s3cret-token", nil)
		r.Host = "127.0.0.1:8420"
		r.Header.Set("Origin", "https://attacker.example")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("ten refusals of two kinds logged %d lines, want one per kind:\n%s", len(lines), logs.String())
	}
	if !strings.Contains(lines[0], "attacker.example") || !strings.Contains(lines[1], "https://attacker.example") {
		t.Fatalf("the log does not say what was refused:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Fatalf("the log holds the query's token:\n%s", logs.String())
	}
}

// TestOnePagesFloodHidesNoOtherPagesLine: the guard's lines were sampled
// once per kind for everyone, so a page flooding the daemon hid the line
// of the next page refused, or of a rebinding name, for 10 s.
func TestOnePagesFloodHidesNoOtherPagesLine(t *testing.T) {
	var logs bytes.Buffer
	h := newWebGuard(nil, false, zerolog.New(&logs)).wrap(http.NotFoundHandler())
	refuse := func(host, origin string) {
		r := httptest.NewRequest("POST", "/v1/chats", nil)
		r.Host = host
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusForbidden && w.Code != http.StatusMisdirectedRequest {
			t.Fatalf("host %q origin %q: status %d, want a refusal", host, origin, w.Code)
		}
	}
	for range 20 {
		refuse("127.0.0.1:8420", "https://flood.example")
		refuse("flood.example", "")
	}
	refuse("127.0.0.1:8420", "https://other.example")
	refuse("other.example", "")
	for _, want := range []string{`"origin":"https://other.example"`, `"host":"other.example"`} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the refusal naming %s was not logged after another page's flood:\n%s", want, logs.String())
		}
	}
	if n := strings.Count(logs.String(), "flood.example"); n != 2 {
		t.Fatalf("the flood logged %d lines, want one per kind:\n%s", n, logs.String())
	}
}
