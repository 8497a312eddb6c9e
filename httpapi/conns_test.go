package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/tools"
)

// Issue 15, deliver 5: slow and silent connections are bounded, so they
// cannot lock a normal client out, and a long answer stream is not cut.

// openRaw dials addr and writes head, the start of a request that the
// caller never finishes.
func openRaw(t *testing.T, addr, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	return c
}

// ended waits for the server to answer or close c and returns the status
// line ("" when it closed without one). It fails the test when the server
// still holds c after a deadline far beyond every configured timeout.
func ended(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server still holds a connection that never finished its request")
	}
	return strings.TrimSpace(line)
}

func TestSlowAndSilentClientsDoNotLockOthersOut(t *testing.T) {
	const readTimeout = time.Second
	fake := newFake(t, toolScript)
	cfg := baseConfig(t, fake.URL())
	cfg.HTTP.MaxUnauthenticated = 8
	cfg.HTTP.ReadTimeout.Duration = readTimeout
	cfg.HTTP.UploadTimeout.Duration = readTimeout
	nap := func(r *tools.Registry) error {
		return tools.Register(r, "nap", "Takes a while.", func(ctx context.Context, _ struct{}) (tools.Result, error) {
			time.Sleep(2 * readTimeout)
			return tools.Result{Text: "rested"}, nil
		})
	}
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "a", "tok-b": "b"}, hub.Options{Tools: nap})
	ctx := context.Background()
	addr := strings.TrimPrefix(d.Server.URL, "http://")
	const post = "POST /v1/chats HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
	var silent, anonymous, slow []net.Conn
	for range 150 {
		silent = append(silent, openRaw(t, addr, "POST /v1/chats HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
	}
	for range 150 {
		anonymous = append(anonymous, openRaw(t, addr, post+"\r\n"+`{"title":"`))
	}
	for range 150 {
		slow = append(slow, openRaw(t, addr, post+"Authorization: Bearer tok-a\r\n\r\n"+`{"title":"`))
	}
	const upload = "POST /v1/attachments HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok-a\r\n" +
		"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nthe start of a file"
	for range 20 {
		slow = append(slow, openRaw(t, addr, upload))
	}

	// A normal client of another tenant is served while all of them hang.
	b := &api.Client{BaseURL: d.Server.URL, Token: "tok-b"}
	if _, err := b.CreateChat(ctx, api.CreateChatRequest{Title: "served"}); err != nil {
		t.Fatalf("a normal client was locked out: %v", err)
	}
	// None is held for ever: the silent ones are closed for newer ones,
	// the anonymous ones refused, the slow ones cut at the read timeout.
	for _, c := range silent {
		if line := ended(t, c); line != "" {
			t.Fatalf("a connection that never sent its headers got %q", line)
		}
	}
	for _, c := range anonymous {
		if line := ended(t, c); line != "" && !strings.Contains(line, " 401 ") {
			t.Fatalf("an anonymous slow body got %q", line)
		}
	}
	for _, c := range slow {
		if line := ended(t, c); line != "" && !strings.Contains(line, " 408 ") {
			t.Fatalf("a slow body got %q; want 408 or a close", line)
		}
	}
	if cs, _ := d.Hub.Chats(ctx, "a"); len(cs) != 0 {
		t.Fatalf("cut requests created %d chats", len(cs))
	}

	// The slow tenant is served again, and a turn that outlasts the read
	// timeout streams to its end.
	a := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	c, err := a.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Send(ctx, c.ID, api.SendMessageRequest{Content: "use nap"}, nil)
	if err != nil || res.Problem != nil || len(res.Messages) != 4 {
		t.Fatalf("a turn longer than the read timeout: %v %+v, %d messages", err, res.Problem, len(res.Messages))
	}
}

// quickReads starts a daemon (token tok-a, tenant a) whose bodies must
// arrive within 100 ms and returns its address.
func quickReads(t *testing.T) string {
	t.Helper()
	fake := newFake(t, toolScript)
	cfg := baseConfig(t, fake.URL())
	cfg.HTTP.ReadTimeout.Duration = 100 * time.Millisecond
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "a"})
	addr := strings.TrimPrefix(d.Server.URL, "http://")
	return addr
}

// TestABodyThatNeverArrivesIsCutOnEveryRoute: a route that reads no body
// (health, the catch-all's 404, metrics) still bounds the body its request
// announces: net/http reads it before the answer, so one that never comes
// held the connection, and a tenant's place among its
// http.conns_per_tenant, for as long as the client kept it open.
func TestABodyThatNeverArrivesIsCutOnEveryRoute(t *testing.T) {
	addr := quickReads(t)
	for _, path := range []string{"/healthz", "/openapi.json", "/v1/chats/c1/no-such-route", "/metrics", "/"} {
		t.Run(path, func(t *testing.T) {
			c := openRaw(t, addr, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok-a\r\nContent-Length: 1000\r\n\r\nthe start")
			// Thirty seconds guard against a hang, far over the 100 ms bound.
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the server still holds a connection whose request body never arrived")
			}
		})
	}
}

// TestASlowBodyIs408OnTheOpenAIRoutes: a body that does not arrive within
// http.read_timeout is 408 on the OpenAI-compatible routes as on the
// native ones, which OpenAI's SDKs retry (a 400 they do not).
func TestASlowBodyIs408OnTheOpenAIRoutes(t *testing.T) {
	addr := quickReads(t)
	for _, path := range []string{"/v1/responses", "/v1/chat/completions", "/v1/conversations"} {
		t.Run(path, func(t *testing.T) {
			c := openRaw(t, addr, "POST "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok-a\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"+`{"model":"`)
			if line := ended(t, c); !strings.Contains(line, " 408 ") {
				t.Fatalf("a slow body got %q; want 408", line)
			}
		})
	}
}
