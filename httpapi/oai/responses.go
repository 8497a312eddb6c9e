package oai

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/eventbus"
)

// kindResponse is the chat record kind of a stored response.
const kindResponse = "response"

// streamBuffer is each response's event buffer, as the native API's turns.
const streamBuffer = 256

// responseRecord is a stored response: the object as answered, its input
// items and the agentd turn it was.
type responseRecord struct {
	ChatID   string   `json:"chat_id"`
	TurnID   string   `json:"turn_id"`
	Response response `json:"response"`
	Input    []item   `json:"input"`
}

func (h *Handler) createResponse(w http.ResponseWriter, r *http.Request, tenant string) {
	var req createRequest
	if !decode(w, r, &req) {
		return
	}
	p, err := h.plan(r.Context(), tenant, req)
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	h.respond(w, r, tenant, p)
}

// respond runs the plan's turn (or resumes it) and answers it: SSE events
// as it goes when the request streams, else the response once it ends.
// The response is stored before its end is told.
func (h *Handler) respond(w http.ResponseWriter, r *http.Request, tenant string, p *plan) {
	ctx := r.Context()
	sub := h.hub.Subscribe(p.chatID, streamBuffer)
	defer sub.Close()
	key := p.keyOf(r)
	var turnID string
	var err error
	var joined atomic.Bool
	var out *stream
	var submit func(queued func(bool)) (string, error)
	if p.results != nil {
		// Results a turn no longer waits for, stored already, are answered
		// by a turn that may wait behind another, as a message's does.
		submit = func(queued func(bool)) (string, error) {
			return h.submitResults(ctx, tenant, p.chatID, hub.NewID(), p.results, nil, queued)
		}
	} else {
		// The message may wait behind another turn of its chat: the
		// response takes only its own turn's events (eventbus.Sub.OfTurn).
		// Sent again under its key while its turn runs, it takes that
		// turn's.
		turnID = hub.NewID()
		sub.OfTurn(turnID)
		join := func(id string) {
			joined.Store(true)
			sub.OfTurn(id)
		}
		submit = func(queued func(bool)) (string, error) {
			return h.hub.SubmitUnpaused(ctx, tenant, p.chatID, turnID, key, *p.message, join, queued)
		}
	}
	if p.req.Stream {
		// Started at once when the turn waits behind another.
		queued, tell := QueuedBox()
		out, turnID, err = h.whileQueued(w, queued, func() (string, error) { return submit(tell) })
	} else {
		turnID, err = submit(nil)
	}
	if p.results == nil && p.created {
		err = h.settleNew(ctx, tenant, p.chatID, err)
	}
	if err != nil && out != nil {
		// Refused while it waited: its chat deleted, agentd stopping, the
		// turn before it paused on calls.
		status, e := refusal(func(w http.ResponseWriter) { h.writeSubmitError(w, r, err) })
		if status != StatusClientGone {
			text, _ := out.event("error", map[string]any{"code": e.Code, "message": e.Message, "param": e.Param})
			out.write(text)
		}
		out.end()
		return
	}
	var done *hub.AnsweredError
	if key.Value != "" && (errors.As(err, &done) || errors.Is(err, hub.ErrKeyInProgress)) {
		h.respondAgain(w, r, tenant, p, key.Value, done, err)
		return
	}
	if err != nil {
		h.writeSubmitError(w, r, err)
		return
	}
	b := p.builder()
	// A first sending's response is no other's: the same input may follow
	// the same response again.
	if key.Value != "" && !key.Unsought {
		b.resp.ID = keyedResponseID(p.chatID, key.Value)
	}
	if joined.Load() {
		h.respondJoined(w, r, tenant, p, b.resp.ID, sub, turnID)
		return
	}
	if p.req.Stream {
		if b.out = out; out == nil {
			if b.out, err = startStream(w, h.cfg.HTTP.WriteTimeout.Duration); err != nil {
				WriteError(w, http.StatusInternalServerError, "internal", "", err.Error())
				return
			}
		}
		defer b.out.end()
		// A client cut for falling behind is told where its response is:
		// it is followed and stored all the same.
		b.out.behind = func() string {
			text, _ := b.out.event("error", map[string]any{"code": "stream_dropped", "param": nil,
				"message": fmt.Sprintf("this stream fell %d events behind and ends here; the response goes on and is stored: retrieve it by its id", streamBacklog)})
			return text
		}
		b.emit("response.created", map[string]any{"response": b.resp})
		b.emit("response.in_progress", map[string]any{"response": b.resp})
	}
	// A client that leaves does not end its response: the id response.created
	// told may be named by previous_response_id or retrieved later, so the
	// response is followed to its end and stored all the same. Every turn
	// ends (its timeout, a shutdown), and a chat's waiting turns before it
	// bound the wait, as the forwarder's.
	followCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx),
		h.cfg.Limits.TurnTimeout.Duration*time.Duration(h.cfg.Limits.TurnsPerChat+1))
	defer cancel()
	res, ok := b.follow(followCtx, sub, turnID, b.out, h.cfg.HTTP.Keepalive.Duration)
	if !ok {
		why := "the response did not end while agentd followed it; it goes on in its chat"
		if d := sub.Dropped(); d != nil {
			why = "this request fell behind its response's events (" + d.Reason + "); the response goes on in its chat"
		}
		if b.out != nil {
			b.emit("error", map[string]any{"code": "timeout", "message": why, "param": nil})
			return
		}
		WriteError(w, http.StatusGatewayTimeout, "timeout", "", why)
		return
	}
	b.finish(res)
	nameInput(p.input, res.Messages)
	if b.resp.Store {
		rec := responseRecord{ChatID: p.chatID, TurnID: turnID, Response: *b.resp, Input: p.input}
		if err := h.hub.PutChatRecord(context.WithoutCancel(ctx), tenant, p.chatID, kindResponse, b.resp.ID, rec); err != nil {
			if b.out != nil {
				b.emit("error", map[string]any{"code": "internal", "message": "could not store the response: " + err.Error(), "param": nil})
				return
			}
			WriteHubError(w, r, err)
			return
		}
	}
	if b.out == nil {
		writeJSON(w, http.StatusOK, b.resp)
		return
	}
	// response.completed, response.incomplete or response.failed.
	b.emit("response."+b.resp.Status, map[string]any{"response": b.resp})
}

