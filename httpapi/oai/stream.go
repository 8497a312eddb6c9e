package oai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// streamBacklog is how many events a stream's client may be behind before
// it is cut: what a slow client costs is at most this many events (a few
// copies of the response's own text, which the handler holds anyway), and
// the handler that follows the turn never waits on it.
const streamBacklog = 256

// stream writes a surface's Server-Sent Events to its client from a
// goroutine of its own, each write bounded by the write timeout, so the
// handler that follows a turn reads the turn's events as they come however
// slowly its client reads: a handler that wrote itself fell behind the
// turn's events and was dropped by the bus, and a response whose id its
// client had been told was then never stored. A client more than
// streamBacklog events behind is cut: the events it has not taken are
// written, then behind's (the surface's last word), then nothing more. The
// handler owns the goroutine: end waits for it.
type stream struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	wait time.Duration
	seq  int
	// behind is the last event of a client cut for falling behind.
	behind func() string

	q    chan string // cap streamBacklog+1: the last slot is behind's
	done chan struct{}
	// cut is the handler's: it queues nothing more.
	cut bool
	// failed: a write failed (the client went away or took nothing for
	// wait); the writer's, read by the handler.
	failed atomic.Bool
	// final, once set (unix nanoseconds), is when every write still
	// queued must be done: end bounds its wait as a whole.
	final atomic.Int64
}

// startStream answers 200 with an event stream whose writes each take at
// most wait, and starts its writer.
func startStream(w http.ResponseWriter, wait time.Duration) (*stream, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return nil, fmt.Errorf("streaming is not supported by this connection: %w", err)
	}
	s := &stream{w: w, rc: rc, wait: wait, q: make(chan string, streamBacklog+1), done: make(chan struct{})}
	go s.run()
	return s, nil
}

// run writes what is queued until end closes the queue; after a failed
// write it only drains.
func (s *stream) run() {
	defer close(s.done)
	for text := range s.q {
		if s.failed.Load() {
			continue
		}
		deadline := time.Now().Add(s.wait)
		if f := s.final.Load(); f != 0 && f < deadline.UnixNano() {
			deadline = time.Unix(0, f)
		}
		_ = s.rc.SetWriteDeadline(deadline)
		_, err := io.WriteString(s.w, text)
		if err == nil && len(s.q) == 0 {
			err = s.rc.Flush() // once a burst is written
		}
		if err != nil {
			s.failed.Store(true)
		}
	}
}

// gone reports whether nothing more reaches the client: it was cut, or a
// write failed.
func (s *stream) gone() bool { return s.cut || s.failed.Load() }

// event is one numbered event (Responses' sequence_number) as written.
func (s *stream) event(typ string, fields map[string]any) (string, error) {
	fields["type"], fields["sequence_number"] = typ, s.seq
	s.seq++
	data, err := json.Marshal(fields)
	if err != nil {
		return "", err
	}
	return "event: " + typ + "\ndata: " + string(data) + "\n\n", nil
}

func (s *stream) send(typ string, fields map[string]any) {
	if s.gone() {
		return
	}
	text, err := s.event(typ, fields)
	if err != nil {
		s.cut = true
		return
	}
	s.write(text)
}

// write queues text for the client, never waiting: a client streamBacklog
// events behind is cut, told behind's event last.
func (s *stream) write(text string) {
	if s.gone() {
		return
	}
	if len(s.q) >= streamBacklog { // only this goroutine queues: room is room
		s.cut = true
		if s.behind != nil {
			s.q <- s.behind()
		}
		return
	}
	s.q <- text
}

// writeBy is the writer httpapi gives a handler: WriteBy bounds every
// later write by at, where each write's own bound (http.write_timeout from
// its start) would be later.
type writeBy interface{ WriteBy(at time.Time) }

// end writes what is queued, all of it within one write timeout from
// now, and stops the writer. The deadline stays: what the server writes
// after the handler (the chunked terminator) is bounded by it too.
func (s *stream) end() {
	final := time.Now().Add(s.wait)
	s.final.Store(final.UnixNano())
	if by, ok := s.w.(writeBy); ok {
		by.WriteBy(final)
	}
	close(s.q)
	<-s.done
}

// keepalive is the comment a quiet stream writes every http.keepalive:
// the SDKs' decoders (openai-node's SSEDecoder, openai-go's ssestream)
// skip a line that starts with ':'.
const keepalive = ": keepalive\n\n"

// QueuedBox is the Queued callback of a message's turn and the channel it
// tells, which WhileQueued reads; both surfaces make it so.
func QueuedBox() (<-chan bool, func(paused bool)) {
	queued := make(chan bool, 1)
	return queued, func(paused bool) {
		select {
		case queued <- paused:
		default:
		}
	}
}

// whileQueued runs submit and, once queued says the message waits behind
// another turn of its chat, starts the stream (200) and writes a comment
// every http.keepalive until submit answers: a stream silent until its
// turn started (behind a turn paused on the application's calls, up to
// toolsets.results_wait) was given up by its client's or a proxy's read
// timeout, and the SDKs then sent the request again. It returns the
// stream, if it started one, and submit's answer.
func (h *Handler) whileQueued(w http.ResponseWriter, queued <-chan bool, submit func() (string, error)) (*stream, string, error) {
	var out *stream
	turnID, err := WhileQueued(queued, h.cfg.HTTP.Keepalive.Duration, submit, func(bool) {
		out, _ = startStream(w, h.cfg.HTTP.WriteTimeout.Duration) // nil: the caller's own start fails alike
	}, func() {
		if out != nil {
			out.write(keepalive) // a client gone ends submit too: its context
		}
	})
	return out, turnID, err
}

// WhileQueued runs submit, which starts a message's turn, in a goroutine
// of its own that ends with it (the request's context bounds it) and,
// once queued says the message waits behind another turn of its chat,
// calls start (paused: that turn waits for the application's tool
// results), then alive every every, until submit answers, which it
// returns. Both surfaces start a queued message's stream so.
func WhileQueued(queued <-chan bool, every time.Duration, submit func() (string, error), start func(paused bool), alive func()) (string, error) {
	type answer struct {
		turnID string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		id, err := submit()
		done <- answer{id, err}
	}()
	var tick <-chan time.Time
	for {
		select {
		case a := <-done:
			return a.turnID, a.err
		case paused := <-queued:
			queued = nil
			t := time.NewTicker(every)
			defer t.Stop()
			tick = t.C
			start(paused)
		case <-tick:
			alive()
		}
	}
}

// refusal is the error write answers with, as its status and OpenAI's
// error object, for a stream that started before the error was known.
func refusal(write func(w http.ResponseWriter)) (int, apiError) {
	status, b := Recorded(write)
	var body struct {
		Error apiError `json:"error"`
	}
	_ = json.Unmarshal(b, &body)
	return status, body.Error
}

// Recorded is the status and body write answers with, for a stream that
// started before its error was known to tell it as an event.
func Recorded(write func(w http.ResponseWriter)) (status int, body []byte) {
	rec := &errorRecorder{header: http.Header{}}
	write(rec)
	return rec.status, rec.body.Bytes()
}

// errorRecorder takes what an error's writer answers, for Recorded.
type errorRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (e *errorRecorder) Header() http.Header         { return e.header }
func (e *errorRecorder) Write(b []byte) (int, error) { return e.body.Write(b) }
func (e *errorRecorder) WriteHeader(status int)      { e.status = status }
