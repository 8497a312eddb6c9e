package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// events is what consume reads: the SDK's *ssestream.Stream, or a test's.
type events interface {
	Next() bool
	Current() anthropic.MessageStreamEventUnion
	Err() error
}

// part is one content block being assembled, by its index.
type part struct {
	typ       string
	text      strings.Builder // text or thinking
	signature strings.Builder
	data      string // redacted_thinking
	id, name  string
	input     strings.Builder // tool_use input_json_delta pieces
	initial   string          // tool_use input given whole in content_block_start
	done      bool
}

// assembler folds the event sequence of
// https://docs.anthropic.com/en/docs/build-with-claude/streaming into a
// Response, emitting as it goes.
type assembler struct {
	emit     func(providers.Event)
	parts    map[int64]*part
	order    []int64
	calls    []chat.ToolCall
	usage    chat.Usage
	stop     string
	started  bool
	finished bool
	texts    int             // text blocks that produced text, for the separator
	thoughts int             // thinking blocks that produced text, likewise
	content  strings.Builder // the text exactly as emitted
	budget   *providers.AnswerBudget
}

// consume reads the stream to its end, or until the answer outgrows its
// budget. On error the Response holds what arrived, marked Partial.
func consume(s events, budget *providers.AnswerBudget, emit func(providers.Event)) (providers.Response, error) {
	a := &assembler{emit: emit, parts: map[int64]*part{}, budget: budget}
	var err error
	for err == nil && s.Next() {
		err = a.handle(s.Current())
		if err == nil && budget.Over() {
			err = budget.Err(DefaultName)
		}
	}
	if err == nil {
		err = readErr(s.Err())
	}
	if err == nil {
		err = a.complete()
	}
	res, buildErr := a.response()
	if err == nil {
		err = buildErr
	}
	if err != nil {
		res.Message.Partial = true
		res.Message.Problem = err.Error()
	}
	return res, err
}

func (a *assembler) handle(ev anthropic.MessageStreamEventUnion) error {
	switch ev.Type {
	case "message_start":
		a.started = true
		u := ev.Message.Usage
		// input_tokens leaves out what the prompt cache read or wrote; the
		// whole prompt is what the window holds.
		a.usage = chat.Usage{InputTokens: int(u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens), OutputTokens: int(u.OutputTokens), CachedTokens: int(u.CacheReadInputTokens)}
	case "content_block_start":
		return a.start(ev.Index, ev.ContentBlock)
	case "content_block_delta":
		return a.delta(ev.Index, ev.Delta)
	case "content_block_stop":
		return a.stopBlock(ev.Index)
	case "message_delta":
		a.messageDelta(ev)
	case "message_stop":
		a.finished = true
	}
	// Other event types (and ping, which the SDK drops) carry nothing we
	// keep; the API may add new ones, so they are not errors.
	return nil
}

func (a *assembler) start(i int64, cb anthropic.ContentBlockStartEventContentBlockUnion) error {
	if _, dup := a.parts[i]; dup {
		return badStream("content block %d started twice", i)
	}
	p := &part{typ: cb.Type}
	a.parts[i] = p
	a.order = append(a.order, i)
	switch cb.Type {
	case "text":
		a.text(p, cb.Text)
	case "thinking":
		a.thinking(p, cb.Thinking)
		p.signature.WriteString(cb.Signature)
	case "redacted_thinking":
		// Kept whole or not at all: a cut signature is no signature.
		if _, fits := a.budget.Take(cb.Data); fits {
			p.data = cb.Data
		}
	case "tool_use":
		// The id and name count as the answer's bytes, as its input does.
		if _, fits := a.budget.Take(cb.ID + cb.Name); fits {
			p.id, p.name = cb.ID, cb.Name
		}
		if raw := cb.JSON.Input.Raw(); raw != "" && raw != "{}" && raw != "null" {
			p.initial, _ = a.budget.Take(raw)
		}
	}
	return nil
}

func (a *assembler) delta(i int64, d anthropic.MessageStreamEventUnionDelta) error {
	p, ok := a.parts[i]
	if !ok || p.done {
		return badStream("delta for content block %d that is not open", i)
	}
	switch d.Type {
	case "text_delta":
		a.text(p, d.Text)
	case "thinking_delta":
		a.thinking(p, d.Thinking)
	case "signature_delta":
		sig, _ := a.budget.Take(d.Signature)
		p.signature.WriteString(sig)
	case "input_json_delta":
		in, _ := a.budget.Take(d.PartialJSON)
		p.input.WriteString(in)
	}
	return nil
}

// text appends to a text block and emits it; a second text block of the
// answer is set apart from the first by a blank line, both in the stream
// and in the final Content, so the two always agree.
func (a *assembler) text(p *part, s string) {
	if s == "" {
		return
	}
	s = blockSep(p, &a.texts) + s
	if s, _ = a.budget.Take(s); s == "" {
		return
	}
	p.text.WriteString(s)
	a.content.WriteString(s)
	a.emit(providers.Event{Kind: providers.EventText, Text: s})
}