// writeSubmitError answers the error a response's message was refused
// with: a turn of its chat waiting for its calls (a conversation's, or a
// chain continued from an older response) is said as OpenAI says it.
func (h *Handler) writeSubmitError(w http.ResponseWriter, r *http.Request, err error) {
	var paused *hub.PausedError
	if errors.As(err, &paused) {
		WriteError(w, http.StatusBadRequest, "invalid_value", "input", fmt.Sprintf("No tool output found for function call %s.", strings.Join(paused.Calls, ", ")))
		return
	}
	WriteHubError(w, r, err)
}

// builder is the builder of the plan's response, which shows the model's
// reasoning when the request asks for it.
func (p *plan) builder() *builder {
	return &builder{resp: p.response(), reasoning: reasoning{shown: p.req.summarises()}}
}

// nonEmpty is s, or nil (JSON null) when it is empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// response is the plan's response as it starts: in progress, no output.
func (p *plan) response() *response {
	req := p.req
	store := req.Store == nil || *req.Store
	resp := &response{ID: responseID(p.chatID), Object: "response", CreatedAt: unix(), Status: statusInProgress,
		Instructions: req.Instructions, MaxOutputTokens: req.MaxOutputTokens, Model: p.model, Output: []item{},
		ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls, Store: store,
		Temperature: req.Temperature, TopP: req.TopP, ToolChoice: req.ToolChoice, Tools: req.Tools,
		Truncation: "disabled", Metadata: req.Metadata}
	if resp.ToolChoice == nil {
		resp.ToolChoice = json.RawMessage(`"auto"`)
	}
	if resp.Tools == nil {
		resp.Tools = []json.RawMessage{}
	}
	if resp.Metadata == nil {
		resp.Metadata = map[string]string{}
	}
	resp.Text.Format.Type = "text"
	if r := req.Reasoning; r != nil {
		resp.Reasoning = &reasoningConfig{Effort: nonEmpty(r.Effort), Summary: nonEmpty(cmp.Or(r.Summary, r.GenerateSummary))}
	}
	if req.PreviousResponseID != "" {
		resp.PreviousResponseID = &req.PreviousResponseID
	}
	if conv, _ := conversationOf(req.Conversation); conv != "" {
		resp.Conversation = &conversationRef{ID: conv}
	}
	return resp
}

