package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/eventbus"
	"github.com/agentd/agentd/httpapi/oai"
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
	after := r.URL.Query().Get("after")
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	if after != "" && !hub.IsID(after) {
		// Any string would page on (ids sort), and a mistyped one would
		// answer an empty page as if the list had ended.
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("after %q is not a chat id: pass the next of the page before", clip(after, 80)))
		return
	}
	cs, more, err := s.hub.ChatsPage(r.Context(), tenant, after, limit)
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

// transcript answers a chat's stored messages, read from the store a page
// at a time and written a message at a time: a client that reads slowly,
// or not at all, holds one page, not the chat.
func (s *Server) transcript(w http.ResponseWriter, r *http.Request, tenant string) {
	from, ok := seqParam(w, r, "from_seq")
	if !ok {
		return
	}
	to, ok := seqParam(w, r, "to_seq")
	if !ok {
		return
	}
	id := r.PathValue("id")
	c, err := s.hub.Chat(r.Context(), tenant, id)
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	last := c.Messages
	if to > 0 {
		last = min(last, to)
	}
	pages := &messagePages{hub: s.hub, tenant: tenant, id: id, next: max(from, 1), last: last}
	first, err := pages.read(r.Context())
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	pw := newPieceWriter(w, s.cfg.HTTP.WriteTimeout.Duration)
	defer pw.end()
	_, _ = io.WriteString(pw, `{"messages":[`)
	list := &jsonList{w: pw}
	eachMessage(r, pages, first, func(m api.Message) error { return list.add(m) })
	_, _ = io.WriteString(pw, "]}\n")
}

// seqParam reads a message seq from the query (0 when absent); it answers
// 400 and reports false for anything but a whole number, 0 or more.
func seqParam(w http.ResponseWriter, r *http.Request, name string) (int64, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("%s %q: want a message seq (a whole number, 0 or more)", name, clip(v, 20)))
		return 0, false
	}
	return n, true
}

// messagePage is how many messages a transcript or an export reads from
// the store at once, at most (hub.TranscriptPage also bounds their bytes):
// what its handler holds while its client reads.
const messagePage = 64

// messagePages reads a chat's messages from seq next to seq last, a page
// at a time.
type messagePages struct {
	hub        Hub
	tenant, id string
	next, last int64
}

// read returns the next page; nil once past last.
func (p *messagePages) read(ctx context.Context) ([]api.Message, error) {
	if p.next > p.last {
		return nil, nil
	}
	hi := min(p.next+messagePage-1, p.last)
	ms, err := p.hub.TranscriptPage(ctx, p.tenant, p.id, p.next, hi)
	if n := len(ms); n > 0 && ms[n-1].Seq < hi {
		hi = ms[n-1].Seq // the page stopped at its bound
	}
	p.next = hi + 1
	if ms == nil && err == nil {
		ms = []api.Message{} // a gap in the seqs: go on
	}
	return ms, err
}

// eachMessage calls each with first and the messages of the pages after
// it, until the pages end or the client is cut (each failed). A store that
// fails once the answer has begun can no longer change its status: the
// connection is aborted, so the client sees a cut answer, not a whole one.
func eachMessage(r *http.Request, pages *messagePages, first []api.Message, each func(api.Message) error) {
	for ms := first; ms != nil; {
		for _, m := range ms {
			if each(m) != nil {
				return
			}
		}
		var err error
		if ms, err = pages.read(r.Context()); err != nil {
			abortAnswer(r, err)
		}
	}
}

// abortAnswer ends an answer begun with 200 that cannot be finished: err
// is logged (unless the client went away) and the connection is cut.
func abortAnswer(r *http.Request, err error) {
	if r.Context().Err() == nil {
		zerolog.Ctx(r.Context()).Error().Err(err).Str("method", r.Method).Str("path", clip(r.URL.Path, 200)).Msg("answer cut by an internal error")
	}
	panic(http.ErrAbortHandler)
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
	// Named here, so that the request takes its own turn's events alone
	// while that turn waits behind another.
	turnID := hub.NewID()
	key := r.Header.Get(IdempotencyKeyHeader)
	queued, queue := oai.QueuedBox()
	s.runTurn(w, r, tenant, id, turnID, queued, func(sub *eventbus.Sub) (string, error) {
		// A message sent again while its turn runs joins that turn: its
		// events are this request's from the next one on.
		joined := func(turnID string) { sub.OfTurn(turnID, api.EventCompacted) }
		// A JSON answer can say nothing while its message waits: behind a
		// turn paused on the application's calls (up to
		// toolsets.results_wait) it is refused at once instead (409 paused).
		return s.hub.SubmitKeyed(r.Context(), tenant, id, turnID, key, req, joined, queue, !wantsSSE(r))
	})
}

