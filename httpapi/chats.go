package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/eventbus"
)

// Pages of GET /v1/chats and a chat's activity.
const (
	defaultChatPage = 100
	maxChatPage     = 1000
)

func (s *Server) createChat(w http.ResponseWriter, r *http.Request, tenant string) {
	var req api.CreateChatRequest
	if r.ContentLength != 0 && !decode(w, r, &req) {
		return
	}
	if !s.titleFits(w, &req.Title) {
		return
	}
	c, err := s.hub.CreateChat(r.Context(), tenant, req)
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

// titleFits answers 400 and reports false when a title is over
// limits.max_title_runes.
func (s *Server) titleFits(w http.ResponseWriter, title *string) bool {
	if title == nil {
		return true
	}
	if n, most := utf8.RuneCountInString(*title), s.cfg.Limits.MaxTitleRunes; n > most {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("title is %d characters; the limit is %d (limits.max_title_runes)", n, most))
		return false
	}
	return true
}

// pageLimit reads a page's limit= (default when absent); it answers 400
// and reports false for anything but a whole number from 1 to maxChatPage.
func pageLimit(w http.ResponseWriter, r *http.Request) (int, bool) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return defaultChatPage, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxChatPage {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("limit %q: want a whole number from 1 to %d", clip(v, 20), maxChatPage))
		return 0, false
	}
	return n, true
}

// listChats answers one page of the tenant's chats, in id order.
func (s *Server) listChats(w http.ResponseWriter, r *http.Request, tenant string) {
	q := r.URL.Query()
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	cs, more, err := s.hub.ChatsPage(r.Context(), tenant, q.Get("after"), limit)
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	page := api.ChatList{Chats: cs}
	if page.Chats == nil {
		page.Chats = []api.Chat{}
	}
	if more {
		page.Next = cs[len(cs)-1].ID
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) getChat(w http.ResponseWriter, r *http.Request, tenant string) {
	c, err := s.hub.Chat(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) patchChat(w http.ResponseWriter, r *http.Request, tenant string) {
	var req api.PatchChatRequest
	if !decode(w, r, &req) || !s.titleFits(w, req.Title) {
		return
	}
	id := r.PathValue("id")
	if err := s.hub.Patch(r.Context(), tenant, id, req); err != nil {
		writeHubError(w, r, err)
		return
	}
	s.getChat(w, r, tenant)
}

func (s *Server) deleteChat(w http.ResponseWriter, r *http.Request, tenant string) {
	if err := s.hub.DeleteChat(r.Context(), tenant, r.PathValue("id")); err != nil {
		writeHubError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) transcript(w http.ResponseWriter, r *http.Request, tenant string) {
	from, _ := strconv.ParseInt(r.URL.Query().Get("from_seq"), 10, 64)
	to, _ := strconv.ParseInt(r.URL.Query().Get("to_seq"), 10, 64)
	msgs, err := s.hub.Transcript(r.Context(), tenant, r.PathValue("id"), from, to)
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs})
}

// activity answers one page of a chat's activity log, oldest first.
func (s *Server) activity(w http.ResponseWriter, r *http.Request, tenant string) {
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	var after int64
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("after %q: want an activity id (a whole number, 0 or more)", clip(v, 20)))
			return
		}
		after = n
	}
	items, more, err := s.hub.Activity(r.Context(), tenant, r.PathValue("id"), after, limit)
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	page := api.ActivityPage{Activity: items}
	if more {
		page.Next = items[len(items)-1].ID
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) context(w http.ResponseWriter, r *http.Request, tenant string) {
	v, err := s.hub.Context(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		writeHubError(w, r, err)
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
		writeHubError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// refreshModels re-reads every provider's list now, as agentd does by
// itself from time to time, and answers what it knows after.
func (s *Server) refreshModels(w http.ResponseWriter, r *http.Request, tenant string) {
	writeJSON(w, http.StatusOK, s.hub.Refresh(r.Context()))
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
	s.runTurn(w, r, id, func() (string, error) { return s.hub.Submit(r.Context(), tenant, id, req) })
}

// runTurn starts a turn with start and answers with it: SSE when the
// client accepts text/event-stream, else JSON once the turn completes or
// pauses.
func (s *Server) runTurn(w http.ResponseWriter, r *http.Request, chatID string, start func() (turnID string, err error)) {
	s.turns.Add(1)
	defer s.turns.Done()
	sse := wantsSSE(r)
	var sub *eventbus.Sub
	if sse {
		sub = s.hub.Subscribe(chatID, streamBuffer)
	} else {
		sub = s.hub.Subscribe(chatID, waitBuffer, turnEndEvents...)
	}
	defer sub.Close()
	turnID, err := start()
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	if sse {
		s.streamTurn(w, r, sub, turnID)
		return
	}
	res, ok := waitTurn(r.Context(), sub, turnID)
	if !ok {
		why := "the turn did not finish while the request was open"
		if d := sub.Dropped(); d != nil {
			why = "this request fell behind its turn's events (" + d.Reason + ")"
		}
		writeError(w, http.StatusGatewayTimeout, "timeout", why+"; the turn goes on: read it from the transcript")
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// streamBuffer is each stream's event buffer: deltas past three quarters of
// it are dropped for a lagging client (the stored message is whole); a
// client that lets it fill is dropped (eventbus). A thousand streams at
// once hold about 20 MB.
const streamBuffer = 256

// waitBuffer is the buffer of a request that answers once its turn ends:
// it takes only turn ends (turnEndEvents), and reads each as it comes.
const waitBuffer = 16

// turnEndEvents end what a request waits for of a turn (turnEnds).
var turnEndEvents = []string{api.EventTurnCompleted, api.EventTurnRequiresAction}

// sseWriteWait bounds one write to a stream's client: a client that takes
// nothing for that long is cut, so its handler does not hold a connection
// for a reader that is gone.
const sseWriteWait = 30 * time.Second

func wantsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// turnEnds reports whether ev ends what a request waits for of a turn: it
// completed, or paused for the application's tool results.
func turnEnds(ev *eventbus.Event, turnID string) bool {
	return ev.TurnID == turnID && slices.Contains(turnEndEvents, ev.Type)
}

// waitTurn collects a turn's events until it completes or pauses.
func waitTurn(ctx context.Context, sub *eventbus.Sub, turnID string) (api.TurnResult, bool) {
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				return api.TurnResult{}, false
			}
			if turnEnds(ev, turnID) {
				res, ok := ev.Data.(api.TurnResult)
				return res, ok
			}
		case <-ctx.Done():
			return api.TurnResult{}, false
		}
	}
}

// sseWriter writes Server-Sent Events with explicit flushes, each write
// bounded by sseWriteWait.
type sseWriter struct {
	w  http.ResponseWriter
	f  http.Flusher
	rc *http.ResponseController
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
	return &sseWriter{w: w, f: f, rc: http.NewResponseController(w)}, true
}

// deadline bounds the next write; a writer without deadlines (a test's
// recorder) is written to unbounded.
func (s *sseWriter) deadline() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(sseWriteWait))
}

