package openai

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
)

// failAfter reads body, then fails.
type failAfter struct{ r io.Reader }

var errCut = errors.New("connection reset")

func (f *failAfter) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errCut
	}
	return n, err
}

// sseEvents reads body with dec in reads of piece bytes: every event's type
// and data, then the error.
func sseEvents(body []byte, piece int, cut bool, dec func(*http.Response) ssestream.Decoder) string {
	var r io.Reader = &pieceReader{r: bytes.NewReader(body), n: piece}
	if cut {
		r = &failAfter{r}
	}
	d := dec(&http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(r)})
	defer d.Close()
	var b strings.Builder
	for d.Next() {
		fmt.Fprintf(&b, "%q %q\n", d.Event().Type, d.Event().Data)
	}
	fmt.Fprintf(&b, "error: %v", d.Err())
	return b.String()
}

func ours(res *http.Response) ssestream.Decoder { return newSSEDecoder(res) }

var sseSeeds = []string{
	"",
	"data: {}\n\n",
	"data: a\r\n\r\ndata: b\r\n\r\n",
	"event: thread.run.created\ndata: {\"id\":1}\n\nevent: done\n\n",
	": ping\n\n: keep-alive\ndata: x\n\n",
	"data: one\ndata: two\ndata:\ndata:  spaced\n\n",
	"data:nospace\nid: 7\nretry: 10\n\n",
	"data: no blank line at the end",
	"\n\n\ndata: after blanks\n\n\n\n",
	"event: e\n\ndata: the type is forgotten after an empty event\n\n",
	"data: " + strings.Repeat("x", 10_000) + "\n\n" + "data: " + strings.Repeat("y", 70_000) + "\n\ndata: small\n\n",
	"data: [DONE]\n\n",
}

// sseDecoder reads every body as the SDK's decoder: the same events, in
// reads of any size, and the same error when the body ends or fails.
func TestSSEDecoderReadsAsTheSDKs(t *testing.T) {
	bodies := beforeBodies(t)
	for _, s := range sseSeeds {
		bodies = append(bodies, []byte(s))
	}
	for _, b := range bodies {
		for _, piece := range []int{1, 7, 4096, 1 << 20} {
			for _, cut := range []bool{false, true} {
				want, got := sseEvents(b, piece, cut, ssestream.NewDecoder), sseEvents(b, piece, cut, ours)
				if got != want {
					t.Fatalf("%q in reads of %d (cut %v):\n got %s\nwant %s", b, piece, cut, got, want)
				}
			}
		}
	}
}

func FuzzSSEDecoderReadsAsTheSDKs(f *testing.F) {
	for _, s := range sseSeeds {
		f.Add([]byte(s), 7)
	}
	f.Fuzz(func(t *testing.T, body []byte, piece int) {
		piece = 1 + max(piece, -piece)%5000
		if want, got := sseEvents(body, piece, false, ssestream.NewDecoder), sseEvents(body, piece, false, ours); got != want {
			t.Fatalf("%q in reads of %d:\n got %s\nwant %s", body, piece, got, want)
		}
	})
}

// Decoders one after another reuse one line buffer, and a decoder reuses
// its event data: reading an answer allocates nothing per event.
func TestSSEDecoderReusesItsBuffers(t *testing.T) {
	body := []byte(strings.Repeat("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n", 50))
	br := bytes.NewReader(body)
	res := &http.Response{Body: io.NopCloser(br)}
	allocs := testing.AllocsPerRun(50, func() {
		br.Reset(body)
		d := newSSEDecoder(res)
		n := 0
		for d.Next() {
			n++
		}
		_ = d.Close()
		if n != 50 || d.Err() != nil {
			t.Fatalf("read %d events (%v), want 50", n, d.Err())
		}
	})
	// The decoder and its scanner; nothing per event or per line.
	if allocs > 4 {
		t.Fatalf("reading 50 events allocated %.0f times, want the decoder alone", allocs)
	}
}
