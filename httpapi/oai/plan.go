package oai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
)

// plan is what one POST /v1/responses does: which chat it continues and
// what it hands the chat (a message, or the results of its calls).
type plan struct {
	req     createRequest
	chatID  string
	created bool // chatID was made for this request
	model   string
	message *api.SendMessageRequest
	results []api.ToolResult
	input   []item // as stored for input_items
}

// gathered is what a request's input items say, sorted by kind.
type gathered struct {
	text    []string
	images  []part
	system  []string
	results []api.ToolResult
	input   []item
	echoes  []echo
	// user is the parts of the input's one user message item: the
	// input's user messages become one stored message, and so one item.
	user *[]part
}

// echo is an assistant message of a continued chain's input, skipped once
// it is found among the previous response's output (echoed).
type echo struct {
	param, id, text string
}

// assistantRefused is why an assistant message agentd did not write is
// refused.
const assistantRefused = "assistant messages in input are not supported by agentd: it keeps the chat's history itself; continue with previous_response_id or conversation and send only what is new"

// gather sorts the input's items. A continued chain may echo the
// function_calls and reasoning items of its last output, as OpenAI asks a
// client that keeps its own context to, and its assistant messages, as the
// SDKs' clients that append response.output do; agentd has them already.
// Other assistant messages are refused: agentd keeps the chat's history
// itself.
func gather(its []inputItem, continued bool) (gathered, error) {
	var g gathered
	for i, it := range its {
		param := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case itemMessage:
			ps, err := parts(it.Content, param+".content")
			if err != nil {
				return g, err
			}
			switch it.Role {
			case "user":
				for _, p := range ps {
					if p.Type == "input_image" {
						g.images = append(g.images, p)
					} else {
						g.text = append(g.text, p.Text)
					}
				}
				if g.user == nil {
					g.user = &[]part{}
					g.input = append(g.input, item{Type: itemMessage, ID: newID("msg_"), Status: statusCompleted, Role: "user", Content: g.user})
				}
				*g.user = append(*g.user, ps...)
			case "system", "developer":
				if err := textOnly(ps, param+".content", "a "+it.Role+" message is the chat's instructions, which are text"); err != nil {
					return g, err
				}
				for _, p := range ps {
					g.system = append(g.system, p.Text)
				}
				g.input = append(g.input, item{Type: itemMessage, ID: newID("msg_"), Status: statusCompleted, Role: it.Role, Content: &ps})
			case "assistant":
				if !continued {
					return g, refuse(param+".role", assistantRefused)
				}
				if err := textOnly(ps, param+".content", "an output message of the previous response is text"); err != nil {
					return g, err
				}
				g.echoes = append(g.echoes, echo{param: param + ".role", id: it.ID, text: joinedText(ps)})
			default:
				return g, refuse(param+".role", "role %q: use user, system or developer", it.Role)
			}
		case itemCallOutput:
			if it.CallID == "" {
				return g, refuse(param+".call_id", "a function_call_output needs the call_id of its call")
			}
			out, err := callOutput(it.Output, param+".output")
			if err != nil {
				return g, err
			}
			g.results = append(g.results, api.ToolResult{CallID: it.CallID, Output: out})
			g.input = append(g.input, item{Type: itemCallOutput, ID: newID("fco_"), Status: statusCompleted, CallID: it.CallID, Output: &out})
		case itemFunctionCall, itemReasoning:
			if !continued {
				return g, refuse(param+".type", "a %s item in input needs previous_response_id or conversation: agentd keeps the chat's history itself", it.Type)
			}
		default:
			return g, refuse(param+".type", "input item type %q is not supported by agentd: use message or function_call_output", it.Type)
		}
	}
	switch {
	case len(g.results) > 0 && (len(g.text) > 0 || len(g.images) > 0):
		return g, refuse("input", "send function_call_output items without new messages: agentd resumes the paused response with them, then takes the next message in its own request")
	case len(g.results) == 0 && len(g.text) == 0 && len(g.images) == 0:
		return g, refuse("input", "input holds no user message and no function_call_output")
	}
	return g, nil
}

// nameInput gives the input's items the ids of the messages the turn
// stored them as, among msgs: the user's message, and each
// function_call_output's tool message. A system or developer message,
// which is the chat's instructions and no message of it, keeps its own.
func nameInput(its []item, msgs []api.Message) {
	for i, it := range its {
		var seq int64
		switch {
		case it.Type == itemMessage && it.Role == "user":
			if j := slices.IndexFunc(msgs, func(m api.Message) bool { return m.Role == api.RoleUser }); j >= 0 {
				seq = msgs[j].Seq
			}
		case it.Type == itemCallOutput:
			// The last: a provider that numbers its calls reuses their ids.
			for _, m := range slices.Backward(msgs) {
				if m.Role == api.RoleTool && m.ToolCallID == it.CallID {
					seq = m.Seq
					break
				}
			}
		}
		if seq == 0 {
			continue
		}
		if it.Type == itemCallOutput {
			its[i].ID = resultItemID(seq)
		} else {
			its[i].ID = messageItemID(seq)
		}
	}
}

