package anthropicfake

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentd/agentd/testkit"
)

// sse writes server-sent events and counts them, so a reply can have the
// connection cut after a number of them.
type sse struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	sent int
	cut  int // close the connection after this many events; 0: never
	dead bool
}

// send writes one event and flushes it. It returns false once the stream
// is over (cut, or the client went away).
func (e *sse) send(event string, data any) bool {
	if e.dead {
		return false
	}
	b, err := marshal(data)
	if err != nil {
		e.dead = true
		return false
	}
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		e.dead = true
		return false
	}
	if err := e.rc.Flush(); err != nil {
		e.dead = true
		return false
	}
	e.sent++
	if e.cut > 0 && e.sent >= e.cut {
		e.hangUp()
		return false
	}
	return true
}

// hangUp closes the TCP connection without ending the chunked body, so the
// client sees the stream break as it would when a proxy drops it.
func (e *sse) hangUp() {
	e.dead = true
	conn, _, err := e.rc.Hijack()
	if err != nil {
		// HTTP/2 cannot be hijacked; aborting the handler resets the stream.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// stream answers with the event sequence of
// https://docs.anthropic.com/en/docs/build-with-claude/streaming:
// message_start, then per block content_block_start / content_block_delta…
// / content_block_stop (a ping after the first start), message_delta with
// stop_reason (a refusal's stop_details with it) and the cumulative
// output_tokens, message_stop.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, p parsed, reply testkit.Reply) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("request-id", "req_fake")
	w.WriteHeader(http.StatusOK)
	e := &sse{w: w, rc: http.NewResponseController(w), cut: reply.CutAfterChunks}
	if reply.Garbage {
		_, _ = w.Write([]byte(garbage))
		return
	}
	u := usageFor(p.received, reply)
	msg := s.messageShell(p)
	// message_start reports the input and a token or so of output; the
	// final output count comes in message_delta.
	msg["usage"] = wireUsage(u, min(1, u.OutputTokens))
	if !e.send("message_start", map[string]any{"type": "message_start", "message": msg}) {
		return
	}
	if reply.StreamError != "" {
		if e.send("ping", map[string]any{"type": "ping"}) {
			e.send("error", json.RawMessage(errorJSON(reply.StreamError)))
		}
		return
	}
	for i, b := range s.blocksFor(reply) {
		if !s.streamBlock(e, i, b, reply.ChunkRunes) {
			return
		}
	}
	if !e.send("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(reply), "stop_sequence": nil, "stop_details": stopDetails(reply)},
		"usage": map[string]any{"output_tokens": u.OutputTokens},
	}) {
		return
	}
	e.send("message_stop", map[string]any{"type": "message_stop"})
}

func (s *Server) streamBlock(e *sse, i int, b block, chunk int) bool {
	if !e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": startBlock(b)}) {
		return false
	}
	if i == 0 && !e.send("ping", map[string]any{"type": "ping"}) {
		return false
	}
	for _, d := range deltas(b, chunk) {
		if !e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d}) {
			return false
		}
	}
	return e.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
}