func (h *Handler) getResponse(w http.ResponseWriter, r *http.Request, tenant string) {
	rec, err := h.record(r.Context(), tenant, r.PathValue("id"), "", "Response")
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rec.Response)
}

// deleteResponse forgets a stored response; its turn stays in its chat,
// whose transcript agentd keeps whole.
func (h *Handler) deleteResponse(w http.ResponseWriter, r *http.Request, tenant string) {
	id := r.PathValue("id")
	rec, err := h.record(r.Context(), tenant, id, "", "Response")
	if err == nil {
		err = h.hub.DeleteChatRecord(r.Context(), tenant, rec.ChatID, kindResponse, id)
	}
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response", "deleted": true})
}

// inputItems lists a response's input items, newest first unless
// order=asc, a page of limit (1-100, default 20) after the item after.
func (h *Handler) inputItems(w http.ResponseWriter, r *http.Request, tenant string) {
	rec, err := h.record(r.Context(), tenant, r.PathValue("id"), "", "Response")
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	its := slices.Clone(rec.Input)
	if its == nil {
		its = []item{}
	}
	writeList(w, r, its)
}

// writeList answers a page of items in OpenAI's list shape, by the
// request's order (default desc), after and limit.
func writeList(w http.ResponseWriter, r *http.Request, its []item) {
	lp, ok := listParams(w, r)
	if !ok {
		return
	}
	if lp.desc {
		slices.Reverse(its)
	}
	if lp.after != "" {
		i := slices.IndexFunc(its, func(it item) bool { return it.ID == lp.after })
		if i < 0 {
			lp.unknownAfter(w)
			return
		}
		its = its[i+1:]
	}
	writePage(w, its, lp.limit)
}

// listing is what a list request asks for: limit items (1-100, default
// 20), newest first unless order=asc, after the item after.
type listing struct {
	limit int
	desc  bool
	after string
}

// listParams reads a list request's query; a bad one is answered 400.
func listParams(w http.ResponseWriter, r *http.Request) (listing, bool) {
	q := r.URL.Query()
	lp := listing{limit: 20, after: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			WriteError(w, http.StatusBadRequest, "invalid_value", "limit", fmt.Sprintf("limit %q: want a whole number from 1 to 100", clip(v, 20)))
			return lp, false
		}
		lp.limit = n
	}
	switch q.Get("order") {
	case "", "desc":
		lp.desc = true
	case "asc":
	default:
		WriteError(w, http.StatusBadRequest, "invalid_value", "order", "order: use asc or desc")
		return lp, false
	}
	return lp, true
}

// unknownAfter refuses an after that names no item of the list: the whole
// list again would loop a client paging on a stale id.
func (lp listing) unknownAfter(w http.ResponseWriter) {
	WriteError(w, http.StatusBadRequest, "invalid_value", "after", fmt.Sprintf("after %q: no such item in this list", clip(lp.after, 80)))
}

// pageBytes bounds the text a page of items holds: a page of a hundred of
// the largest messages would be tens of MiB. Past it the page is shorter
// than its limit, and has_more sends the client on from its last_id, as a
// cursor list allows.
const pageBytes = 1 << 20

// answered is how many of its a page answers: the first limit, or fewer
// once their text reaches pageBytes, but at least one.
func answered(its []item, limit int) int {
	size := 0
	for i, it := range its {
		if i == limit || size >= pageBytes {
			return i
		}
		size += it.textBytes()
	}
	return len(its)
}