// plan checks req and resolves its chat inside tenant, creating one for a
// new chain; nothing is stored before every check has passed.
func (h *Handler) plan(ctx context.Context, tenant string, req createRequest) (*plan, error) {
	if req.Background {
		return nil, refuse("background", "background responses are not supported by agentd: stream instead, or wait for the answer")
	}
	if f := req.Text; f != nil && f.Format != nil && f.Format.Type != "" && f.Format.Type != "text" {
		return nil, unconstrained("text.format.type", f.Format.Type)
	}
	if given(req.Prompt) {
		return nil, refuse("prompt", "prompt templates are kept on OpenAI's platform and agentd has none: send instructions and input instead")
	}
	tools, err := functionTools(req.Tools)
	if err != nil {
		return nil, err
	}
	noTools, err := toolChoice(req.ToolChoice)
	if err != nil {
		return nil, err
	}
	conv, err := conversationOf(req.Conversation)
	if err != nil {
		return nil, err
	}
	if conv != "" && req.PreviousResponseID != "" {
		return nil, refuse("conversation", "send previous_response_id or conversation, not both")
	}
	its, err := items(req.Input)
	if err != nil {
		return nil, err
	}
	g, err := gather(its, conv != "" || req.PreviousResponseID != "")
	if err != nil {
		return nil, err
	}
	p := &plan{req: req, input: g.input}
	most := h.cfg.Limits.MaxMessageBytes
	if len(g.results) > 0 {
		for _, res := range g.results {
			if len(res.Output) > most {
				return nil, tooLarge("input", "the output of function_call_output %s is %d bytes; the limit is %d (limits.max_message_bytes)", clip(res.CallID, 80), len(res.Output), most)
			}
		}
		p.results = g.results
	} else {
		p.message = &api.SendMessageRequest{Content: strings.Join(g.text, "\n\n")}
		if len(p.message.Content) > most {
			return nil, tooLarge("input", "the input's text is %d bytes; the limit is %d (limits.max_message_bytes)", len(p.message.Content), most)
		}
	}
	setup := chatSetup(req, tools, noTools, g.system)
	switch {
	case req.PreviousResponseID != "":
		prev, err := h.record(ctx, tenant, req.PreviousResponseID, "previous_response_id", "Previous response")
		if err != nil {
			return nil, err
		}
		p.chatID = prev.ChatID
		if err := awaited(prev, g.results); err != nil {
			return nil, err
		}
		if err := echoed(prev, g.echoes); err != nil {
			return nil, err
		}
	case conv != "":
		chatID, ok := chatOfConversation(conv)
		if _, err := h.hub.Chat(ctx, tenant, chatID); !ok || errors.Is(err, hub.ErrNotFound) {
			return nil, notFound("conversation", fmt.Sprintf("Conversation with id '%s' not found.", clip(conv, 100)))
		} else if err != nil {
			return nil, err
		}
		// A conversation names no previous response to find an echo in.
		if len(g.echoes) > 0 {
			return nil, refuse(g.echoes[0].param, assistantRefused)
		}
		p.chatID = chatID
	case len(g.results) > 0:
		return nil, refuse("input", "function_call_output items need the previous_response_id of the response that asked for them")
	}
	if p.chatID == "" {
		c, err := h.hub.CreateNewChat(ctx, tenant, api.CreateChatRequest{Model: req.Model, Instructions: derefOr(setup.Instructions),
			Settings: setup.Settings, Tools: derefTools(setup.Tools)}, nil)
		if err != nil {
			return nil, effortRefused(err)
		}
		p.chatID, p.model, p.created = c.ID, c.Model, true
	} else if p.model, err = h.setUp(ctx, tenant, p.chatID, setup, len(g.results) > 0); err != nil {
		return nil, effortRefused(err)
	}
	if err := h.attachImages(ctx, tenant, p, g.images); err != nil {
		if p.created {
			err = h.dropNew(ctx, tenant, p.chatID, err)
		}
		return nil, err
	}
	return p, nil
}

