package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// pieceWriter writes an answer piece by piece, each write bounded by
// http.write_timeout: a client that takes nothing for that long is cut, so
// its handler ends and holds, while it waits, one piece and never the whole
// answer. The first failed write sticks: later ones fail at once.
type pieceWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	wait time.Duration
	err  error
}

func newPieceWriter(w http.ResponseWriter, wait time.Duration) *pieceWriter {
	return &pieceWriter{w: w, rc: http.NewResponseController(w), wait: wait}
}

// deadline bounds the next write; a writer without deadlines (a test's
// recorder) is written to unbounded.
func (p *pieceWriter) deadline() { _ = p.rc.SetWriteDeadline(time.Now().Add(p.wait)) }

func (p *pieceWriter) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	p.deadline()
	n, err := p.w.Write(b)
	p.err = err
	return n, err
}

// flush sends what the server buffered, within the same bound.
func (p *pieceWriter) flush() error {
	if p.err != nil {
		return p.err
	}
	p.deadline()
	if err := p.rc.Flush(); err != nil && err != http.ErrNotSupported {
		p.err = err
	}
	return p.err
}

// end flushes the answer's tail under the bound. The deadline stays, to
// bound what net/http writes after the handler (withRequest).
func (p *pieceWriter) end() { _ = p.flush() }

// jsonList writes the elements of one JSON array as they come, each
// marshalled alone: the bytes are those of the whole array marshalled at
// once.
type jsonList struct {
	w io.Writer
	n int
}

func (l *jsonList) add(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if l.n > 0 {
		b = append([]byte{','}, b...)
	}
	l.n++
	_, err = l.w.Write(b)
	return err
}
