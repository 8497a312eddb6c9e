package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentd/agentd/console"
)

func TestHandlerServesThePagesAndNothingElse(t *testing.T) {
	srv := httptest.NewServer(console.Handler())
	defer srv.Close()
	cases := map[string]struct {
		method, path string
		status       int
		ctype        string // prefix of Content-Type
		contains     string
	}{
		"page at root":        {"GET", "/", 200, "text/html", `<script src="app.js"`},
		"page by name":        {"GET", "/index.html", 200, "text/html", `<main id="main"`},
		"script":              {"GET", "/app.js", 200, "text/javascript", "function route()"},
		"style":               {"GET", "/style.css", 200, "text/css", "@media (max-width: 700px)"},
		"icon":                {"GET", "/favicon.svg", 200, "image/svg+xml", "<svg"},
		"head of the page":    {"HEAD", "/", 200, "text/html", ""},
		"unknown file":        {"GET", "/secrets.txt", 404, "", ""},
		"an API-looking path": {"GET", "/v2/chats", 404, "", ""},
		"no writes":           {"POST", "/", 405, "", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status != 200 {
				return
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.ctype) {
				t.Fatalf("Content-Type %q, want %s…", ct, tc.ctype)
			}
			if !strings.Contains(string(body), tc.contains) {
				t.Fatalf("body does not contain %q", tc.contains)
			}
			csp := resp.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
				t.Fatalf("Content-Security-Policy %q must allow only the console's own script", csp)
			}
		})
	}
}

func TestUnchangedFilesAreRevalidatedNotResent(t *testing.T) {
	srv := httptest.NewServer(console.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/app.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if etag == "" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q: a new binary's console must show at once", etag, resp.Header.Get("Cache-Control"))
	}
	req, _ := http.NewRequest("GET", srv.URL+"/app.js", nil)
	req.Header.Set("If-None-Match", etag)
	again, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusNotModified {
		t.Fatalf("status %d for an unchanged file, want 304", again.StatusCode)
	}
	other, _ := http.Get(srv.URL + "/style.css")
	other.Body.Close()
	if other.Header.Get("ETag") == etag {
		t.Fatal("two different files share an ETag")
	}
}