// chatSetup is the chat's setup a request asks for: OpenAI carries no
// instructions, tools or settings over from a previous response, so each
// request says them whole.
func chatSetup(req createRequest, tools []functionTool, noTools bool, system []string) api.PatchChatRequest {
	instr := strings.Join(slices.DeleteFunc(append([]string{derefOr(req.Instructions)}, system...), func(s string) bool { return s == "" }), "\n\n")
	ts := []api.Tool{}
	if !noTools {
		for _, t := range tools {
			ts = append(ts, api.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	var settings *api.Settings
	threshold := compactThreshold(req)
	one := oneToolCall(req.ParallelToolCalls)
	effort := req.effort()
	if req.Temperature != nil || req.TopP != nil || req.MaxOutputTokens != nil || threshold != nil || one != nil || effort != "" {
		settings = &api.Settings{Temperature: req.Temperature, TopP: req.TopP, MaxOutputTokens: req.MaxOutputTokens, CompactThreshold: threshold, ParallelToolCalls: one,
			ReasoningEffort: effort}
	}
	setup := api.PatchChatRequest{Instructions: &instr, Settings: settings, Tools: &ts}
	if req.Model != "" {
		setup.Model = &req.Model
	}
	return setup
}

// effortRefused names a reasoning effort the chat's provider refused by
// this surface's field, reasoning.effort, where Chat Completions names
// the chat's own reasoning_effort.
func effortRefused(err error) error {
	var bad *hub.SettingError
	if errors.As(err, &bad) && bad.Field == "reasoning_effort" {
		return refuse("reasoning.effort", "%s", bad.Reason)
	}
	return err
}

// oneToolCall is the chat setting of a request's parallel_tool_calls:
// false alone is kept, true being every provider's default, so a chat
// asked for true and one asked nothing have the same settings.
func oneToolCall(parallel *bool) *bool {
	if parallel == nil || *parallel {
		return nil
	}
	return new(false)
}

// compactThreshold is the request's context_management compaction
// threshold: the chat then folds once a request would pass it (below what
// its window allows), as OpenAI compacts past it.
func compactThreshold(req createRequest) *int {
	for _, cm := range req.ContextManagement {
		if cm.Type == "compaction" && cm.CompactThreshold != nil {
			return cm.CompactThreshold
		}
	}
	return nil
}

// setUp changes what of the chat's setup the request changes and returns
// the chat's model. A request that resumes a paused turn changes only its
// model: the turn keeps the setup it started with (its reasoning effort
// among it), and its remaining model calls go to the model the request
// names, as each response of OpenAI's names its own (resumeOn).
func (h *Handler) setUp(ctx context.Context, tenant, chatID string, want api.PatchChatRequest, paused bool) (string, error) {
	c, err := h.hub.Chat(ctx, tenant, chatID)
	if err != nil {
		return "", err
	}
	if paused {
		return h.resumeOn(ctx, tenant, c, want)
	}
	var patch api.PatchChatRequest
	changed := false
	if want.Model != nil && *want.Model != c.Model {
		patch.Model, changed = want.Model, true
	}
	if *want.Instructions != c.Instructions {
		patch.Instructions, changed = want.Instructions, true
	}
	if !sameSettings(want.Settings, c.Settings) {
		s := want.Settings
		if s == nil {
			s = &api.Settings{}
		}
		patch.Settings, changed = s, true
	}
	if !sameTools(*want.Tools, c.Tools) {
		patch.Tools, changed = want.Tools, true
	}
	if !changed {
		return c.Model, nil
	}
	if err := h.hub.Patch(ctx, tenant, chatID, patch); err != nil {
		return "", err
	}
	if patch.Model != nil {
		return *patch.Model, nil
	}
	return c.Model, nil
}

// resumeOn switches chat c, whose turn is paused, to the model want names
// (none: it stays on its own) and returns the model. The request's
// settings are checked against that model, so one refused elsewhere is
// refused here too, and so are the settings the turn goes on with: a
// model whose protocol does not take them is refused, naming both models.
// The session fits each of the turn's requests to its chat's model when
// it makes it, folding first if the new window needs it, as a model
// switched between turns.
func (h *Handler) resumeOn(ctx context.Context, tenant string, c api.Chat, want api.PatchChatRequest) (string, error) {
	model := c.Model
	if want.Model != nil && *want.Model != "" {
		model = *want.Model
	}
	if want.Settings != nil {
		if err := h.hub.CheckModelSettings(model, *want.Settings); err != nil {
			return "", err
		}
	}
	if model == c.Model {
		return model, nil
	}
	var kept api.Settings
	if c.Settings != nil {
		kept = *c.Settings
	}
	if err := h.hub.CheckModelSettings(model, kept); err != nil {
		var bad *hub.SettingError
		if !errors.As(err, &bad) {
			return "", err
		}
		return "", refuse("model", "model %s cannot go on with the paused turn started on %s: the turn keeps its settings, and %s", model, c.Model, bad.Reason)
	}
	if err := h.hub.Patch(ctx, tenant, c.ID, api.PatchChatRequest{Model: &model}); err != nil {
		return "", fmt.Errorf("switch the paused turn of chat %s to %s: %w", c.ID, model, err)
	}
	return model, nil
}

func sameSettings(a, b *api.Settings) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if a == nil {
		ja, _ = json.Marshal(&api.Settings{})
	}
	if b == nil {
		jb, _ = json.Marshal(&api.Settings{})
	}
	return bytes.Equal(ja, jb)
}

func sameTools(a, b []api.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description || !sameJSON(a[i].Parameters, b[i].Parameters) {
			return false
		}
	}
	return true
}

func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// awaited checks that results answer every call the previous response
// asked for, as OpenAI does: a turn resumes only when all are in, and a
// new message without them is refused rather than left waiting behind
// the paused turn.
func awaited(prev responseRecord, results []api.ToolResult) error {
	got := map[string]bool{}
	for _, r := range results {
		got[r.CallID] = true
	}
	for _, it := range prev.Response.Output {
		if it.Type == itemFunctionCall && !got[it.CallID] {
			return refuse("input", "No tool output found for function call %s.", it.CallID)
		}
	}
	return nil
}

// echoed checks that each assistant message of the input is one of the
// previous response's output messages sent back: the same id and text, or
// without an id the same text. agentd holds those already, so they are
// skipped; any other would be history agentd did not write, and is
// refused.
func echoed(prev responseRecord, echoes []echo) error {
	for _, e := range echoes {
		found := false
		for _, it := range prev.Response.Output {
			if it.Type != itemMessage || it.Content == nil || (e.id != "" && e.id != it.ID) {
				continue
			}
			if joinedText(*it.Content) == e.text {
				found = true
				break
			}
		}
		if !found {
			return refuse(e.param, "%s (an echo of the previous response's own output message is skipped; this one is not among its output)", assistantRefused)
		}
	}
	return nil
}

// attachImages stores the input's images as the tenant's attachments and
// names them in the message.
func (h *Handler) attachImages(ctx context.Context, tenant string, p *plan, images []part) error {
	for i, img := range images {
		mediaType, data, err := dataImage(img.ImageURL)
		if err != nil {
			return refuse("input", "image %d: %v", i+1, err)
		}
		att, err := h.hub.Attach(ctx, tenant, bytes.NewReader(data), fmt.Sprintf("image-%d", i+1), mediaType)
		if err != nil {
			return err
		}
		p.message.AttachmentIDs = append(p.message.AttachmentIDs, att.ID)
	}
	return nil
}

// record reads a stored response of the tenant; an id that names no
// response of the tenant is a 404 naming what, with param.
func (h *Handler) record(ctx context.Context, tenant, id, param, what string) (responseRecord, error) {
	var rec responseRecord
	chatID, ok := chatOfResponse(id)
	if ok {
		err := h.hub.ChatRecord(ctx, tenant, chatID, kindResponse, id, &rec)
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, hub.ErrNotFound) {
			return rec, err
		}
	}
	return rec, notFound(param, fmt.Sprintf("%s with id '%s' not found.", what, clip(id, 100)))
}

// missing is a 404 naming the field at fault.
type missing struct{ param, msg string }

func (e *missing) Error() string { return e.msg }

func notFound(param, msg string) error { return &missing{param: param, msg: msg} }

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefTools(ts *[]api.Tool) []api.Tool {
	if ts == nil || len(*ts) == 0 {
		return nil
	}
	return *ts
}

// unix is now in Unix seconds, as OpenAI's created_at.
func unix() int64 { return time.Now().Unix() }

// writePlanError answers a failed plan: a refusal as 400 and a missing id
// as 404, each naming the field at fault; the hub's errors as they map.
func writePlanError(w http.ResponseWriter, r *http.Request, err error) {
	var m *missing
	var bad *badRequest
	switch {
	case errors.As(err, &m):
		WriteError(w, http.StatusNotFound, "", m.param, m.msg)
	case errors.As(err, &bad) && bad.tooLarge:
		WriteError(w, http.StatusRequestEntityTooLarge, "too_large", bad.param, bad.msg)
	case errors.As(err, &bad):
		WriteError(w, http.StatusBadRequest, "invalid_value", bad.param, bad.msg)
	default:
		WriteHubError(w, r, err)
	}
}
