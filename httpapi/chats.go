package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/eventbus"
)

func (s *Server) createChat(w http.ResponseWriter, r *http.Request, tenant string) {
	var req api.CreateChatRequest
	if r.ContentLength != 0 && !decode(w, r, &req) {
		return
	}
	c, err := s.hub.CreateChat(r.Context(), tenant, req)
	if err != nil {
		writeHubError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

func (s *Server) listChats(w http.ResponseWriter, r *http.Request, tenant string) {
	cs, err := s.hub.Chats(r.Context(), tenant)
	if err != nil {
		writeHubError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"chats": cs})
}

func (s *Server) getChat(w http.ResponseWriter, r *http.Request, tenant string) {
	c, err := s.hub.Chat(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		writeHubError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) patchChat(w http.ResponseWriter, r *http.Request, tenant string) {
	var req api.PatchChatRequest
	if !decode(w, r, &req) {
		return
	}
	id := r.PathValue("id")
	if err := s.hub.Patch(r.Context(), tenant, id, req); err != nil {
		writeHubError(w, err)
		return
	}
	s.getChat(w, r, tenant)
}

func (s *Server) transcript(w http.ResponseWriter, r *http.Request, tenant string) {
	from, _ := strconv.ParseInt(r.URL.Query().Get("from_seq"), 10, 64)
	to, _ := strconv.ParseInt(r.URL.Query().Get("to_seq"), 10, 64)
	msgs, err := s.hub.Transcript(r.Context(), tenant, r.PathValue("id"), from, to)
	if err != nil {
		writeHubError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs})
}

func (s *Server) context(w http.ResponseWriter, r *http.Request, tenant string) {
	v, err := s.hub.Context(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		writeHubError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) compact(w http.ResponseWriter, r *http.Request, tenant string) {
	var req api.CompactRequest
	if r.ContentLength != 0 && !decode(w, r, &req) {
		return
	}
	c, err := s.hub.Compact(r.Context(), tenant, r.PathValue("id"), req.Focus)
	if err != nil {
		writeHubError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) models(w http.ResponseWriter, r *http.Request, tenant string) {
	writeJSON(w, http.StatusOK, s.hub.Models())
}

// sendMessage stores the person's message and runs its turn, streaming its
// events as SSE when the client accepts text/event-stream.
func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request, tenant string) {
	var req api.SendMessageRequest
	if !decode(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.Content) == "" && len(req.AttachmentIDs) == 0 && len(req.Paths) == 0 {
		writeError(w, http.StatusBadRequest, "bad_request", "content is empty: send {\"content\": \"...\"}")
		return
	}
	if len(req.Content) > s.cfg.Limits.MaxMessageBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("message is %d bytes; the limit is %d (attach big texts as files)", len(req.Content), s.cfg.Limits.MaxMessageBytes))
		return
	}
	if !utf8.ValidString(req.Content) {
		writeError(w, http.StatusBadRequest, "bad_request", "content is not valid UTF-8")
		return
	}
	switch req.Origin {
	case api.OriginPerson, api.OriginSchedule, api.OriginApp:
	default:
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("origin %q: use \"\", \"schedule\" or \"app\"", req.Origin))
		return
	}
	id := r.PathValue("id")
	if !s.acquireTurn(tenant) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "busy", fmt.Sprintf("this tenant has %d turns in flight, the most allowed", s.cfg.Limits.TurnsPerTenant))
		return
	}
	defer s.releaseTurn(tenant)
	s.turns.Add(1)
	defer s.turns.Done()
	sub := s.hub.Subscribe(id, streamBuffer)
	defer sub.Close()
	turnID, err := s.hub.Submit(r.Context(), tenant, id, req)
	if err != nil {
		writeHubError(w, err)
		return
	}
	if wantsSSE(r) {
		s.streamTurn(w, r, sub, turnID)
		return
	}
	res, ok := waitTurn(r.Context(), sub, turnID)
	if !ok {
		writeError(w, http.StatusGatewayTimeout, "timeout", "the turn did not finish while the request was open; read it from the transcript")
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// streamBuffer is each stream's event buffer: deltas past it are dropped
// for a lagging client (the stored message is whole), everything else
// waits for room. A thousand streams at once hold about 20 MB.
const streamBuffer = 256

func wantsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// waitTurn collects a turn's events until it completes.
func waitTurn(ctx context.Context, sub *eventbus.Sub, turnID string) (api.TurnResult, bool) {
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				return api.TurnResult{}, false
			}
			if ev.TurnID == turnID && ev.Type == api.EventTurnCompleted {
				res, ok := ev.Data.(api.TurnResult)
				return res, ok
			}
		case <-ctx.Done():
			return api.TurnResult{}, false
		}
	}
}

// sseWriter writes Server-Sent Events with explicit flushes.
type sseWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) (*sseWriter, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "streaming is not supported by this connection")
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &sseWriter{w: w, f: f}, true
}

func (s *sseWriter) send(ev eventbus.Event) error {
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return err
	}
	b, err := json.Marshal(api.Event{Type: ev.Type, ChatID: ev.ChatID, TurnID: ev.TurnID, Data: data})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", ev.Type, b); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

func (s *sseWriter) comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// streamTurn sends one turn's events until it completes or the client
// goes; the turn goes on without the client, into the transcript.
func (s *Server) streamTurn(w http.ResponseWriter, r *http.Request, sub *eventbus.Sub, turnID string) {
	pump(w, r, sub, func(ev eventbus.Event) (send, last bool) {
		mine := ev.TurnID == turnID
		return mine || ev.Type == api.EventCompacted, mine && ev.Type == api.EventTurnCompleted
	})
}

// watch streams every event of a chat until the client goes.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, tenant string) {
	id := r.PathValue("id")
	if _, err := s.hub.Chat(r.Context(), tenant, id); err != nil {
		writeHubError(w, err)
		return
	}
	sub := s.hub.Subscribe(id, streamBuffer)
	defer sub.Close()
	pump(w, r, sub, func(eventbus.Event) (bool, bool) { return true, false })
}

// pump writes a subscription's events as SSE, with keepalives, choosing
// with pick which to send and after which to stop.
func pump(w http.ResponseWriter, r *http.Request, sub *eventbus.Sub, pick func(eventbus.Event) (send, last bool)) {
	sse, ok := startSSE(w)
	if !ok {
		return
	}
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				return
			}
			send, last := pick(ev)
			if send && sse.send(ev) != nil {
				return
			}
			if last {
				return
			}
		case <-keepalive.C:
			if sse.comment("keepalive") != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// health reports whether the daemon works and what it has done.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.hub.Health())
}
