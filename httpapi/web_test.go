package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit/daemontest"
)

// Issue 15, item 4: the no-token loopback daemon is closed to web pages.

// browserCall sends what a page's fetch or form would: a body and the
// headers a browser adds.
func browserCall(t *testing.T, method, url, host, contentType string, body []byte, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if resp.StatusCode >= 400 {
		_ = json.Unmarshal(b, &a.err)
	}
	return a
}

// storedFiles counts the files under the attachment store.
func storedFiles(t *testing.T, dataDir string) int {
	n := 0
	_ = filepath.WalkDir(filepath.Join(dataDir, "attachments"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func uploadBody(t *testing.T) ([]byte, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, err := mw.CreateFormFile("file", "notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(fw, "the page wants this stored\n")
	_ = mw.Close()
	return b.Bytes(), mw.FormDataContentType()
}

func TestForeignOriginChangesNothing(t *testing.T) {
	fake := newFake(t, echoScript)
	d := daemontest.Start(t, baseConfig(t, fake.URL()), nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{Title: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	upload, uploadType := uploadBody(t)
	foreign := map[string]map[string]string{
		"foreign origin":              {"Origin": "https://attacker.example"},
		"cross-site fetch":            {"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"},
		"cross-site without origin":   {"Sec-Fetch-Site": "cross-site"},
		"same site, another port":     {"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"},
		"another port, no fetch data": {"Origin": "http://127.0.0.1:1"},
	}
	for name, header := range foreign {
		t.Run(name, func(t *testing.T) {
			// A form or no-cors fetch can send text/plain without a preflight.
			browserCall(t, "POST", d.Server.URL+"/v1/chats", "", "text/plain", []byte(`{"title":"from the page"}`), header).want(t, 403, "cross_origin")
			browserCall(t, "POST", d.Server.URL+"/v1/chats/"+c.ID+"/messages", "", "text/plain", []byte(`{"content":"run the tools for me"}`), header).want(t, 403, "cross_origin")
			browserCall(t, "PATCH", d.Server.URL+"/v1/chats/"+c.ID, "", "text/plain", []byte(`{"title":"renamed by the page"}`), header).want(t, 403, "cross_origin")
			browserCall(t, "POST", d.Server.URL+"/v1/attachments", "", uploadType, upload, header).want(t, 403, "cross_origin")
		})
	}
	chats, _ := d.Hub.Chats(ctx, "default")
	msgs, _ := d.Hub.Transcript(ctx, "default", c.ID, 0, 0)
	if len(chats) != 1 || chats[0].Title != "mine" || len(msgs) != 0 {
		t.Fatalf("refused requests changed the store: %d chats (title %q), %d messages", len(chats), chats[0].Title, len(msgs))
	}
	if n := storedFiles(t, d.Cfg.DataDir); n != 0 {
		t.Fatalf("refused uploads stored %d files", n)
	}

	// The console, from its own origin, and curl, with no Origin, still work.
	own := map[string]string{"Origin": d.Server.URL, "Sec-Fetch-Site": "same-origin"}
	browserCall(t, "POST", d.Server.URL+"/v1/chats", "", "application/json", []byte(`{"title":"from the console"}`), own).want(t, 201, "")
	browserCall(t, "POST", d.Server.URL+"/v1/attachments", "", uploadType, upload, own).want(t, 201, "")
	browserCall(t, "POST", d.Server.URL+"/v1/chats", "", "application/json", []byte(`{}`), nil).want(t, 201, "")
	if n := storedFiles(t, d.Cfg.DataDir); n == 0 {
		t.Fatal("the console's own upload stored nothing")
	}
}

func TestForeignHostIsRefused(t *testing.T) {
	fake := newFake(t, echoScript)
	cfg := baseConfig(t, fake.URL())
	cfg.HTTP.AllowedHosts = []string{"agentd.lan"}
	d := daemontest.Start(t, cfg, nil)
	port := d.Server.URL[strings.LastIndex(d.Server.URL, ":"):]
	for _, host := range []string{"attacker.example" + port, "attacker.example", "10.0.0.8" + port} {
		for _, path := range []string{"/v1/chats", "/", "/healthz", "/metrics"} {
			a := browserCall(t, "GET", d.Server.URL+path, host, "", nil, nil)
			if a.status != http.StatusMisdirectedRequest || strings.Contains(a.body, "chats") {
				t.Fatalf("GET %s with Host %s: %d %s", path, host, a.status, a.body)
			}
		}
	}
	for _, host := range []string{"localhost" + port, "127.0.0.1" + port, "[::1]" + port, "agentd.lan" + port} {
		browserCall(t, "GET", d.Server.URL+"/v1/chats", host, "", nil, nil).want(t, 200, "")
	}
}

func TestMetricsNeedTheAPIsTokenOrTheirOwnAddress(t *testing.T) {
	fake := newFake(t, echoScript)
	d := daemontest.Start(t, baseConfig(t, fake.URL()), map[string]string{"tok-a": "a"})
	browserCall(t, "GET", d.Server.URL+"/metrics", "", "", nil, nil).want(t, 401, "unauthorized")
	if a := browserCall(t, "GET", d.Server.URL+"/metrics", "", "", nil, map[string]string{"Authorization": "Bearer tok-a"}); a.status != 200 || !strings.Contains(a.body, "agentd_") {
		t.Fatalf("/metrics with the token: %d %.200s", a.status, a.body)
	}

	// With metrics.listen the API's address no longer serves them; their
	// own handler does, without a token, to loopback names only.
	cfg := baseConfig(t, fake.URL())
	cfg.Metrics.Listen = "127.0.0.1:0"
	own := daemontest.Start(t, cfg, map[string]string{"tok-a": "a"})
	if a := browserCall(t, "GET", own.Server.URL+"/metrics", "", "", nil, map[string]string{"Authorization": "Bearer tok-a"}); a.status != 404 {
		t.Fatalf("/metrics on the API's address with metrics.listen set: %d", a.status)
	}
	h := httpapi.New(own.Hub, cfg, map[string]string{"tok-a": "a"}, zerolog.Nop()).MetricsHandler()
	for host, want := range map[string]int{"127.0.0.1:9464": 200, "attacker.example:9464": 421} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want || (want == 200 && !strings.Contains(w.Body.String(), "agentd_")) {
			t.Fatalf("metrics handler, Host %s: %d, want %d", host, w.Code, want)
		}
	}
}
