package tools

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"
)

// The MCP SDK fails a whole connection on one inbound message over its
// frame limit, so a single huge answer would break every later call. agentd
// reads MCP traffic through these guards instead: a message over the limit
// is drained and replaced by a JSON-RPC error answering the same call, so
// that call fails clearly and the connection lives on.

// defaultMCPResultBytes bounds one MCP message when the server sets none.
const defaultMCPResultBytes = 8 << 20

// codeTooLarge is the JSON-RPC error code of a replaced answer (in the
// range JSON-RPC leaves to implementations).
const codeTooLarge = -32099

// headKeep is how much of an oversize message is kept to find its id.
const headKeep = 4 << 10

// tooLarge is the error answer that stands in for an oversize one.
func tooLarge(id json.RawMessage, size, limit int) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
		"code":    codeTooLarge,
		"message": fmt.Sprintf("the answer was %d bytes, over agentd's limit of %d bytes, and was dropped unread", size, limit),
	}})
	return b
}

// tooLargeText is what the model reads for a replaced answer.
func tooLargeText(server, tool string, we *jsonrpc.Error) string {
	return fmt.Sprintf("The MCP server %s answered the call to %s, but %s. Ask for less at once (a narrower query, one page of results).", server, tool, we.Message)
}

// boundedLine reads one line (through '\n') of at most limit bytes. A
// longer line is read to its end and dropped: line is nil, size says how
// long it was, and head keeps its start.
func boundedLine(r *bufio.Reader, limit int) (line []byte, size int, head []byte, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		size += len(chunk)
		if size <= limit {
			line = append(line, chunk...)
		} else {
			if head == nil {
				head = make([]byte, 0, headKeep)
				head = append(head, line[:min(len(line), headKeep)]...)
				head = append(head, chunk[:min(len(chunk), headKeep-len(head))]...)
			}
			line = nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if size > limit {
			return nil, size, head, err
		}
		return line, size, nil, err
	}
}

// responseID reads the id of a JSON-RPC response from the start of an
// oversize message. ok is false for a request or notification from the
// server (its id is the server's, not one of ours) and when the id does not
// come before the result.
func responseID(head []byte) (id json.RawMessage, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		t, err := dec.Token()
		key, isKey := t.(string)
		if err != nil || !isKey {
			return nil, false
		}
		switch key {
		case "method":
			return nil, false
		case "result", "error":
			return id, id != nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		if key == "id" {
			id = v
		}
	}
	return nil, false
}

// frames hands out, as one stream, the pieces next returns (nil: nothing
// this time), until next fails.
type frames struct {
	next    func() ([]byte, error)
	closer  io.Closer
	pending []byte
	err     error
}

func (f *frames) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.pending, f.err = f.next()
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

func (f *frames) Close() error { return f.closer.Close() }

// stdioGuard bounds each newline-delimited message a stdio server sends.
type stdioGuard struct {
	src   *bufio.Reader
	limit int
	log   zerolog.Logger
}

func newStdioGuard(r io.ReadCloser, limit int, log zerolog.Logger) io.ReadCloser {
	g := &stdioGuard{src: bufio.NewReaderSize(r, 64<<10), limit: limit, log: log}
	return &frames{next: g.next, closer: r}
}

// next is the next message, or its stand-in when it was over the limit.
func (g *stdioGuard) next() ([]byte, error) {
	line, size, head, err := boundedLine(g.src, g.limit)
	if head == nil {
		return line, err
	}
	id, ok := responseID(head)
	if !ok {
		g.log.Warn().Int("bytes", size).Msg("mcp server sent an oversize message that answers no call; dropped")
		return nil, err
	}
	g.log.Warn().Int("bytes", size).Int("limit", g.limit).Msg("mcp server answer over the limit; replaced by an error")
	return append(tooLarge(id, size, g.limit), '\n'), err
}

// httpGuard bounds the answers of a streamable-HTTP server: a JSON body or
// each event of an event stream.
type httpGuard struct {
	base  http.RoundTripper
	limit int
	log   zerolog.Logger
}

func (h httpGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.base.RoundTrip(req)
	if err != nil || resp.StatusCode/100 != 2 {
		return resp, err
	}
	id := requestID(req)
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch media {
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(resp.Body, int64(h.limit)+1))
		if err == nil && len(body) > h.limit {
			n, _ := io.Copy(io.Discard, resp.Body)
			h.log.Warn().Int64("bytes", int64(len(body))+n).Int("limit", h.limit).Msg("mcp server answer over the limit; replaced by an error")
			body = tooLarge(id, len(body)+int(n), h.limit)
		}
		_ = resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read the mcp answer: %w", err)
		}
		resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		resp.Header.Del("Content-Length")
	case "text/event-stream":
		g := &sseGuard{src: bufio.NewReaderSize(resp.Body, 64<<10), limit: h.limit, id: id, log: h.log}
		resp.Body = &frames{next: g.next, closer: resp.Body}
	}
	return resp, nil
}

// requestID is the id of the JSON-RPC call a request carries, or nil.
func requestID(req *http.Request) json.RawMessage {
	if req.GetBody == nil {
		return nil
	}
	b, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer b.Close()
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	if json.NewDecoder(io.LimitReader(b, 1<<20)).Decode(&msg) != nil {
		return nil
	}
	return msg.ID
}

// sseGuard passes an event stream through event by event; an event over
// the limit becomes one carrying the error answer to the stream's call.
type sseGuard struct {
	src   *bufio.Reader
	limit int
	id    json.RawMessage
	log   zerolog.Logger
	event []byte // the event being read
	over  int    // its size once over the limit, else 0
}

// next reads one line; at an event's end it returns the event.
func (g *sseGuard) next() ([]byte, error) {
	line, size, _, err := boundedLine(g.src, g.limit)
	if line == nil && size > 0 || g.over > 0 || len(g.event)+size > g.limit {
		g.over += len(g.event) + size
		g.event = nil
	} else {
		g.event = append(g.event, line...)
	}
	if !blank(line) && err == nil {
		return nil, nil
	}
	out := g.flush()
	g.event = nil
	return out, err
}

// flush ends the event read so far.
func (g *sseGuard) flush() []byte {
	if g.over == 0 {
		return g.event
	}
	size := g.over
	g.over = 0
	if g.id == nil {
		g.log.Warn().Int("bytes", size).Msg("mcp server sent an oversize event that answers no call; dropped")
		return nil
	}
	g.log.Warn().Int("bytes", size).Int("limit", g.limit).Msg("mcp server answer over the limit; replaced by an error")
	return []byte("event: message\ndata: " + string(tooLarge(g.id, size, g.limit)) + "\n\n")
}

// blank reports whether line ends an event.
func blank(line []byte) bool { return string(line) == "\n" || string(line) == "\r\n" }

// limitOrDefault is a server's message limit.
func limitOrDefault(n int) int {
	if n > 0 {
		return n
	}
	return defaultMCPResultBytes
}
