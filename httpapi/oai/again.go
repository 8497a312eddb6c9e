package oai

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/eventbus"
)

// IdempotencyKeyHeader names the key a client sends a request with, to
// send it again safely after a lost answer, as on agentd's native API
// (docs/openai.md, "Sending again safely"). OpenAI's SDKs send none of
// their own: a client sets it per request (the same key for the SDK's own
// retries of that request), e.g. openai-python's extra_headers, the npm
// package's headers option, openai-go's option.WithHeader.
const IdempotencyKeyHeader = "Idempotency-Key"

// RetryCountHeader is what OpenAI's SDKs send with every request: 0 the
// first time, then 1, 2… on their own retries of it (after a connection
// error, a timeout, a 408, 409, 429 or 5xx), with the same body.
const RetryCountHeader = "X-Stainless-Retry-Count"

// retryKeyPrefix starts the keys agentd makes for a retry to find.
const retryKeyPrefix = "retry-"

// keyOf is the key the request's message is stored and looked for under,
// when the request sends a message to a chat it continues: the request's
// Idempotency-Key; else, continuing a response (previous_response_id) for
// a client that counts its retries (RetryCountHeader), agentd's own key,
// made of that response's id and the request's input, which the SDK's
// retry of the request sends again. agentd's key is only stored on a first
// sending, as the same words may follow the same response again for
// another answer, and looked for on a retry. None otherwise: a request
// that starts a chain makes its chat anew each time, function_call_output
// items are answered as stored when sent again after their turn failed,
// and a conversation's position is not in its request.
func (p *plan) keyOf(r *http.Request) hub.Key {
	if p.created || p.message == nil {
		return hub.Key{}
	}
	if key := r.Header.Get(IdempotencyKeyHeader); key != "" {
		return hub.Key{Value: key}
	}
	tries, counted := retries(r)
	if !counted || p.req.PreviousResponseID == "" {
		return hub.Key{}
	}
	return retryKey(sha256.Sum256(append([]byte(p.req.PreviousResponseID+"\x00"), p.req.Input...)), tries)
}

// retries is the request's RetryCountHeader: how many times its client
// sent it before, and whether its client counts them.
func retries(r *http.Request) (tries int, counted bool) {
	tries, err := strconv.Atoi(r.Header.Get(RetryCountHeader))
	return tries, err == nil && tries >= 0
}

// retryKey is agentd's key for a request identified by sum, sent for the
// tries+1st time: stored and not looked for on the first sending, looked
// for on a retry.
func retryKey(sum [sha256.Size]byte, tries int) hub.Key {
	return hub.Key{Value: retryKeyPrefix + hex.EncodeToString(sum[:16]), Unsought: tries == 0}
}

// keyedResponseID is the id of the response to a message sent under key in
// chatID: the same for every request that sends it, so a request sent
// again answers, and stores, the response the first one made.
func keyedResponseID(chatID, key string) string {
	sum := sha256.Sum256([]byte(chatID + "\x00" + key))
	return responsePrefix + chatID + hex.EncodeToString(sum[:12])
}

// readBack is the result of a turn that ended, read back from the
// messages it stored: its last answer says whether it stopped at the
// client's cap or was refused.
func readBack(msgs []api.Message) api.TurnResult {
	res := api.TurnResult{Status: "completed", Messages: msgs, Replayed: true}
	if n := len(msgs); n > 0 {
		res.MaxOutputReached, res.Refused = msgs[n-1].MaxOutputReached, msgs[n-1].Refused
	}
	return res
}

// respondAgain answers a message sent again under key whose chat has it
// already (err, from the hub): the response stored under the key's id, as
// it was answered; else, once the message's turn has ended (done), that
// turn read back from the transcript, and stored as the response when the
// request stores; else (the turn has not begun, or not ended, and its
// response is not stored yet) 409, to send again later.
func (h *Handler) respondAgain(w http.ResponseWriter, r *http.Request, tenant string, p *plan, key string, done *hub.AnsweredError, err error) {
	ctx := r.Context()
	id := keyedResponseID(p.chatID, key)
	rec, rerr := h.record(ctx, tenant, id, "", "Response")
	var gone *missing
	switch {
	case rerr == nil:
		h.answerWhole(w, r, p, rec.Response)
		return
	case !errors.As(rerr, &gone):
		WriteHubError(w, r, rerr)
		return
	case done == nil:
		WriteHubError(w, r, err)
		return
	}
	msgs, err := h.hub.AnsweredTurn(ctx, tenant, p.chatID, done.UserSeq)
	if err != nil {
		WriteHubError(w, r, err)
		return
	}
	b := p.builder()
	b.resp.ID = id
	b.replay(msgs, readBack(msgs))
	nameInput(p.input, msgs)
	if err := h.storeOnce(ctx, tenant, p, "", b.resp); err != nil {
		WriteHubError(w, r, err)
		return
	}
	h.answerWhole(w, r, p, *b.resp)
}

