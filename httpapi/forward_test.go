package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// ownerAt is a daemon's hub that places every chat it has at url, as a
// cluster would place it on another node: the forwarding of httpapi,
// tested here under -race without protoactor's cluster (cluster_e2e_test.go
// runs the real one).
type ownerAt struct {
	*hub.Hub
	url *string
}

func (o ownerAt) Owner(ctx context.Context, tenant, chatID string) (string, error) {
	if _, err := o.Hub.Chat(ctx, tenant, chatID); err != nil {
		return "", err
	}
	return *o.url, nil
}

// front serves the API of d's hub, placing every chat at *owner.
func front(t *testing.T, d *daemontest.Daemon, owner *string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(httpapi.New(ownerAt{d.Hub, owner}, d.Cfg, d.Tokens, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)))
	t.Cleanup(srv.Close)
	return srv
}

// forwardFixture is a daemon (tenants alice, token tok, and bob, tok-b)
// whose model answers "answer to W", and a chat of alice's.
func forwardFixture(t *testing.T) (*daemontest.Daemon, api.Chat) {
	t.Helper()
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: testkit.NewHold("").Script})
	t.Cleanup(fake.Close)
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), map[string]string{"tok": "alice", "tok-b": "bob"})
	c, err := (&api.Client{BaseURL: d.Server.URL, Token: "tok"}).CreateChat(context.Background(), api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return d, c
}

func TestAChatScopedRequestIsForwardedToItsOwnerAndStreams(t *testing.T) {
	d, c := forwardFixture(t)
	ctx := context.Background()
	owner := d.Server.URL
	via := &api.Client{BaseURL: front(t, d, &owner).URL, Token: "tok"}
	var events int
	res, err := via.Send(ctx, c.ID, api.SendMessageRequest{Content: "one"}, func(api.Event) { events++ })
	if err != nil || res.Status != "completed" || events == 0 {
		t.Fatalf("a turn through the forwarding node: %+v, %d events, %v", res, events, err)
	}
	msgs, err := via.Transcript(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WantLog(t, msgs, "one", "answer to one")
	// Another tenant's id is 404 on the receiving node, never forwarded.
	if _, err := (&api.Client{BaseURL: via.BaseURL, Token: "tok-b"}).Transcript(ctx, c.ID); !isStatus(err, http.StatusNotFound, "not_found") {
		t.Fatalf("bob's request for alice's chat: %v", err)
	}
}

func TestAnOwnerThatDoesNotAnswerIs503AndStoresNothing(t *testing.T) {
	d, c := forwardFixture(t)
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	_ = l.Close()
	srv := front(t, d, &dead)
	a := call(t, ctx, "POST", srv.URL+"/v1/chats/"+c.ID+"/messages", "tok", `{"content":"one"}`)
	if a.status != http.StatusServiceUnavailable || a.err.Kind != "unavailable" || a.header.Get("Retry-After") != "1" {
		t.Fatalf("a message for a chat whose node is down: %d %+v, Retry-After %q", a.status, a.err, a.header.Get("Retry-After"))
	}
	msgs, err := (&api.Client{BaseURL: d.Server.URL, Token: "tok"}).Transcript(ctx, c.ID)
	if err != nil || len(msgs) != 0 {
		t.Fatalf("the refused message was stored: %d messages, %v", len(msgs), err)
	}
}

func TestAForwardedRequestIsNeverForwardedAgain(t *testing.T) {
	d, c := forwardFixture(t)
	ctx := context.Background()
	// A node whose view places the chat on itself forwards once, to itself,
	// and serves the forwarded request there: no loop.
	var self string
	srv := front(t, d, &self)
	self = srv.URL
	res, err := (&api.Client{BaseURL: srv.URL, Token: "tok"}).Send(ctx, c.ID, api.SendMessageRequest{Content: "one"}, nil)
	if err != nil || res.Status != "completed" {
		t.Fatalf("a chat a node places on itself: %+v, %v", res, err)
	}
}

// isStatus reports whether err is the API's error with that status and kind.
func isStatus(err error, status int, kind string) bool {
	e, ok := err.(*api.Error)
	return ok && e.Status == status && e.Kind == kind
}

// TestAForwardedBodyIsRefusedAsOnOneNode: a body that arrives too slowly,
// or runs past max_body_bytes without announcing its length, is refused by
// the node it arrived at as one node refuses it (408, 413), not as an
// owner that did not answer (503, "send it again"); nothing is stored.
func TestAForwardedBodyIsRefusedAsOnOneNode(t *testing.T) {
	d, c := forwardFixture(t)
	cfg := d.Cfg
	cfg.HTTP.ReadTimeout.Duration = 100 * time.Millisecond
	cfg.Limits.MaxBodyBytes = 1 << 10
	owner := d.Server.URL
	srv := httptest.NewServer(httpapi.New(ownerAt{d.Hub, &owner}, cfg, d.Tokens, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)))
	t.Cleanup(srv.Close)
	head := "POST /v1/chats/" + c.ID + "/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\n"
	big := `{"content":"` + strings.Repeat("x", 2<<10) + `"}`
	for _, tc := range []struct {
		name, request string
		status        int
	}{
		{"slow", head + "Content-Length: 1000\r\n\r\n" + `{"content":"`, http.StatusRequestTimeout},
		{"too large", head + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(big), big), http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tc.request); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.status {
				t.Fatalf("got %d %s; want %d", res.StatusCode, body, tc.status)
			}
		})
	}
	msgs, err := (&api.Client{BaseURL: d.Server.URL, Token: "tok"}).Transcript(context.Background(), c.ID)
	if err != nil || len(msgs) != 0 {
		t.Fatalf("a refused body was stored: %d messages, %v", len(msgs), err)
	}
}
