package hub

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// rawServer answers HTTP/1.1 requests with an empty 200 and hands over
// each request's bytes as they came off the wire.
func rawServer(t *testing.T) (url string, requests <-chan []byte) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 64)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				// The client sends a request only once the last one is
				// answered, so raw holds one request at a time.
				var raw bytes.Buffer
				br := bufio.NewReader(io.TeeReader(c, &raw))
				for {
					raw.Reset()
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if _, err := io.Copy(io.Discard, req.Body); err != nil {
						return
					}
					got <- bytes.Clone(raw.Bytes())
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"); err != nil {
						return
					}
				}
			})
		}
	})
	return "http://" + ln.Addr().String(), got
}

// A model call's request goes out byte for byte as through Go's own
// transport, whatever its body's size and kind: a reader of our own (as
// providers/openai's pooled body) and one net/http knows to be in memory.
func TestProviderTransportSendsRequestsAsGosDefault(t *testing.T) {
	url, requests := rawServer(t)
	ours, gos := ProviderTransport(), http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(func() {
		ours.CloseIdleConnections()
		gos.CloseIdleConnections()
	})
	send := func(tr *http.Transport, body []byte, opaque bool) []byte {
		t.Helper()
		var r io.Reader = bytes.NewReader(body)
		if opaque {
			r = struct{ io.Reader }{r}
		}
		req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", r)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return <-requests
	}
	for _, n := range []int{1, 3000, 4096, 40_000, 150_000} {
		body := []byte(strings.Repeat(`{"role":"user","content":"hello"},`, n/34+1)[:n])
		for _, opaque := range []bool{true, false} {
			want, got := send(gos, body, opaque), send(ours, body, opaque)
			if !bytes.Equal(got, want) {
				t.Fatalf("%d-byte body (opaque %v): sent %d bytes, Go's transport %d; first difference at %d",
					n, opaque, len(got), len(want), firstDiff(got, want))
			}
			if !bytes.HasSuffix(got, body) {
				t.Fatalf("%d-byte body (opaque %v): the body did not arrive whole", n, opaque)
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// countConn is a connection that only counts what is written to it.
type countConn struct {
	net.Conn
	n int
}

func (c *countConn) Write(p []byte) (int, error) {
	c.n += len(p)
	return len(p), nil
}

// net/http hands a body of known length to the connection's ReadFrom as a
// LimitedReader; copyConn copies it through a pooled buffer instead of a
// new one for each request.
func TestCopyConnCopiesBodiesThroughAPooledBuffer(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 100_000)
	br := bytes.NewReader(body)
	lr := &io.LimitedReader{R: struct{ io.Reader }{br}}
	w := &countConn{}
	c := newCopyConn(w)
	allocs := testing.AllocsPerRun(100, func() {
		br.Reset(body)
		lr.N = int64(len(body))
		w.n = 0
		if n, err := c.ReadFrom(lr); err != nil || n != int64(len(body)) {
			t.Fatalf("copied %d bytes (%v), want %d", n, err, len(body))
		}
	})
	if w.n != len(body) {
		t.Fatalf("the connection got %d bytes, want %d", w.n, len(body))
	}
	if allocs >= 1 {
		t.Fatalf("a body's copy allocated %.0f times, want none (the buffer is pooled)", allocs)
	}
}
