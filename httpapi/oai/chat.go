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
	"github.com/agentd/agentd/eventbus"
)

// ChatHeader names the agentd chat of a Chat Completions request and its
// answer: a client that sets it continues that chat whatever history it
// sends; every answer carries it.
const ChatHeader = "X-Agentd-Chat"

// chatRequest is what agentd reads of POST /v1/chat/completions
// (https://platform.openai.com/docs/api-reference/chat/create). Fields it
// does not name are ignored, as sampling knobs the model's protocol may
// lack; the ones that would change the answer's shape are refused (check).
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	Tools               []chatTool      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	ReasoningEffort     string          `json:"reasoning_effort"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	N                   *int            `json:"n"`
	ResponseFormat      *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Modalities []string `json:"modalities"`
	Logprobs   bool     `json:"logprobs"`
	// Functions and FunctionCall are OpenAI's deprecated forms of tools
	// and tool_choice, refused rather than dropped unseen.
	Functions    []json.RawMessage `json:"functions"`
	FunctionCall json.RawMessage   `json:"function_call"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	// Refusal is what an assistant said in refusing (OpenAI's answers
	// carry it instead of content; the SDKs send it back so).
	Refusal string `json:"refusal,omitempty"`
}

type chatToolCall struct {
	// Index is set in stream chunks only.
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// text reads a message's content: a string, or text parts; an assistant's
// refusal (its refusal field or parts) is what it said. Pictures and other
// parts are refused: Chat Completions carries them inline, and agentd takes
// files as attachments (docs/openai.md).
func (m chatMessage) text(i int) (string, error) {
	raw := bytes.TrimSpace(m.Content)
	if len(raw) == 0 || string(raw) == "null" {
		if m.Role == "assistant" {
			return m.Refusal, nil
		}
		return "", nil
	}
	var s string
	if raw[0] == '"' {
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", refuse(fmt.Sprintf("messages[%d].content", i), "messages[%d].content is neither a string nor an array of parts", i)
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type == "refusal" && m.Role == "assistant" {
			b.WriteString(p.Refusal)
			continue
		}
		if p.Type != "text" {
			return "", refuse(fmt.Sprintf("messages[%d].content[%d].type", i, j), "messages[%d].content[%d] is a %q part; agentd reads text parts here (send files as attachments through agentd's own API)", i, j, p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// parsed is a request read into agentd's terms.
type parsed struct {
	instructions string
	history      []HistoryMessage
	tools        []api.Tool
	settings     *api.Settings
}

// parse checks a request and splits its messages: system and developer
// messages are the chat's instructions; the rest is the history.
func (req *chatRequest) parse() (parsed, error) {
	var p parsed
	switch {
	case req.Model == "":
		return p, refuse("model", "model is required: \"provider/model\" as GET /v1/models lists")
	case len(req.Messages) == 0:
		return p, refuse("messages", "messages is empty")
	case req.N != nil && *req.N != 1:
		return p, refuse("n", "n is %d; agentd answers one choice", *req.N)
	case req.ResponseFormat != nil && req.ResponseFormat.Type != "text":
		return p, unconstrained("response_format", req.ResponseFormat.Type)
	case slices.ContainsFunc(req.Modalities, func(m string) bool { return m != "text" }):
		return p, refuse("modalities", "agentd answers in text only")
	case req.Logprobs:
		return p, refuse("logprobs", "logprobs are not available through agentd")
	case len(req.Functions) > 0:
		return p, refuse("functions", "functions (deprecated by OpenAI) is not read by agentd: send them as tools of type function")
	case given(req.FunctionCall):
		return p, refuse("function_call", "function_call (deprecated by OpenAI) is not read by agentd: use tool_choice")
	}
	noTools, err := toolChoice(req.ToolChoice)
	if err != nil {
		return p, err
	}
	var system []string
	for i, m := range req.Messages {
		text, err := m.text(i)
		if err != nil {
			return p, err
		}
		switch m.Role {
		case "system", "developer":
			system = append(system, text)
			continue
		case "user", "assistant", "tool":
		default:
			return p, refuse(fmt.Sprintf("messages[%d].role", i), "messages[%d].role %q: use system, developer, user, assistant or tool", i, m.Role)
		}
		if m.Role == "tool" && m.ToolCallID == "" {
			return p, refuse(fmt.Sprintf("messages[%d].tool_call_id", i), "messages[%d] is a tool result without tool_call_id", i)
		}
		h := HistoryMessage{Role: m.Role, Content: text, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			h.ToolCalls = append(h.ToolCalls, HistoryCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		p.history = append(p.history, h)
	}
	if len(p.history) == 0 {
		return p, refuse("messages", "messages holds only system messages; send a user message")
	}
	if err := unanswered(req.Messages); err != nil {
		return p, err
	}
	p.instructions = strings.Join(system, "\n\n")
	p.tools = []api.Tool{}
	for i, t := range req.Tools {
		if t.Type != "function" {
			return p, refuse(fmt.Sprintf("tools[%d].type", i), "tools[%d] is of type %q; agentd takes function tools", i, t.Type)
		}
		if !noTools {
			p.tools = append(p.tools, api.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
		}
	}
	s, err := req.settings()
	p.settings = s
	return p, err
}

// unanswered refuses, in OpenAI's words, an assistant message whose tool
// calls the tool messages right after it do not all answer: agentd's turn
// would wait for those results (toolsets.results_wait) instead.
func unanswered(msgs []chatMessage) error {
	for i, m := range msgs {
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			continue
		}
		j, got := i+1, map[string]bool{}
		for ; j < len(msgs) && slices.Contains([]string{"tool", "system", "developer"}, msgs[j].Role); j++ {
			got[msgs[j].ToolCallID] = true
		}
		var missing []string
		for _, c := range m.ToolCalls {
			if !got[c.ID] {
				missing = append(missing, c.ID)
			}
		}
		if len(missing) > 0 {
			return refuse(fmt.Sprintf("messages.[%d].role", min(j, len(msgs)-1)), "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(missing, ", "))
		}
	}
	return nil
}

// settings are the request's sampling settings as agentd's chat settings.
func (req *chatRequest) settings() (*api.Settings, error) {
	s := api.Settings{Temperature: req.Temperature, TopP: req.TopP, MaxOutputTokens: req.MaxCompletionTokens, ReasoningEffort: req.ReasoningEffort,
		ParallelToolCalls: oneToolCall(req.ParallelToolCalls)}
	if s.MaxOutputTokens == nil {
		s.MaxOutputTokens = req.MaxTokens
	}
	if stop := bytes.TrimSpace(req.Stop); len(stop) > 0 && string(stop) != "null" {
		var one string
		if json.Unmarshal(stop, &one) == nil {
			s.Stop = []string{one}
		} else if json.Unmarshal(stop, &s.Stop) != nil {
			return nil, refuse("stop", "stop is neither a string nor an array of strings")
		}
	}
	if s.Temperature == nil && s.TopP == nil && s.MaxOutputTokens == nil && s.ReasoningEffort == "" && len(s.Stop) == 0 && s.ParallelToolCalls == nil {
		return nil, nil
	}
	// Checked here, before a chat is found or made, to name this request's
	// own field (max_tokens or max_completion_tokens); the model's protocol
	// checks the rest when the chat takes them.
	var bad *hub.SettingError
	if err := hub.CheckSettings(s); errors.As(err, &bad) {
		param := bad.Field
		if param == "max_output_tokens" {
			param = "max_completion_tokens"
			if req.MaxCompletionTokens == nil {
				param = "max_tokens"
			}
		}
		return nil, refuse(param, "%s", bad.Reason)
	}
	return &s, nil
}

// chatCompletions serves POST /v1/chat/completions: it finds the agentd
// chat the history continues (ChatHeader, else the history's prefix),
// stores only what is new, and answers the chat's turn as a chat
// completion, streamed or whole.
func (h *Handler) chatCompletions(w http.ResponseWriter, r *http.Request, tenant string) {
	// Counted before anything is made or stored: a history too long to
	// store is refused whole, not left as a new chat holding part of it.
	var req chatRequest
	if !decode(w, r, &req, boundLists(h.cfg.Limits.MaxHistoryMessages, "messages", "tool_calls", "content", "tools")) {
		return
	}
	p, err := req.parse()
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	for i, m := range p.history {
		if most := h.cfg.Limits.MaxMessageBytes; len(m.Content) > most {
			WriteError(w, http.StatusRequestEntityTooLarge, "too_large", "messages", fmt.Sprintf("a message of the history (%d of %d, not counting system messages) is %d bytes; the limit is %d (limits.max_message_bytes)", i+1, len(p.history), len(m.Content), most))
			return
		}
	}
	ctx := r.Context()
	chain := Chain(p.history)
	asked := chain[len(chain)-1]
	tries, counted := retries(r)
	chatID, known, created, err := h.findChat(ctx, tenant, r.Header.Get(ChatHeader), req.Model, chain, p, counted && tries > 0)
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	w.Header().Set(ChatHeader, chatID)
	fresh := p.history[known:]
	resumes := !created && leadingResults(fresh) > 0
	// A person's message alone after what the chat holds is stored under
	// agentd's key made of the whole history, for the SDK's retry of the
	// request to find: its answer lost, the retry is answered from the
	// chat (docs/openai-chat-completions.md).
	var key hub.Key
	if counted && !resumes && len(fresh) <= 1 && p.history[len(p.history)-1].Role == "user" {
		key = retryKey(asked, tries)
	}
	want := api.PatchChatRequest{Model: &req.Model, Instructions: &p.instructions, Settings: p.settings, Tools: &p.tools}
	if _, err := h.setUp(ctx, tenant, chatID, want, resumes); err != nil {
		writePlanError(w, r, err)
		return
	}
	var sub *eventbus.Sub
	if req.Stream {
		sub = h.hub.Subscribe(chatID, streamBuffer)
	} else {
		sub = h.hub.Subscribe(chatID, streamBuffer, wholeEvents...)
	}
	defer sub.Close()
	turnID := hub.NewID()
	if !resumes {
		// A message may wait behind another turn of its chat: this answer
		// takes only its own turn's events (eventbus.Sub.OfTurn). Results
		// resume the turn that waits for them, whose id is the chat's.
		sub.OfTurn(turnID)
	}
	var late bool
	ownID := turnID
	joined := func(id string) {
		late = true
		sub.OfTurn(id)
	}
	// A stream starts at once when its message waits behind another turn.
	var out *stream
	if req.Stream {
		queued, tell := QueuedBox()
		out, turnID, err = h.whileQueued(w, queued, func() (string, error) {
			return h.send(ctx, tenant, chatID, turnID, p.history, known, resumes, key, joined, tell)
		})
	} else {
		turnID, err = h.send(ctx, tenant, chatID, turnID, p.history, known, resumes, key, joined, nil)
	}
	if created {
		err = h.settleNew(ctx, tenant, chatID, err)
	}
	var done *hub.AnsweredError
	var told *api.TurnResult
	if errors.As(err, &done) {
		var msgs []api.Message
		if msgs, err = h.hub.AnsweredTurn(ctx, tenant, chatID, done.UserSeq); err == nil {
			res := readBack(msgs)
			told, late, turnID = &res, true, ownID
		}
	}
	var paused *hub.PausedError
	if errors.As(err, &paused) {
		err = refuse("messages", "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s (agentd: a turn of chat %s waits for their results; send them as role \"tool\" messages, or it ends without them after toolsets.results_wait, %s)",
			strings.Join(paused.Calls, ", "), chatID, h.cfg.Toolsets.ResultsWait.Duration)
	}
	if err != nil && out != nil {
		out.refuse(func(w http.ResponseWriter) { writePlanError(w, r, err) })
		out.end()
		return
	}
	if err != nil {
		writePlanError(w, r, err)
		return
	}
	if resumes {
		if err := h.forgetPause(ctx, tenant, chatID, p.history[known-1]); err != nil {
			h.log.Warn().Err(err).Str("chat_id", chatID).Msg("forget the answered pause")
		}
	}
	a := answer{id: "chatcmpl-" + turnID, model: req.Model, created: time.Now().Unix(), res: told, late: late, kept: func(a *answer) {
		m := a.message()
		h.histories.Remember(tenant, chatID, Step(asked, m), len(p.history)+1, time.Now())
		if key.Value != "" {
			h.histories.RememberAsked(tenant, chatID, asked, len(p.history), time.Now())
		}
		if a.res.Status == "requires_action" && len(m.ToolCalls) > 0 {
			if err := h.notePause(ctx, tenant, chatID, m); err != nil {
				h.log.Warn().Err(err).Str("chat_id", chatID).Msg("index the paused answer")
			}
			// The index's only writer sweeps it: what a tenant's ended
			// pauses leave stays bounded by its new ones.
			if _, _, err := h.sweepPauses(ctx, tenant); err != nil {
				h.log.Warn().Err(err).Msg("sweep the pause index")
			}
		}
	}, failed: func() {
		// The chat holds the history whole, its last message unanswered:
		// the client's retry of it (the SDKs retry a 5xx) finds the chat,
		// and send answers that message as stored.
		if p.history[len(p.history)-1].Role == "user" {
			h.histories.RememberOpen(tenant, chatID, asked, len(p.history), time.Now())
		}
	}}
	if req.Stream {
		if out == nil {
			if out, err = startStream(w, h.cfg.HTTP.WriteTimeout.Duration); err != nil {
				return
			}
		}
		defer out.end()
		a.stream(r, out, sub, turnID, req.StreamOptions != nil && req.StreamOptions.IncludeUsage, h.cfg.HTTP.Keepalive.Duration)
	} else {
		a.whole(w, r, sub, turnID)
	}
}

// findChat returns the chat a request continues, how many messages of its
// history that chat already holds, and whether the chat is new. ChatHeader
// names it outright (then what follows the history's last answer is new,
// unless the history starts with the chat's tip); else the longest prefix
// that is a chat's tip; else, for tool results, the chat that paused on
// their calls (pausedOn); else a new chat holding everything before the
// history's last answer. Tool results alone that answer no chat's pause
// are refused before a chat is made: no new chat waits for them. A retry
// of the request a chat answered last finds that chat first, holding all
// but the history's last message, which its key then finds.
func (h *Handler) findChat(ctx context.Context, tenant, named, model string, chain []Digest, p parsed, retry bool) (string, int, bool, error) {
	matched, known, ok := h.histories.Match(tenant, chain, time.Now())
	if retry {
		if id, n, found := h.histories.MatchAsked(tenant, chain[len(chain)-1], time.Now()); found {
			matched, known, ok = id, n-1, true
		}
	}
	if named != "" {
		if _, err := h.hub.Chat(ctx, tenant, named); err != nil {
			return "", 0, false, fmt.Errorf("%s %q: %w", ChatHeader, named, err)
		}
		if ok && matched == named {
			return named, known, false, nil
		}
		return named, afterLastAnswer(p.history), false, nil
	}
	if ok {
		if _, err := h.hub.Chat(ctx, tenant, matched); err != nil {
			h.histories.Forget(matched) // deleted since
			ok = false
		}
	}
	earlier := afterLastAnswer(p.history)
	if results := leadingResults(p.history[earlier:]); results > 0 && (!ok || known < earlier) {
		id, err := h.pausedOn(ctx, tenant, p.history[earlier-1])
		if err != nil {
			return "", 0, false, err
		}
		if id != "" {
			return id, earlier, false, nil
		}
		if !ok && results == len(p.history)-earlier {
			return "", 0, false, refuse("messages", "the tool messages answer calls %s, which no turn of your chats waits for: their results came already, the turn ended without them (toolsets.results_wait), or agentd never asked for them; send a user message to go on",
				callIDsOf(p.history[earlier-1].ToolCalls))
		}
	}
	if ok {
		return matched, known, false, nil
	}
	// The chat and its earlier history are one write: a crash leaves both
	// or neither, never a chat no client was told of holding part of it.
	c, err := h.hub.CreateNewChat(ctx, tenant, api.CreateChatRequest{Model: model, Instructions: p.instructions, Tools: derefTools(&p.tools), Settings: p.settings},
		wireHistory(p.history[:earlier]))
	if err != nil {
		return "", 0, false, err
	}
	return c.ID, earlier, true, nil
}

// settleNew ends the chat this request made: kept once its turn is
// accepted (err nil), its marker removed even if the client has gone (the
// turn runs on), else deleted (dropNew).
func (h *Handler) settleNew(ctx context.Context, tenant, chatID string, err error) error {
	if err == nil {
		if err = h.hub.KeepNewChat(context.WithoutCancel(ctx), tenant, chatID); err == nil {
			return nil
		}
	}
	return h.dropNew(ctx, tenant, chatID, err)
}

// dropNew deletes the chat this request made when what it was made for
// failed (err), before its turn started: kept, it would be an orphan
// counted against chats_per_tenant, and a retry would make another.
func (h *Handler) dropNew(ctx context.Context, tenant, chatID string, err error) error {
	if derr := h.hub.DeleteChat(context.WithoutCancel(ctx), tenant, chatID); derr != nil {
		err = errors.Join(err, fmt.Errorf("delete the new chat %s: %w", chatID, derr))
	}
	return err
}

// leadingResults counts the tool messages fresh starts with.
func leadingResults(fresh []HistoryMessage) int {
	n := 0
	for n < len(fresh) && fresh[n].Role == "tool" {
		n++
	}
	return n
}

func callIDsOf(calls []HistoryCall) string {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.ID
	}
	return strings.Join(ids, ", ")
}

// afterLastAnswer is the index after a history's last assistant message:
// what a client adds to an answer it got is new.
func afterLastAnswer(hist []HistoryMessage) int {
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Role == "assistant" {
			return i + 1
		}
	}
	return 0
}

func wireHistory(hist []HistoryMessage) []api.Message {
	out := make([]api.Message, len(hist))
	for i, m := range hist {
		out[i] = api.Message{Role: api.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			out[i].ToolCalls = append(out[i].ToolCalls, api.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
	}
	return out
}

// send stores what of history is new (past the known messages the chat
// holds) and starts its turn. When the chat's paused turn awaits them
// (resumes), the leading tool results answer it, and user messages after
// them join the resumed turn, which answers them. Else the last message
// must be the person's, and what comes before it is stored as it is (a new
// chat's brought tool results among it), then the turn answers it; a turn
// paused on calls the history does not show is *hub.PausedError, not a
// wait behind it. A history the chat holds whole, ending with the person's
// message, is the retry of one whose turn failed (an open tip): its turn
// answers that message as stored. key, when set, is the last message's,
// which is then all that is new (joined and queued as SubmitUnpaused
// takes them).
func (h *Handler) send(ctx context.Context, tenant, chatID, turnID string, history []HistoryMessage, known int, resumes bool, key hub.Key, joined func(turnID string), queued func(paused bool)) (string, error) {
	fresh := history[known:]
	if len(fresh) == 0 {
		if n := len(history); n > 0 && history[n-1].Role == "user" {
			return h.hub.SubmitUnpaused(ctx, tenant, chatID, turnID, key, api.SendMessageRequest{Content: history[n-1].Content}, joined, queued)
		}
		return "", refuse("messages", "the history ends with an answer agentd gave and holds nothing new: end it with a user message or tool results")
	}
	if resumes {
		n := leadingResults(fresh)
		results := make([]api.ToolResult, n)
		for i, m := range fresh[:n] {
			results[i] = api.ToolResult{CallID: m.ToolCallID, Output: m.Content}
		}
		for _, m := range fresh[n:] {
			if m.Role != "user" {
				return "", refuse("messages", "after the tool results come only user messages; the history has a %s message after them", m.Role)
			}
			if strings.TrimSpace(m.Content) == "" {
				return "", refuse("messages", "a user message after the tool results is empty")
			}
		}
		resumed, err := h.submitResults(ctx, tenant, chatID, turnID, results, wireHistory(fresh[n:]), queued)
		if errors.Is(err, hub.ErrNotPaused) || errors.Is(err, hub.ErrNothingToAnswer) {
			return "", refuse("messages", "the tool messages answer calls no turn of chat %s waits for now: their results came already, or the turn ended without them (toolsets.results_wait); send a user message to go on", chatID)
		}
		return resumed, err
	}
	last := fresh[len(fresh)-1]
	if last.Role != "user" {
		return "", refuse("messages", "the history's last message is a %s message after messages agentd has not answered; end it with a user message, or send tool results alone", last.Role)
	}
	if strings.TrimSpace(last.Content) == "" {
		return "", refuse("messages", "the last user message is empty")
	}
	if len(fresh) > 1 {
		if _, err := h.hub.AddMessages(ctx, tenant, chatID, "", wireHistory(fresh[:len(fresh)-1])); err != nil {
			return "", err
		}
	}
	return h.hub.SubmitUnpaused(ctx, tenant, chatID, turnID, key, api.SendMessageRequest{Content: last.Content}, joined, queued)
}

// submitResults hands the client's tool results, and the person's
// messages then after them, to the turn of chatID that waits for them. A
// retry of results alone whose resumed turn failed (the SDKs retry a 5xx)
// finds no turn waiting, but the chat's log ending with them, as stored:
// turn turnID then answers them without storing them again; queued hears
// that it waits behind another turn, as a message's does.
func (h *Handler) submitResults(ctx context.Context, tenant, chatID, turnID string, results []api.ToolResult, then []api.Message, queued func(paused bool)) (string, error) {
	resumed, err := h.hub.SubmitToolResultsThen(ctx, tenant, chatID, api.ToolResultsRequest{Results: results}, then)
	if !errors.Is(err, hub.ErrNotPaused) || len(then) > 0 {
		return resumed, err
	}
	if again, cerr := h.resultsUnanswered(ctx, tenant, chatID, results); cerr != nil || !again {
		return "", errors.Join(err, cerr)
	}
	return h.hub.SubmitContinue(ctx, tenant, chatID, turnID, queued)
}

// resultsUnanswered reports whether chatID's log ends with results: its
// last messages answer the same calls with the same outputs, and no
// answer follows them.
func (h *Handler) resultsUnanswered(ctx context.Context, tenant, chatID string, results []api.ToolResult) (bool, error) {
	c, err := h.hub.Chat(ctx, tenant, chatID)
	if err != nil {
		return false, err
	}
	n := int64(len(results))
	if n == 0 || c.Messages < n {
		return false, nil
	}
	tail, err := h.hub.Transcript(ctx, tenant, chatID, c.Messages-n+1, c.Messages)
	if err != nil || len(tail) != len(results) {
		return false, err
	}
	outputs := make(map[string]string, n)
	for _, r := range results {
		outputs[r.CallID] = r.Output
	}
	for _, m := range tail {
		if out, ok := outputs[m.ToolCallID]; !ok || m.Role != api.RoleTool || m.Content != out {
			return false, nil
		}
		delete(outputs, m.ToolCallID)
	}
	return true, nil
}

// answer is one turn told as a chat completion.
type answer struct {
	id, model string
	created   int64
	// text is what the client was told the assistant said.
	text strings.Builder
	res  *api.TurnResult
	// late: the request is a retry that came to its turn late (joined it
	// running, or found it ended, res then set): what it tells is the
	// turn's stored messages, at its end, not the events it missed.
	late bool
	// spent is what the turn's model calls cost since this request took
	// it up: a turn resumed by tool results reports what its resuming
	// cost, not its calls before the pause again (the client summed those).
	spent api.Usage
	// kept records the answer as the chat's new tip; it runs before the
	// client reads the answer's end, so the client's next request (its
	// tool results, at once) finds the chat.
	kept func(*answer)
	// failed runs, before the client reads of it, when the turn ended
	// without an answer.
	failed func()
}

// answered reports whether the turn gave the client an answer to keep in
// its history: no fault cut it short. Words streamed before a fault are not
// an answer: the client is told it failed, as Responses says "failed", so
// it does not keep a cut answer as whole. A model that said nothing (it
// stopped at once, or at max_tokens before a word) answered nothing, as
// OpenAI's answers "": an error would have the SDK retry a turn that ended,
// and each retry would store the question again.
func (a *answer) answered() bool { return !a.faulted() }

// faulted reports whether the turn ended on a problem that is not a normal
// finish (failedBy).
func (a *answer) faulted() bool { return failedBy(a.res.Problem) }

// failedBy reports whether p ended its turn without its answer. An answer
// cut at limits.max_answer_bytes is cut short, not failed (cutShort); a
// notice of instructions too long is not an end at all.
func failedBy(p *api.Problem) bool {
	return p != nil && p.Kind != api.ProblemAnswerTooLarge && p.Kind != api.ProblemInstructions
}

// cutShort reports whether the turn's answer stopped at the client's own
// max tokens or at limits.max_answer_bytes: finish_reason "length" and a
// response "incomplete", as OpenAI ends an answer at max_tokens.
func cutShort(res api.TurnResult) bool {
	return res.MaxOutputReached || res.Problem != nil && res.Problem.Kind == api.ProblemAnswerTooLarge
}

// message is the assistant message the client keeps, as the history hash
// reads it.
func (a *answer) message() HistoryMessage {
	m := HistoryMessage{Role: "assistant", Content: a.text.String()}
	for _, c := range a.res.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, HistoryCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	return m
}

// settleLate settles a late request's answer from its turn's end: what it
// cost is the turn's whole (zero when read back from the transcript:
// nothing was spent again), not the part after the request joined. It
// returns what the assistant said in the turn's stored messages, and
// their reasoning, each answer's apart, as an early client was told it.
func (a *answer) settleLate() (text, reasoning string) {
	a.spent = a.res.Usage
	var b strings.Builder
	var thoughts []string
	for _, m := range a.res.Messages {
		if m.Role == api.RoleAssistant {
			b.WriteString(m.Content)
			if m.Thinking != "" {
				thoughts = append(thoughts, m.Thinking)
			}
		}
	}
	return b.String(), strings.Join(thoughts, "\n\n")
}

// finish is the answer's finish_reason.
func (a *answer) finish() string {
	switch {
	case a.res.Status == "requires_action":
		return "tool_calls"
	case a.res.Refused:
		return "content_filter"
	case cutShort(*a.res):
		return "length"
	}
	return "stop"
}

func (a *answer) toolCalls(indexed bool) []chatToolCall {
	var out []chatToolCall
	for i, c := range a.res.ToolCalls {
		tc := chatToolCall{ID: c.ID, Type: "function", Function: chatFunction{Name: c.Name, Arguments: c.Arguments}}
		if indexed {
			tc.Index = &i
		}
		out = append(out, tc)
	}
	return out
}

type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (a *answer) usage() chatUsage {
	u := chatUsage{PromptTokens: a.spent.InputTokens, CompletionTokens: a.spent.OutputTokens,
		TotalTokens: a.spent.InputTokens + a.spent.OutputTokens}
	u.PromptTokensDetails.CachedTokens = a.spent.CachedTokens
	u.CompletionTokensDetails.ReasoningTokens = a.spent.ReasoningTokens
	return u
}

// failure is the error a turn that ended faulted answers: its status,
// code, param (messages for a history too long, as OpenAI names it) and
// message.
func (a *answer) failure() (status int, code, param, msg string) {
	p := a.res.Problem
	msg = p.Message
	if p.NextStep != nil {
		if b, err := json.Marshal(p.NextStep); err == nil {
			msg += " (agentd's next step: " + string(b) + ")"
		}
	}
	switch p.Kind {
	case api.ProblemTooLong:
		return http.StatusBadRequest, "context_length_exceeded", "messages", msg
	case api.ProblemTimeout, api.ProblemToolResults:
		return http.StatusGatewayTimeout, "timeout", "", msg
	case api.ProblemShutdown:
		return http.StatusServiceUnavailable, "unavailable", "", msg
	case api.ProblemMoved:
		// Another node holds the chat now: the client's retry reaches it.
		return http.StatusServiceUnavailable, "moved", "", msg
	case api.ProblemDeleted:
		// The chat was deleted mid-turn: a retry starts a new one from the
		// client's history.
		return http.StatusConflict, "deleted", "", msg
	case api.ProblemInternal:
		return http.StatusInternalServerError, "server_error", "", msg
	}
	// The provider failed, or could not be reached.
	return http.StatusBadGateway, strings.ReplaceAll(p.Kind, "-", "_"), "", msg
}

// wholeEvents are the events whole reads: the turn's messages, what its
// calls cost, and its end.
var wholeEvents = []string{api.EventMessage, api.EventUsage, api.EventTurnCompleted, api.EventTurnRequiresAction}

// whole waits for the turn to complete or pause and answers it in one
// chat.completion object. Its text (and reasoning_content, the model's
// reasoning, when it reasoned) is the assistant messages stored while
// this request waited (a resumed turn's result also lists the ones its
// client was answered before the pause).
func (a *answer) whole(w http.ResponseWriter, r *http.Request, sub *eventbus.Sub, turnID string) {
	var thoughts []string // each answer's reasoning, as stored
	for a.res == nil {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				WriteError(w, http.StatusGatewayTimeout, "timeout", "", "this request fell behind its turn's events; the turn goes on: read it from the chat's transcript ("+ChatHeader+")")
				return
			}
			if m, ok := ev.Data.(api.Message); ok && ev.TurnID == turnID && ev.Type == api.EventMessage && m.Role == api.RoleAssistant {
				a.text.WriteString(m.Content)
				if m.Thinking != "" {
					thoughts = append(thoughts, m.Thinking)
				}
			}
			a.take(ev, turnID)
		case <-r.Context().Done():
			return
		}
	}
	if !a.answered() {
		a.failed()
		status, code, param, msg := a.failure()
		WriteError(w, status, code, param, msg)
		return
	}
	reasoning := strings.Join(thoughts, "\n\n")
	if a.late {
		var text string
		text, reasoning = a.settleLate()
		a.text.Reset()
		a.text.WriteString(text)
	}
	a.kept(a)
	msg := map[string]any{"role": "assistant", "content": a.text.String(), "refusal": nil}
	if reasoning != "" {
		msg["reasoning_content"] = reasoning
	}
	if calls := a.toolCalls(false); len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": a.id, "object": "chat.completion", "created": a.created, "model": a.model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": a.finish(), "logprobs": nil}},
		"usage":   a.usage(),
	})
}

// take reads one event of the turn; it sets res when the turn ends its step.
func (a *answer) take(ev *eventbus.Event, turnID string) {
	if ev.TurnID != turnID {
		return
	}
	if u, ok := ev.Data.(api.Usage); ok && ev.Type == api.EventUsage {
		a.spent = a.spent.Add(u)
	}
	if ev.Type == api.EventTurnCompleted || ev.Type == api.EventTurnRequiresAction {
		if res, ok := ev.Data.(api.TurnResult); ok {
			a.res = &res
		}
	}
}

// stream answers the turn as chat.completion.chunk events: the model's
// reasoning (delta.reasoning_content, as llama.cpp's server, vLLM and
// DeepSeek stream it) and the text as they come, the client's tool calls when the turn pauses for them, the finish
// reason, the usage chunk when asked, then [DONE]. A turn that faulted ends
// with an error event and no [DONE]: the SDKs raise the error, and a client
// that reads [DONE] as "complete" is not told so.
func (a *answer) stream(r *http.Request, out *stream, sub *eventbus.Sub, turnID string, withUsage bool, every time.Duration) {
	behind := func() string {
		b, _ := json.Marshal(map[string]any{"error": apiError{Message: "this stream fell behind its turn's events; the turn goes on: read it from the chat's transcript (" + ChatHeader + ")", Type: typeServer, Code: nullable("stream_dropped")}})
		return "data: " + string(b) + "\n\n"
	}
	out.behind = behind
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": a.id, "object": "chat.completion.chunk", "created": a.created, "model": a.model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}}}
	}
	out.data(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	// round is what the deltas told of the assistant message being written.
	var round strings.Builder
	say := func(s string) {
		if s != "" {
			round.WriteString(s)
			a.text.WriteString(s)
			out.data(chunk(map[string]any{"content": s}, nil))
		}
	}
	// thought: reasoning was streamed since the last reset or answer;
	// apart: an answer with reasoning ended since reasoning last streamed.
	thought, apart := false, false
	tick := time.NewTicker(every)
	defer tick.Stop()
	for a.res == nil && !out.gone() {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				out.write(behind())
				return
			}
			switch {
			case ev.TurnID != turnID:
			case a.late && (ev.Type == api.EventMessageDelta || ev.Type == api.EventMessage || ev.Type == api.EventMessageReset ||
				ev.Type == api.EventThinkingDelta || ev.Type == api.EventThinkingReset): // the stored answer and its reasoning are told whole at the end
			case ev.Type == api.EventThinkingDelta:
				if d, ok := ev.Data.(map[string]string); ok && d["text"] != "" {
					text := d["text"]
					if apart {
						// The next answer's reasoning (after agentd's own
						// tools) is not spliced onto the last one's.
						text, apart = "\n\n"+text, false
					}
					thought = true
					out.data(chunk(map[string]any{"reasoning_content": text}, nil))
				}
			case ev.Type == api.EventThinkingReset:
				// The wire cannot take back what it streamed: the cut
				// attempt's reasoning ends, marked, and the retry's follows.
				if thought {
					thought = false
					out.data(chunk(map[string]any{"reasoning_content": reasoningBreak}, nil))
				}
			case ev.Type == api.EventMessageReset:
				// The wire cannot take back what it streamed: the answer
				// taken back ends, marked, and the retry's follows; the
				// client keeps what it was streamed (a.text) with the break.
				if round.Len() > 0 {
					say(answerBreak)
					round.Reset()
				}
			case ev.Type == api.EventMessageDelta:
				if d, ok := ev.Data.(map[string]string); ok {
					say(d["text"])
				}
			case ev.Type == api.EventMessage:
				// The stored message is whole: tell what a dropped delta missed.
				if m, ok := ev.Data.(api.Message); ok && m.Role == api.RoleAssistant {
					if rest, ok := strings.CutPrefix(m.Content, round.String()); ok {
						say(rest)
					}
					round.Reset()
					apart = apart || thought
				}
			default:
				a.take(ev, turnID)
			}
		case <-tick.C:
			out.write(keepalive)
		case <-r.Context().Done():
			return
		}
	}
	if a.res == nil {
		return
	}
	if !a.answered() {
		a.failed()
		status, code, param, msg := a.failure()
		typ := typeInvalidRequest
		if status >= 500 {
			typ = typeServer
		}
		out.data(map[string]any{"error": apiError{Message: msg, Type: typ, Param: nullable(param), Code: nullable(code)}})
		return
	}
	if a.late {
		// Told whole, the reasoning first, as an early client was told
		// the turn.
		text, reasoning := a.settleLate()
		if reasoning != "" {
			out.data(chunk(map[string]any{"reasoning_content": reasoning}, nil))
		}
		say(text)
	}
	a.kept(a)
	// A chunk per call, as OpenAI streams parallel calls: the SDKs'
	// accumulators (openai-go's JustFinishedToolCall) tell a call finished
	// when a chunk of another call follows it.
	for _, c := range a.toolCalls(true) {
		out.data(chunk(map[string]any{"tool_calls": []chatToolCall{c}}, nil))
	}
	out.data(chunk(map[string]any{}, a.finish()))
	if withUsage {
		out.data(map[string]any{"id": a.id, "object": "chat.completion.chunk", "created": a.created, "model": a.model, "choices": []any{}, "usage": a.usage()})
	}
	out.write("data: [DONE]\n\n")
}

// data writes one Chat Completions event: a data line, no event name.
func (s *stream) data(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.cut = true
		return
	}
	s.write("data: " + string(b) + "\n\n")
}

// refuse ends a stream started while its message waited (whileQueued)
// with the error write would have answered, as a failed turn's: a data
// line {"error": …}, which the SDKs raise. A client gone is told nothing.
func (s *stream) refuse(write func(w http.ResponseWriter)) {
	if status, e := refusal(write); status != StatusClientGone {
		s.data(map[string]any{"error": e})
	}
}