func (s *sseWriter) send(ev *eventbus.Event) error {
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return err
	}
	b, err := json.Marshal(api.Event{Type: ev.Type, ChatID: ev.ChatID, TurnID: ev.TurnID, Data: data})
	if err != nil {
		return err
	}
	s.deadline()
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", ev.Type, b); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

func (s *sseWriter) comment(text string) error {
	s.deadline()
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// streamTurn sends one turn's events until it completes or the client
// goes; the turn goes on without the client, into the transcript. A client
// too slow for the turn's events is dropped like any watcher: the turn is
// never slowed for it (docs/design.md).
func (s *Server) streamTurn(w http.ResponseWriter, r *http.Request, sub *eventbus.Sub, turnID string) {
	pump(w, r, sub, turnID, func(ev *eventbus.Event) (send, last bool) {
		return ev.TurnID == turnID || ev.Type == api.EventCompacted, turnEnds(ev, turnID)
	})
}

// watch streams every event of a chat until the client goes or the chat
// is deleted.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, tenant string) {
	id := r.PathValue("id")
	if _, err := s.hub.Chat(r.Context(), tenant, id); err != nil {
		writeHubError(w, r, err)
		return
	}
	sub := s.hub.Subscribe(id, streamBuffer)
	defer sub.Close()
	pump(w, r, sub, "", func(ev *eventbus.Event) (bool, bool) { return true, ev.Type == api.EventChatDeleted })
}

// pump writes a subscription's events as SSE, with keepalives, choosing
// with pick which to send and after which to stop. When the bus drops the
// subscription the stream ends with stream.dropped (of turnID, if any).
func pump(w http.ResponseWriter, r *http.Request, sub *eventbus.Sub, turnID string, pick func(*eventbus.Event) (send, last bool)) {
	sse, ok := startSSE(w)
	if !ok {
		return
	}
	// The connection may serve a next request: lift the write deadline.
	defer func() { _ = sse.rc.SetWriteDeadline(time.Time{}) }()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				if d := sub.Dropped(); d != nil {
					_ = sse.send(&eventbus.Event{Type: api.EventStreamDropped, ChatID: r.PathValue("id"), TurnID: turnID,
						Data: api.StreamDropped{Reason: d.Reason, LastSeq: d.LastSeq}})
				}
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
