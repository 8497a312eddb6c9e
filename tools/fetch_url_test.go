package tools

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
)

func fetchTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/plain", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "just some text")
	})
	mux.HandleFunc("/page", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><title>Tea Guide</title>
<style>body { color: red }</style><script>var secret = "do not show";</script></head>
<body><h1>Oolong</h1><p>Oolong is   partly
oxidised.</p><ul><li>Tieguanyin</li><li>Da Hong Pao</li></ul></body></html>`)
	})
	mux.HandleFunc("/latin1", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
		w.Write([]byte("caf\xe9")) // "café" in Latin-1
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"tea":"oolong"}`)
	})
	mux.HandleFunc("/image", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n"))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "START"+strings.Repeat("y", 5000))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "nope", http.StatusNotFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answers only when the client gives up
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/plain", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestFetchURL(t *testing.T) {
	srv := fetchTestServer(t)
	// Two registries: a generous timeout so a loaded CI machine cannot
	// fail the ordinary cases, and a short one for the server that never
	// answers.
	r, impatient := NewRegistry(), NewRegistry()
	if err := RegisterFetchURL(r, FetchOptions{AllowPrivate: true, MaxBytes: 1000, Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := RegisterFetchURL(impatient, FetchOptions{AllowPrivate: true, Timeout: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		reg       *Registry
		url       string
		want      []string
		notWant   []string
		wantError bool
	}{
		{name: "plain text", url: srv.URL + "/plain", want: []string{"just some text", "text/plain"}},
		{name: "html reduced to text", url: srv.URL + "/page",
			want:    []string{"Tea Guide", "Oolong", "Oolong is partly oxidised.", "Tieguanyin\nDa Hong Pao"},
			notWant: []string{"<p>", "secret", "color: red"}},
		{name: "charset converted", url: srv.URL + "/latin1", want: []string{"café"}},
		{name: "json kept", url: srv.URL + "/json", want: []string{`{"tea":"oolong"}`}},
		{name: "redirect followed", url: srv.URL + "/redirect", want: []string{"just some text", srv.URL + "/plain"}},
		{name: "size cap", url: srv.URL + "/big", want: []string{"START", "first 1000 bytes"}},
		{name: "binary refused", url: srv.URL + "/image", want: []string{"image/png", "not text"}, wantError: true},
		{name: "http error", url: srv.URL + "/missing", want: []string{"404"}, wantError: true},
		{name: "timeout", reg: impatient, url: srv.URL + "/slow", want: []string{"did not answer"}, wantError: true},
		{name: "not http", url: "file:///etc/passwd", want: []string{"http"}, wantError: true},
		{name: "relative", url: "/plain", want: []string{"absolute"}, wantError: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := r
			if tc.reg != nil {
				reg = tc.reg
			}
			res := reg.Run(context.Background(), chat.ToolCall{Name: "fetch_url", Arguments: fmt.Sprintf(`{"url":%q}`, tc.url)}, Limits{Timeout: 30 * time.Second})
			if res.IsError != tc.wantError {
				t.Errorf("IsError = %v, want %v: %q", res.IsError, tc.wantError, res.Text)
			}
			if !tc.wantError && !res.Untrusted {
				t.Error("a fetched page must be marked Untrusted")
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Text, w) {
					t.Errorf("%q does not contain %q", res.Text, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(res.Text, w) {
					t.Errorf("%q should not contain %q", res.Text, w)
				}
			}
		})
	}
}

// With the default options the tool must refuse the loopback server, both
// directly and through a redirect from a page it may read.
func TestFetchURLRefusesPrivateAddresses(t *testing.T) {
	srv := fetchTestServer(t)
	r := NewRegistry()
	if err := RegisterFetchURL(r, FetchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{srv.URL + "/plain", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/plain"} {
		res := r.Run(context.Background(), chat.ToolCall{Name: "fetch_url", Arguments: fmt.Sprintf(`{"url":%q}`, u)}, Limits{})
		if !res.IsError || !strings.Contains(res.Text, "private or local") {
			t.Errorf("fetch %s = %+v, want a refusal", u, res)
		}
	}
}

// Addresses that embed or are special-purpose ranges are refused before
// any connection, named as what they are, through a literal URL too.
func TestFetchURLRefusesSpecialPurposeAddresses(t *testing.T) {
	r := NewRegistry()
	if err := RegisterFetchURL(r, FetchOptions{Timeout: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{
		"http://[64:ff9b::7f00:1]:9/", // NAT64 for 127.0.0.1
		"http://[::127.0.0.1]:9/",     // IPv4-compatible loopback
		"http://[2002:a00:1::]:9/",    // 6to4 for 10.0.0.1
		"http://198.18.0.1:9/",        // benchmarking
		"http://192.0.0.8:9/",         // IETF protocol assignments
		"http://240.0.0.1:9/",         // reserved
		"http://255.255.255.255:9/",   // broadcast
	} {
		res := r.Run(context.Background(), chat.ToolCall{Name: "fetch_url", Arguments: fmt.Sprintf(`{"url":%q}`, u)}, Limits{})
		if !res.IsError || !strings.Contains(res.Text, "private or local") {
			t.Errorf("fetch %s = %q, want a refusal", u, res.Text)
		}
	}
}