// respondJoined answers a message sent again under its key while its
// turn runs, which the request joined (turnID): once the turn ends, the
// response is the turn as it stored it, as the first request's, whose
// events this one missed before it joined. A streaming request hears
// response.created at once, the rest at the end.
func (h *Handler) respondJoined(w http.ResponseWriter, r *http.Request, tenant string, p *plan, id string, sub *eventbus.Sub, turnID string) {
	var out *stream
	if p.req.Stream {
		var err error
		if out, err = startStream(w, h.cfg.HTTP.WriteTimeout.Duration); err != nil {
			WriteError(w, http.StatusInternalServerError, "internal", "", err.Error())
			return
		}
		defer out.end()
		b := &builder{resp: p.response(), out: out}
		b.resp.ID = id
		b.emit("response.created", map[string]any{"response": b.resp})
		b.emit("response.in_progress", map[string]any{"response": b.resp})
	}
	followCtx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()),
		h.cfg.Limits.TurnTimeout.Duration*time.Duration(h.cfg.Limits.TurnsPerChat+1))
	defer cancel()
	res, ok := (&builder{resp: p.response()}).follow(followCtx, sub, turnID, out, h.cfg.HTTP.Keepalive.Duration)
	if !ok {
		why := "the response did not end while agentd followed it; it goes on in its chat"
		if out != nil {
			(&builder{out: out}).emit("error", map[string]any{"code": "timeout", "message": why, "param": nil})
			return
		}
		WriteError(w, http.StatusGatewayTimeout, "timeout", "", why)
		return
	}
	b := p.builder()
	b.resp.ID = id
	b.replay(res.Messages, res)
	nameInput(p.input, res.Messages)
	err := h.storeOnce(r.Context(), tenant, p, turnID, b.resp)
	switch {
	case err != nil && out != nil:
		(&builder{out: out}).emit("error", map[string]any{"code": "internal", "message": "could not store the response: " + err.Error(), "param": nil})
	case err != nil:
		WriteHubError(w, r, err)
	case out != nil:
		replayItems(out, *b.resp)
	default:
		writeJSON(w, http.StatusOK, b.resp)
	}
}

// storeOnce stores resp, the response of turn turnID ("" when not known),
// when its request stores, unless a response is stored under its id
// already (the first request's, which follows the same turn to its end
// too).
func (h *Handler) storeOnce(ctx context.Context, tenant string, p *plan, turnID string, resp *response) error {
	if !resp.Store {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	_, err := h.record(ctx, tenant, resp.ID, "", "Response")
	var gone *missing
	if errors.As(err, &gone) {
		rec := responseRecord{ChatID: p.chatID, TurnID: turnID, Response: *resp, Input: p.input}
		err = h.hub.PutChatRecord(ctx, tenant, p.chatID, kindResponse, resp.ID, rec)
	}
	return err
}

// answerWhole answers a response that has ended: as JSON, or as the
// events of a stream that tells it whole.
func (h *Handler) answerWhole(w http.ResponseWriter, r *http.Request, p *plan, resp response) {
	if !p.req.Stream {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	out, err := startStream(w, h.cfg.HTTP.WriteTimeout.Duration)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "internal", "", err.Error())
		return
	}
	defer out.end()
	start := resp
	start.Status, start.Output, start.Usage, start.Error, start.IncompleteDetails = statusInProgress, []item{}, nil, nil, nil
	out.send("response.created", map[string]any{"response": start})
	out.send("response.in_progress", map[string]any{"response": start})
	replayItems(out, resp)
}

// replayItems tells an ended response's output items on a stream, each
// whole (no deltas: the done events carry the text), then its end.
func replayItems(out *stream, resp response) {
	for i, it := range resp.Output {
		added := it
		added.Status = statusInProgress
		switch it.Type {
		case itemMessage:
			added.Content = &[]part{}
			out.send("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for j, pt := range derefParts(it.Content) {
				out.send("response.content_part.added", map[string]any{"item_id": it.ID, "output_index": i, "content_index": j, "part": outputText("")})
				out.send("response.output_text.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": j, "text": pt.Text, "logprobs": []any{}})
				out.send("response.content_part.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": j, "part": pt})
			}
		case itemReasoning:
			added.Summary = &[]summaryPart{}
			out.send("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for j, sp := range *it.Summary {
				out.send("response.reasoning_summary_part.added", map[string]any{"item_id": it.ID, "output_index": i, "summary_index": j, "part": summaryPart{Type: sp.Type}})
				out.send("response.reasoning_summary_text.done", map[string]any{"item_id": it.ID, "output_index": i, "summary_index": j, "text": sp.Text})
				out.send("response.reasoning_summary_part.done", map[string]any{"item_id": it.ID, "output_index": i, "summary_index": j, "part": sp})
			}
		case itemFunctionCall:
			added.Arguments = new(string)
			out.send("response.output_item.added", map[string]any{"output_index": i, "item": added})
			out.send("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": i, "name": it.Name, "arguments": derefOr(it.Arguments)})
		}
		out.send("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	out.send("response."+resp.Status, map[string]any{"response": resp})
}

func derefParts(ps *[]part) []part {
	if ps == nil {
		return nil
	}
	return *ps
}

// replay builds the response's output from the messages a turn stored, as
// follow builds it from the turn's events: one message item per answer
// with words, then the turn's end (finish), costing what res says.
func (b *builder) replay(msgs []api.Message, res api.TurnResult) {
	for _, m := range msgs {
		if m.Role == api.RoleAssistant {
			b.endAnswer(m)
		}
	}
	b.spent = res.Usage
	b.finish(res)
}
