package testkit

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// CheckBoundedRead checks that read, given the URL of a server whose every
// answer is head followed by spaces for three times bound bytes, fails
// with want naming bound, and stops reading: the server, which writes
// until a write fails, wrote less than twice bound (the bound and what the
// connection buffers). A reader that takes a whole answer into memory
// fails it.
func CheckBoundedRead(t *testing.T, head string, bound int64, want error, read func(url string) error) {
	t.Helper()
	most := 3 * bound
	var written atomic.Int64
	ended := make(chan struct{}, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		defer func() { ended <- struct{}{} }()
		w.Header().Set("Content-Type", "application/json")
		n, err := w.Write([]byte(head))
		written.Add(int64(n))
		chunk := bytes.Repeat([]byte(" "), 64<<10)
		for err == nil && written.Load() < most {
			n, err = w.Write(chunk)
			written.Add(int64(n))
		}
	}))
	defer srv.Close()
	if err := read(srv.URL); !errors.Is(err, want) || !strings.Contains(err.Error(), strconv.FormatInt(bound, 10)) {
		t.Fatalf("an answer of %d bytes: %v; want %v naming %d", most, err, want, bound)
	}
	<-ended
	if n := written.Load(); n >= 2*bound {
		t.Fatalf("the server wrote %d bytes before the read stopped, the bound is %d", n, bound)
	}
}
