package openai

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// doneConn is a client connection that says on seen each time it read a
// "[DONE]".
type doneConn struct {
	net.Conn
	seen chan<- struct{}
	tail []byte // the last bytes read, shorter than "[DONE]"
}

func (c *doneConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	buf := append(c.tail, p[:n]...)
	for range bytes.Count(buf, []byte("[DONE]")) {
		c.seen <- struct{}{}
	}
	c.tail = append([]byte(nil), buf[max(0, len(buf)-5):]...)
	return n, err
}

// streamServer answers every call with one chunk and [DONE], then holds
// the response open until hold says so (it gets the request's context).
func streamServer(t *testing.T, hold func(*http.Request)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		hold(r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestConnectionKeptAfterDone: the server ends its chunked response only
// after the client has read [DONE] (as a server in another process mostly
// does: the body's last chunk comes in a packet of its own), and the next
// call still goes over the same connection; before, the body was closed
// at [DONE] and every call dialled again.
func TestConnectionKeptAfterDone(t *testing.T) {
	seen := make(chan struct{}, 16)
	srv := streamServer(t, func(r *http.Request) {
		select {
		case <-seen:
		case <-r.Context().Done():
		}
	})
	var dials atomic.Int64
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &doneConn{Conn: conn, seen: seen}, nil
	}
	c, err := New(Config{Name: "test-openai", Company: "openai", BaseURL: srv.URL, APIKey: "sk-test", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	const calls = 5
	for i := range calls {
		if r := run(t, c, context.Background(), userReq("hi")); r.err != nil || r.text != "hi" {
			t.Fatalf("call %d: err %v, text %q", i, r.err, r.text)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d calls dialled %d connections, want 1", calls, n)
	}
}

// TestServerHoldingTheStreamAfterDone: a server that sends [DONE] and never
// ends its response is cut off, and the call keeps its answer.
func TestServerHoldingTheStreamAfterDone(t *testing.T) {
	release := make(chan struct{})
	srv := streamServer(t, func(r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	r := run(t, newClient(t, "openai", srv.URL), context.Background(), userReq("hi"))
	if r.err != nil || r.resp.Message.Content != "hi" {
		t.Fatalf("err %v, answer %q; want the answer", r.err, r.resp.Message.Content)
	}
}
