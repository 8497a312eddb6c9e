package openai

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
)

// lateTransport sends each request on with a body read again through
// GetBody, and keeps the body it was given to read later, as net/http's
// transport may: its write loop goes on after the answer's headers came.
type lateTransport struct {
	next    http.RoundTripper
	mu      sync.Mutex
	pending []io.ReadCloser
	lengths []int64
}

func (lt *lateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.GetBody == nil {
		return nil, errors.New("the request cannot be read again (no GetBody)")
	}
	again, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Body = again
	lt.mu.Lock()
	lt.pending, lt.lengths = append(lt.pending, req.Body), append(lt.lengths, req.ContentLength)
	lt.mu.Unlock()
	return lt.next.RoundTrip(out)
}

// TestABodyStillReadIsNotReused: calls made while earlier bodies are still
// being read never write into those bodies' buffers; each body, read to
// its end after later calls, is what its call sent, with its length.
func TestABodyStillReadIsNotReused(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "echo: " + r.Messages[len(r.Messages)-1].Content}
	}})
	defer fake.Close()
	next := &http.Transport{}
	defer next.CloseIdleConnections()
	lt := &lateTransport{next: next}
	c, err := New(Config{Name: "late", Company: "openai", BaseURL: fake.URL(), APIKey: "sk-test", HTTPClient: &http.Client{Transport: lt}})
	if err != nil {
		t.Fatal(err)
	}
	fresh := newClient(t, "openai", fake.URL())
	const calls = 20
	var want []string
	for i := range calls {
		q := fmt.Sprintf("question %d: %s", i, strings.Repeat(string(rune('a'+i)), 1000*(i%5+1)))
		req := userReq(q)
		req.CacheKey = fmt.Sprintf("chat-%d", i%3)
		req.Messages = append([]chat.Message{{Seq: 1, Role: chat.RoleUser, Content: "earlier"}, {Seq: 2, Role: chat.RoleAssistant, Content: "noted"}}, req.Messages...)
		req.Messages[2].Seq = 3
		r := run(t, c, t.Context(), req)
		if r.err != nil || r.resp.Message.Content != "echo: "+q {
			t.Fatalf("call %d: err %v, answer %.40q", i, r.err, r.resp.Message.Content)
		}
		b, err := fresh.body(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, string(b))
	}
	if len(lt.pending) != calls {
		t.Fatalf("%d bodies handed to the transport, want %d", len(lt.pending), calls)
	}
	for i, body := range lt.pending {
		got, err := io.ReadAll(body)
		if err != nil {
			t.Fatalf("body %d: %v", i, err)
		}
		if string(got) != want[i] {
			t.Fatalf("body %d read after later calls is not what it sent:\n%.200s\nwant\n%.200s", i, got, want[i])
		}
		if lt.lengths[i] != int64(len(want[i])) {
			t.Fatalf("body %d sent with length %d, want %d", i, lt.lengths[i], len(want[i]))
		}
		if err := body.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSentBodyIsReleasedWhenAllItsReadersAre: the body stays readable while
// a reader is open after the call ends; once released, it hands out no
// reader and a closed reader reads nothing.
func TestSentBodyIsReleasedWhenAllItsReadersAre(t *testing.T) {
	sb, err := newSentBody(func(dst []byte) ([]byte, error) { return append(dst, "the body"...), nil })
	if err != nil {
		t.Fatal(err)
	}
	r, err := sb.reader()
	if err != nil {
		t.Fatal(err)
	}
	sb.done() // the call returned; the transport still reads
	if got, err := io.ReadAll(r); err != nil || string(got) != "the body" {
		t.Fatalf("read after the call: %q, %v", got, err)
	}
	r2, err := sb.reader()
	if err != nil {
		t.Fatalf("a reader is open, yet the body is gone: %v", err)
	}
	_ = r.Close()
	_ = r.Close() // closing twice releases once
	if _, err := r.Read(make([]byte, 8)); !errors.Is(err, errBodyReleased) {
		t.Fatalf("a closed reader read: %v", err)
	}
	if sb.buf == nil {
		t.Fatal("released with a reader still open")
	}
	_ = r2.Close()
	if _, err := sb.reader(); !errors.Is(err, errBodyReleased) || sb.buf != nil {
		t.Fatalf("every reader closed and the call ended, yet the body is kept: %v", err)
	}
}