// IdempotencyKeyHeader names the key a client sends a message with, to
// send it again safely after a lost answer (docs/api.md), on the native
// API and the OpenAI-compatible one alike.
const IdempotencyKeyHeader = oai.IdempotencyKeyHeader

// runTurn starts a turn with start and answers with it: SSE when the
// client accepts text/event-stream, else JSON once the turn completes or
// pauses. turnID, when known before start ("" if not), narrows the
// subscription, which start is given, to that turn's events. queued, when
// not nil, hears that the message waits behind another turn: a stream
// starts then (whileQueued). A message whose turn ended before
// (*hub.AnsweredError) is answered from the transcript (replay).
func (s *Server) runTurn(w http.ResponseWriter, r *http.Request, tenant, chatID, turnID string, queued <-chan bool, start func(*eventbus.Sub) (turnID string, err error)) {
	sse := wantsSSE(r)
	var sub *eventbus.Sub
	if sse {
		sub = s.hub.Subscribe(chatID, streamBuffer)
	} else {
		sub = s.hub.Subscribe(chatID, waitBuffer, turnEndEvents...)
	}
	defer sub.Close()
	if turnID != "" {
		sub.OfTurn(turnID, api.EventCompacted)
	}
	var out *sseWriter
	var err error
	if sse && queued != nil {
		var res started
		var written bool
		if res, out, written = s.whileQueued(w, r, chatID, turnID, queued, func() (string, error) { return start(sub) }); written {
			return
		}
		turnID, err = res.turnID, res.err
	} else {
		turnID, err = start(sub)
	}
	var done *hub.AnsweredError
	switch {
	case errors.As(err, &done):
		s.replay(w, r, tenant, chatID, done.UserSeq, out, sse)
	case err != nil && out != nil:
		out.refuse(r, chatID, turnID, err)
	case err != nil:
		writeHubError(w, r, err)
	case sse:
		s.streamTurn(w, r, sub, turnID, out)
	default:
		s.waitJSON(w, r, sub, turnID)
	}
}

// whileQueued runs start and, once queued says the message waits behind
// the chat's running turn, starts the stream with turn.queued and keeps it
// alive until start answers: behind a turn paused for the application's
// tool results the wait lasts up to toolsets.results_wait, and a stream
// silent that long was cut by proxies and clients, whose retry without an
// idempotency key stored the message twice. It returns start's answer and
// the stream, if it started one; written: it could not, and answered so.
func (s *Server) whileQueued(w http.ResponseWriter, r *http.Request, chatID, turnID string, queued <-chan bool, start func() (string, error)) (started, *sseWriter, bool) {
	var out *sseWriter
	began := false
	id, err := oai.WhileQueued(queued, s.cfg.HTTP.Keepalive.Duration, start, func(paused bool) {
		began = true
		var ok bool
		if out, ok = startSSE(w, s.cfg.HTTP.WriteTimeout.Duration); ok {
			_ = out.send(&eventbus.Event{Type: api.EventTurnQueued, ChatID: chatID, TurnID: turnID, Data: api.TurnQueued{Paused: paused}})
		}
	}, func() {
		if out != nil {
			_ = out.comment("keepalive") // a client gone ends start too: its context
		}
	})
	return started{id, err}, out, out == nil && began
}

// started is what a turn's start answered.
type started struct {
	turnID string
	err    error
}

// refuse ends a stream started for a queued message with the error event
// of err: the status, kind and message it would have been answered with.
func (s *sseWriter) refuse(r *http.Request, chatID, turnID string, err error) {
	status, body := oai.Recorded(func(w http.ResponseWriter) { writeHubError(w, r, err) })
	var e api.Error
	_ = json.Unmarshal(body, &e)
	_ = s.send(&eventbus.Event{Type: api.EventError, ChatID: chatID, TurnID: turnID, Data: api.StreamError{Message: e.Message, Kind: e.Kind, Status: status}})
}

