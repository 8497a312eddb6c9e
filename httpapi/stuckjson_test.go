package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestAJSONAnswerToAClientThatReadsNothingEnds: a turn's JSON answer,
// larger than the sockets hold, to a client that never reads is cut at
// http.write_timeout: its handler ends and lets go of the answer, rather
// than wait on the client for as long as it keeps the connection.
func TestAJSONAnswerToAClientThatReadsNothingEnds(t *testing.T) {
	big := strings.Repeat("many words ", 1<<20) // 11 MiB: past what both sockets buffer
	fake := openaifake.New(openaifake.Options{Window: 1 << 17, Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Text: big, ChunkRunes: 1 << 20}
	}})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 1<<17)
	cfg.Limits.MaxAnswerBytes = 64 << 20
	cfg.HTTP.WriteTimeout.Duration = time.Second
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.Server.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	body := `{"content":"say a lot"}`
	fmt.Fprintf(conn, "POST /v1/chats/%s/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", c.ID, len(body), body)
	// The turn ends and is stored whatever its client does.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ms, err := d.Client.Transcript(ctx, c.ID); err == nil && len(ms) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn did not end")
		}
	}
	// Drain waits for every turn's handler: the one writing to the client
	// that reads nothing must end, long before this deadline.
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := d.Server.Config.Handler.(*httpapi.Server).Drain(wait); err != nil {
		t.Fatalf("the handler of a JSON answer still waits on a client that reads nothing: %v", err)
	}
}

// stallListener accepts connections whose client stops reading once the
// server has written marker: as on a socket whose buffers are full, every
// later write waits for its write deadline, or, without one, until the
// connection closes. closed is closed when the server closes one.
type stallListener struct {
	net.Listener
	marker []byte
	closed chan struct{}
	once   sync.Once
}

func (l *stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, l: l, gone: make(chan struct{})}, nil
}

type stallConn struct {
	net.Conn
	l *stallListener

	mu       sync.Mutex
	written  []byte
	stalled  bool
	deadline time.Time
	gone     chan struct{}
	goneOnce sync.Once
}

func (c *stallConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *stallConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *stallConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	stalled, deadline := c.stalled, c.deadline
	c.mu.Unlock()
	if !stalled {
		n, err := c.Conn.Write(b)
		c.mu.Lock()
		c.written = append(c.written, b[:n]...)
		c.stalled = bytes.Contains(c.written, c.l.marker)
		c.mu.Unlock()
		return n, err
	}
	var expired <-chan time.Time
	if !deadline.IsZero() {
		expired = time.After(time.Until(deadline))
	}
	select {
	case <-expired:
		return 0, os.ErrDeadlineExceeded
	case <-c.gone:
		return 0, net.ErrClosed
	}
}

func (c *stallConn) Close() error {
	c.goneOnce.Do(func() { close(c.gone) })
	c.l.once.Do(func() { close(c.l.closed) })
	return c.Conn.Close()
}

// TestWhatFollowsAnAnswerIsBoundedForAClientThatStopsReading: a client
// that stops reading just after an answer's last event or byte — the
// server has the chunked body's terminator left to write — is cut at
// http.write_timeout, on the native and the OpenAI routes: its connection
// closes, rather than hold a goroutine of the server for as long as the
// client keeps it open.
func TestWhatFollowsAnAnswerIsBoundedForAClientThatStopsReading(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 1 << 17, Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "a short answer"}
	}})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 1<<17)
	cfg.HTTP.WriteTimeout.Duration = 100 * time.Millisecond
	d := daemontest.Start(t, cfg, nil)
	c, err := d.Client.CreateChat(context.Background(), api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.Send(context.Background(), c.ID, api.SendMessageRequest{Content: "first"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, path, accept, body, marker string
	}{
		{"native stream", "POST", "/v1/chats/" + c.ID + "/messages", "text/event-stream", `{"content":"again"}`, "event: turn.completed"},
		{"responses stream", "POST", "/v1/responses", "text/event-stream", `{"model":"fake/m","input":"hi","stream":true}`, "event: response.completed"},
		{"transcript", "GET", "/v1/chats/" + c.ID + "/transcript", "application/json", "", "]}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := &stallListener{marker: []byte(tc.marker), closed: make(chan struct{})}
			srv := httptest.NewUnstartedServer(nil)
			srv.Config = d.Server.Config.Handler.(*httpapi.Server).HTTPServer()
			ln.Listener = srv.Listener
			srv.Listener = ln
			srv.Start()
			defer srv.Close()
			defer srv.CloseClientConnections()
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				tc.method, tc.path, tc.accept, len(tc.body), tc.body)
			// Thirty seconds guard against a hang, far over the 100 ms bound.
			select {
			case <-ln.closed:
			case <-time.After(30 * time.Second):
				t.Fatal("the server still holds the connection of a client that stopped reading after the answer's last event")
			}
		})
	}
}