// writePage answers the first items of its (answered), and whether more
// follow.
func writePage(w http.ResponseWriter, its []item, limit int) {
	n := answered(its, limit)
	more := len(its) > n
	its = its[:n]
	page := map[string]any{"object": "list", "data": its, "has_more": more, "first_id": nil, "last_id": nil}
	if len(its) > 0 {
		page["first_id"], page["last_id"] = its[0].ID, its[len(its)-1].ID
	}
	writeJSON(w, http.StatusOK, page)
}

// builder turns one turn's events into a response's output, writing the
// stream's events as it goes when out is set.
type builder struct {
	resp *response
	out  *stream
	open int  // index of the message item taking deltas, when has
	has  bool // a message item is open
	text []byte
	// spent is what the turn's model calls cost while this response
	// followed it: a response that resumes a paused turn does not count
	// the calls an earlier response already reported.
	spent api.Usage
	// reasoning is the reasoning item being told (reasoning.go).
	reasoning reasoning
	// seq is the seq of the message the answer being told is stored as,
	// which names its items: its stored message's, or one more than the
	// message its first words' event follows (the session is its chat's
	// one writer, and stores the answer next).
	seq int64
}

// follow reads the turn's events until it completes or pauses for the
// client's function calls, writing a comment to alive (when not nil)
// every every: a stream stays quiet while a tool runs or a model thinks.
func (b *builder) follow(ctx context.Context, sub *eventbus.Sub, turnID string, alive *stream, every time.Duration) (api.TurnResult, bool) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if alive != nil {
				alive.write(keepalive)
			}
		case ev, ok := <-sub.C:
			if !ok {
				return api.TurnResult{}, false
			}
			if ev.TurnID != turnID {
				continue
			}
			switch ev.Type {
			case api.EventMessageDelta:
				if d, ok := ev.Data.(map[string]string); ok && d["text"] != "" {
					b.seq = ev.Seq + 1
					b.delta(d["text"])
				}
			case api.EventThinkingDelta:
				if d, ok := ev.Data.(map[string]string); ok {
					b.seq = ev.Seq + 1
					b.think(d["text"])
				}
			case api.EventThinkingReset:
				b.rethink()
			case api.EventMessageReset:
				b.unsay()
			case api.EventMessage:
				if m, ok := ev.Data.(api.Message); ok && m.Role == api.RoleAssistant {
					b.endAnswer(m)
				}
			case api.EventUsage:
				if u, ok := ev.Data.(api.Usage); ok {
					b.spent = b.spent.Add(u)
				}
			case api.EventTurnCompleted, api.EventTurnRequiresAction:
				res, ok := ev.Data.(api.TurnResult)
				return res, ok
			}
		case <-ctx.Done():
			return api.TurnResult{}, false
		}
	}
}

func (b *builder) openText() {
	b.open, b.has, b.text = len(b.resp.Output), true, b.text[:0]
	it := messageItem(messageItemID(b.seq), statusInProgress)
	b.resp.Output = append(b.resp.Output, it)
	b.emit("response.output_item.added", map[string]any{"output_index": b.open, "item": it})
	b.emit("response.content_part.added", map[string]any{"item_id": it.ID, "output_index": b.open, "content_index": 0, "part": outputText("")})
}

func (b *builder) delta(text string) {
	if !b.has {
		if b.reasoning.open {
			b.closeReasoning("", statusCompleted)
		}
		b.openText()
	}
	b.text = append(b.text, text...)
	b.emit("response.output_text.delta", map[string]any{"item_id": b.resp.Output[b.open].ID, "output_index": b.open, "content_index": 0,
		"delta": text, "logprobs": []any{}})
}