// waitJSON answers with the turn's end as JSON once it completes or pauses.
func (s *Server) waitJSON(w http.ResponseWriter, r *http.Request, sub *eventbus.Sub, turnID string) {
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

// replay answers a message sent again under its idempotency key after its
// turn ended, stored as userSeq: the turn's end, with what the chat stored
// from it up to the person's next message, turn_id empty and replayed
// set; as SSE, turn.started, each of those messages, then turn.completed.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, tenant, chatID string, userSeq int64, out *sseWriter, sse bool) {
	msgs, err := s.hub.AnsweredTurn(r.Context(), tenant, chatID, userSeq)
	if err != nil && out != nil {
		out.refuse(r, chatID, "", err)
		return
	}
	if err != nil {
		writeHubError(w, r, err)
		return
	}
	res := api.TurnResult{Status: "completed", Messages: msgs, Replayed: true}
	if !sse {
		writeJSON(w, http.StatusOK, res)
		return
	}
	if out == nil {
		var ok bool
		if out, ok = startSSE(w, s.cfg.HTTP.WriteTimeout.Duration); !ok {
			return
		}
	}
	defer out.end()
	events := []*eventbus.Event{{Type: api.EventTurnStarted, ChatID: chatID, Data: map[string]int64{"user_seq": userSeq}}}
	for _, m := range msgs {
		typ := api.EventMessage
		if m.Role == api.RoleTool {
			typ = api.EventToolResult
		}
		events = append(events, &eventbus.Event{Type: typ, ChatID: chatID, Data: m})
	}
	for _, ev := range append(events, &eventbus.Event{Type: api.EventTurnCompleted, ChatID: chatID, Data: res}) {
		if out.send(ev) != nil {
			return
		}
	}
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

// wantsSSE reports whether the request's Accept names text/event-stream,
// in any case, and weighs it (q) at least as much as JSON: a client that
// prefers JSON, or only accepts anything (*/*, curl's), gets JSON.
func wantsSSE(r *http.Request) bool {
	sse, json := 0.0, 0.0
	for _, v := range r.Header.Values("Accept") {
		for entry := range strings.SplitSeq(v, ",") {
			media, params, err := mime.ParseMediaType(entry)
			if err != nil {
				continue
			}
			q := 1.0
			if s, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(s, 64); err != nil {
					continue
				}
			}
			switch media {
			case "text/event-stream":
				sse = max(sse, q)
			case "application/json", "application/*", "*/*":
				json = max(json, q)
			}
		}
	}
	return sse > 0 && sse >= json
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
// bounded by http.write_timeout.
type sseWriter struct{ *pieceWriter }

func startSSE(w http.ResponseWriter, wait time.Duration) (*sseWriter, bool) {
	if _, ok := w.(http.Flusher); !ok {
		writeError(w, http.StatusInternalServerError, "internal", "streaming is not supported by this connection")
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sse := &sseWriter{newPieceWriter(w, wait)}
	_ = sse.flush()
	return sse, true
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
	if _, err := fmt.Fprintf(s, "event: %s\ndata: %s\n\n", ev.Type, b); err != nil {
		return err
	}
	return s.flush()
}

func (s *sseWriter) comment(text string) error {
	if _, err := fmt.Fprintf(s, ": %s\n\n", text); err != nil {
		return err
	}
	return s.flush()
}

// streamTurn sends one turn's events until it completes or the client
// goes; the turn goes on without the client, into the transcript. A client
// too slow for the turn's events is dropped like any watcher: the turn is
// never slowed for it (docs/design.md).
func (s *Server) streamTurn(w http.ResponseWriter, r *http.Request, sub *eventbus.Sub, turnID string, out *sseWriter) {
	pump(w, r, s.cfg.HTTP, sub, out, turnID, func(ev *eventbus.Event) (send, last bool) {
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
	pump(w, r, s.cfg.HTTP, sub, nil, "", func(ev *eventbus.Event) (bool, bool) { return true, ev.Type == api.EventChatDeleted })
}

// pump writes a subscription's events as SSE on sse (started here when
// nil), with a keepalive comment every http.keepalive, choosing with pick
// which to send and after which to stop. When the bus drops the
// subscription the stream ends with stream.dropped (of turnID, if any).
// Each write is bounded by http.write_timeout.
func pump(w http.ResponseWriter, r *http.Request, bounds configs.HTTP, sub *eventbus.Sub, sse *sseWriter, turnID string, pick func(*eventbus.Event) (send, last bool)) {
	if sse == nil {
		var ok bool
		if sse, ok = startSSE(w, bounds.WriteTimeout.Duration); !ok {
			return
		}
	}
	defer sse.end()
	keepalive := time.NewTicker(bounds.Keepalive.Duration)
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
	h := s.hub.Health()
	// A store that refuses every write until a restart is what a liveness
	// probe (or curl -f) must see; degraded providers no restart mends.
	status := http.StatusOK
	if h.Status == api.HealthFailing {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, h)
}
