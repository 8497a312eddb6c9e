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
	"regexp"

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
		"message": fmt.Sprintf("the answer was %d bytes or more, over agentd's limit of %d bytes, and was dropped unread", size, limit),
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

// stdioGuard bounds each newline-delimited message a stdio server sends.
type stdioGuard struct {
	src     *bufio.Reader
	closer  io.Closer
	limit   int
	log     zerolog.Logger
	pending []byte
	err     error
}

func newStdioGuard(r io.ReadCloser, limit int, log zerolog.Logger) *stdioGuard {
	return &stdioGuard{src: bufio.NewReaderSize(r, 64<<10), closer: r, limit: limit, log: log}
}

func (g *stdioGuard) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		got, size, head, err := boundedLine(g.src, g.limit)
		g.err = err
		if got != nil {
			g.pending = got
			continue
		}
		if head == nil {
			continue
		}
		id, ok := responseID(head)
		if !ok {
			g.log.Warn().Int("bytes", size).Msg("mcp server sent an oversize message that answers no call; dropped")
			continue
		}
		g.log.Warn().Int("bytes", size).Int("limit", g.limit).Msg("mcp server answer over the limit; replaced by an error")
		g.pending = append(tooLarge(id, size, g.limit), '\n')
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

func (g *stdioGuard) Close() error { return g.closer.Close() }

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
		resp.Body = &sseGuard{src: bufio.NewReaderSize(resp.Body, 64<<10), closer: resp.Body, limit: h.limit, id: id, log: h.log}
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
	src     *bufio.Reader
	closer  io.Closer
	limit   int
	id      json.RawMessage
	log     zerolog.Logger
	event   []byte // the event being read
	over    int    // its size once over the limit, else 0
	pending []byte
	err     error
}

func (g *sseGuard) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		line, size, _, err := boundedLine(g.src, g.limit)
		g.err = err
		if line == nil && size > 0 || g.over > 0 || len(g.event)+size > g.limit {
			g.over += len(g.event) + size
			g.event = nil
		} else {
			g.event = append(g.event, line...)
		}
		if blank(line) || err != nil {
			g.pending, g.event = g.flush(), nil
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
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

var blankLine = regexp.MustCompile(`^\r?\n$`)

func blank(line []byte) bool { return blankLine.Match(line) }

func (g *sseGuard) Close() error { return g.closer.Close() }

// limitOrDefault is a server's message limit.
func limitOrDefault(n int) int {
	if n > 0 {
		return n
	}
	return defaultMCPResultBytes
}