// thinking appends to a thinking block and emits it. A second block's
// reasoning goes out after a blank line, as encodeThinking joins the
// blocks in the final Thinking, so the stream and the stored answer agree;
// the block keeps its own text alone, which its signature covers.
func (a *assembler) thinking(p *part, s string) {
	if s, _ = a.budget.Take(s); s == "" {
		return
	}
	sep := blockSep(p, &a.thoughts)
	p.text.WriteString(s)
	a.emit(providers.Event{Kind: providers.EventThinking, Text: sep + s})
}

// blockSep is the blank line that sets the first words of p apart from an
// earlier block's of its kind; n counts the blocks of that kind begun.
func blockSep(p *part, n *int) string {
	if p.text.Len() > 0 {
		return ""
	}
	if *n++; *n > 1 {
		return "\n\n"
	}
	return ""
}

func (a *assembler) stopBlock(i int64) error {
	p, ok := a.parts[i]
	if !ok || p.done {
		return badStream("stop for content block %d that is not open", i)
	}
	p.done = true
	if p.typ != "tool_use" {
		return nil
	}
	args := p.input.String()
	if args == "" {
		args = p.initial
	}
	if args == "" {
		args = "{}"
	}
	// Input that is not JSON is kept as it came, as the other adapters keep
	// it: a max_tokens stop can end the input mid-value, and fine-grained
	// tool streaming sends it unvalidated
	// (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/fine-grained-tool-streaming).
	// The turn then sees a call cut by the answer room, and the tool tells
	// the model its arguments were unusable; failing the stream lost both.
	call := chat.ToolCall{ID: p.id, Name: p.name, Arguments: args}
	a.calls = append(a.calls, call)
	a.emit(providers.Event{Kind: providers.EventToolCall, ToolCall: &call})
	return nil
}

// messageDelta takes the stop reason and the cumulative usage. Input and
// cache figures in message_delta, when present, replace message_start's
// (the API documents message_delta counts as cumulative).
func (a *assembler) messageDelta(ev anthropic.MessageStreamEventUnion) {
	if ev.Delta.StopReason != "" {
		a.stop = string(ev.Delta.StopReason)
	}
	if ev.Delta.StopReason == anthropic.StopReasonRefusal && ev.Delta.StopDetails.Explanation != "" {
		// A refusal's explanation is for the person, as OpenAI's refusal
		// text is: it is the answer's last words, in a block of its own.
		// (https://docs.anthropic.com/en/docs/test-and-evaluate/strengthen-guardrails/handle-streaming-refusals)
		a.text(&part{typ: "text"}, ev.Delta.StopDetails.Explanation)
	}
	u := ev.Usage
	if u.JSON.OutputTokens.Valid() {
		a.usage.OutputTokens = int(u.OutputTokens)
	}
	if u.JSON.InputTokens.Valid() && u.InputTokens > 0 {
		a.usage.InputTokens = int(u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens)
	}
	if u.JSON.CacheReadInputTokens.Valid() && u.CacheReadInputTokens > 0 {
		a.usage.CachedTokens = int(u.CacheReadInputTokens)
	}
	usage := a.usage
	a.emit(providers.Event{Kind: providers.EventUsage, Usage: &usage})
}

// complete checks the stream ended as the protocol says it must.
func (a *assembler) complete() error {
	switch {
	case !a.started:
		return badStream("no message_start")
	case !a.finished:
		return &providers.Error{Provider: DefaultName, Status: http.StatusOK, Retryable: true, Err: ErrStreamCut}
	}
	return nil
}

// response assembles what arrived: the text as it was emitted, thinking
// blocks in block order.
func (a *assembler) response() (providers.Response, error) {
	msg := chat.Message{Role: chat.RoleAssistant, ToolCalls: a.calls, Content: a.content.String()}
	var thinking []thinkingBlock
	for _, i := range a.order {
		p := a.parts[i]
		switch p.typ {
		case "thinking":
			thinking = append(thinking, thinkingBlock{Type: "thinking", Thinking: p.text.String(), Signature: p.signature.String()})
		case "redacted_thinking":
			thinking = append(thinking, thinkingBlock{Type: "redacted_thinking", Data: p.data})
		}
	}
	var err error
	msg.Thinking, msg.ThinkingSignature, err = encodeThinking(thinking)
	return providers.Response{Message: msg, Usage: a.usage, FinishReason: finish(a.stop)}, err
}

// finish normalises stop_reason
// (https://docs.anthropic.com/en/api/handling-stop-reasons).
func finish(stop string) string {
	switch stop {
	case "end_turn", "stop_sequence", "pause_turn", "":
		return providers.FinishStop
	case "max_tokens", "model_context_window_exceeded":
		return providers.FinishLength
	case "tool_use":
		return providers.FinishToolCalls
	case "refusal":
		return providers.FinishFilter
	}
	return stop
}

// readErr sorts what the stream reader failed with: data that is not JSON
// is a protocol fault; anything else (an API error event, a broken
// connection) is left for Client.wrap.
func readErr(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) {
		return badStream("%v", err)
	}
	return err
}

func badStream(format string, args ...any) error {
	return &providers.Error{Provider: DefaultName, Status: http.StatusOK,
		Err: fmt.Errorf("%w: %s", ErrBadStream, fmt.Sprintf(format, args...))}
}
