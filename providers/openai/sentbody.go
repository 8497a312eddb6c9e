package openai

import (
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/openai/openai-go/v3/option"
)

// A request's body is about as large as the chat's window (≈100 KB on
// 32K); made anew on every model call it cost a large allocation and its
// clearing. Its buffer goes back to a pool, but only once nothing can read
// it again: the transport may go on reading a body after the answer's
// headers came, and may read it once more (GetBody) to retry a request it
// could not send. So the buffer is released when the call has returned (no
// reader is handed out after that) and every reader handed out is closed
// (the transport closes each, even on errors). A reader that is never
// closed leaves its buffer to the garbage collector.

// maxPooledBody bounds what the pool keeps: a rare huge body is dropped.
const maxPooledBody = 4 << 20

var bodyBufs = sync.Pool{New: func() any { return new([]byte) }}

var errBodyReleased = errors.New("request body already released")

// sentBody is one request's body and the readers the transport was given.
type sentBody struct {
	mu   sync.Mutex
	buf  *[]byte // nil once released
	size int64
	refs int // the call's own, and each open reader's
}

// newSentBody writes a body with fill into a pooled buffer.
func newSentBody(fill func(dst []byte) ([]byte, error)) (*sentBody, error) {
	buf := bodyBufs.Get().(*[]byte)
	b, err := fill((*buf)[:0])
	if err != nil {
		bodyBufs.Put(buf)
		return nil, err
	}
	*buf = b
	return &sentBody{buf: buf, size: int64(len(b)), refs: 1}, nil
}

// reader is a new reader of the body from its start (http.Request.GetBody).
func (s *sentBody) reader() (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf == nil {
		return nil, errBodyReleased
	}
	s.refs++
	return &bodyReader{s: s}, nil
}

// done is the call's end: the body is released once its readers close.
func (s *sentBody) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unref()
}

func (s *sentBody) unref() {
	if s.refs--; s.refs == 0 && s.buf != nil {
		if cap(*s.buf) <= maxPooledBody {
			bodyBufs.Put(s.buf)
		}
		s.buf = nil
	}
}

// middleware gives the request the body's length and a way to read it
// again, as the SDK does for a body in one buffer: sent with a
// Content-Length, not chunked (some local servers refuse chunked bodies).
func (s *sentBody) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	req.ContentLength, req.GetBody = s.size, s.reader
	return next(req)
}

// bodyReader reads a sentBody; it reads nothing once closed.
type bodyReader struct {
	s      *sentBody
	off    int
	closed bool
}

func (r *bodyReader) Read(p []byte) (int, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.closed {
		return 0, errBodyReleased
	}
	b := *r.s.buf
	if r.off >= len(b) {
		return 0, io.EOF
	}
	n := copy(p, b[r.off:])
	r.off += n
	return n, nil
}

func (r *bodyReader) Close() error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.s.unref()
	}
	return nil
}