// closeText ends the open message item with the stored text, which wins
// over the deltas (a lagging stream may have missed some), and its status.
func (b *builder) closeText(text, status string) {
	if !b.has {
		b.openText()
	}
	id := b.resp.Output[b.open].ID
	it := messageItem(id, status, outputText(text))
	b.resp.Output[b.open] = it
	b.emit("response.output_text.done", map[string]any{"item_id": id, "output_index": b.open, "content_index": 0, "text": text, "logprobs": []any{}})
	b.emit("response.content_part.done", map[string]any{"item_id": id, "output_index": b.open, "content_index": 0, "part": outputText(text)})
	b.emit("response.output_item.done", map[string]any{"output_index": b.open, "item": it})
	b.has = false
}

// finish ends the response with the turn's result: the client's calls
// as function_call items, the usage, and a failure's error; an answer cut
// at the client's max_output_tokens makes it incomplete, as on OpenAI, and
// so does one the provider refused (reason content_filter).
func (b *builder) finish(res api.TurnResult) {
	if b.reasoning.open {
		status := statusCompleted
		if failedBy(res.Problem) {
			status = statusIncomplete
		}
		b.closeReasoning("", status)
	}
	if b.has {
		status := statusCompleted
		if res.Refused {
			status = statusIncomplete
		}
		b.closeText(string(b.text), status)
	}
	for _, c := range res.ToolCalls {
		i := len(b.resp.Output)
		it := item{Type: itemFunctionCall, ID: callItemOf(res.Messages, c), Status: statusInProgress, CallID: c.ID, Name: c.Name, Arguments: new(string)}
		b.resp.Output = append(b.resp.Output, it)
		b.emit("response.output_item.added", map[string]any{"output_index": i, "item": it})
		b.emit("response.function_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": i, "delta": c.Arguments})
		b.emit("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": i, "name": c.Name, "arguments": c.Arguments})
		it.Status, it.Arguments = statusCompleted, &c.Arguments
		b.resp.Output[i] = it
		b.emit("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	u := &usage{InputTokens: b.spent.InputTokens, OutputTokens: b.spent.OutputTokens, TotalTokens: b.spent.InputTokens + b.spent.OutputTokens}
	u.InputTokensDetails.CachedTokens = b.spent.CachedTokens
	u.OutputTokensDetails.ReasoningTokens = b.spent.ReasoningTokens
	b.resp.Usage = u
	b.resp.Status = statusCompleted
	switch {
	case failedBy(res.Problem):
		b.resp.Status, b.resp.Error = statusFailed, problemError(res.Problem)
	case res.Refused:
		b.resp.Status, b.resp.IncompleteDetails = statusIncomplete, &incompleteDetails{Reason: "content_filter"}
	case cutShort(res):
		b.resp.Status, b.resp.IncompleteDetails = statusIncomplete, &incompleteDetails{Reason: "max_output_tokens"}
	}
}

// callItemOf is the id of call c's function_call item: the last answer of
// msgs that asked for it names it (a provider that numbers its calls
// reuses their ids from one answer to the next).
func callItemOf(msgs []api.Message, c api.ToolCall) string {
	for _, m := range slices.Backward(msgs) {
		if n := slices.IndexFunc(m.ToolCalls, func(mc api.ToolCall) bool { return mc.ID == c.ID }); n >= 0 && m.Role == api.RoleAssistant {
			return callItemID(m.Seq, n)
		}
	}
	// A paused turn's messages hold the answer that asked for its calls;
	// were one missing, the item still gets an id of its own.
	return newID("fc_")
}

// problemError is OpenAI's error for why a turn ended without its answer:
// a too-long problem agentd could not heal is context_length_exceeded,
// naming agentd's next step.
func problemError(p *api.Problem) *responseError {
	if p.Kind != api.ProblemTooLong {
		return &responseError{Code: "server_error", Message: p.Message}
	}
	msg := p.Message
	if p.NextStep != nil && p.NextStep.Message != "" {
		msg += " Next step: " + p.NextStep.Message
	}
	return &responseError{Code: "context_length_exceeded", Message: msg}
}

// emit sends one stream event, numbered; without a stream it does nothing.
// A client gone is not waited for: the response goes on and is stored.
func (b *builder) emit(typ string, fields map[string]any) {
	if b.out != nil {
		b.out.send(typ, fields)
	}
}
