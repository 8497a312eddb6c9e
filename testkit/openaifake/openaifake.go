// Package openaifake is an httptest server that speaks the OpenAI chat
// completions protocol the way the real service does — SSE chunks, tool-call
// deltas split across chunks, the usage chunk, [DONE], and real error bodies —
// so agentd's OpenAI-style adapter is tested exactly as it runs in production.
//
// Wire format followed (chunk object, usage chunk, tool-call deltas):
// https://platform.openai.com/docs/api-reference/chat/streaming and
// https://platform.openai.com/docs/api-reference/chat/create (stream_options).
// Reasoning deltas follow DeepSeek's `reasoning_content`
// (https://api-docs.deepseek.com/guides/thinking_mode) or OpenRouter's
// `reasoning` (https://openrouter.ai/docs/use-cases/reasoning-tokens).
package openaifake

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
)

// v1 decodes requests by encoding/json's rules on its successor's engine:
// the same values in at 2-2.5 times the speed (BenchmarkOverheadRequest).
// The benches run the fake on agentd's cores, and with encoding/json a
// 100 KB request cost the fake more CPU than agentd spent on its turn.
// It leaves out encoding/json's way of reporting errors, which scans the
// whole body once before decoding it (two fifths of the decoding): a bad
// body is refused all the same, with the fake's one fixed message.
var v1 = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv1.ReportErrorsWithLegacySemantics(false))

// ModelEntry is one model the list returns.
type ModelEntry struct {
	ID     string
	Window int
	// WindowField is the provider's own name for the window in a model
	// list entry: "context_length" (OpenRouter, Together, …, the default),
	// "max_model_len" (vLLM), "context_window" (Groq), "max_context_length"
	// (Mistral). Window 0 leaves the field out, as plain OpenAI does.
	WindowField string
}

// Options configure a fake server.
type Options struct {
	// Window is the context window; a request whose counted input exceeds
	// it gets OpenAI's real "context_length_exceeded" body with status 400.
	Window int
	// Script decides each reply; nil echoes a short fixed answer.
	Script testkit.Script
	// Models is what GET /v1/models returns.
	Models []ModelEntry
	// Latency is the delay before the first byte.
	Latency time.Duration
	// ReasoningField names the delta field thinking is streamed in:
	// "reasoning_content" (DeepSeek, the default) or "reasoning" (OpenRouter).
	ReasoningField string
	// Props, when set, is served at GET /props as llama.cpp's llama-server
	// does (n_ctx, total_slots).
	Props string
	// Listener, when set, is where the fake serves (a test that starts it
	// at an address agentd already knows); nil picks a free port.
	Listener net.Listener
	// Forget keeps nothing of what it served: no request log (Requests is
	// empty) and no prompt cache (cached_tokens is 0). A bench of many
	// chats in one process then measures agentd's heap, not the fake's.
	Forget bool
}

// DefaultAnswer is what the fake says when no script is given.
const DefaultAnswer = "Hello from the fake."

// Server is a running fake.
type Server struct {
	opts Options
	ts   *httptest.Server
	log  testkit.Log
	quit chan struct{}
	once sync.Once
	seq  atomic.Int64
	// cache answers cached_tokens by OpenAI's prompt-cache rule.
	cache testkit.PromptCache
}

// New starts a fake server.
func New(opts Options) *Server {
	if opts.ReasoningField == "" {
		opts.ReasoningField = "reasoning_content"
	}
	s := &Server{opts: opts, quit: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("GET /v1/models", s.models)
	if opts.Props != "" {
		mux.HandleFunc("GET /props", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, opts.Props)
		})
	}
	s.ts = httptest.NewUnstartedServer(mux)
	if opts.Listener != nil {
		_ = s.ts.Listener.Close()
		s.ts.Listener = opts.Listener
	}
	s.ts.Start()
	return s
}

// URL is the base URL to configure an adapter with (it ends in /v1).
func (s *Server) URL() string { return s.ts.URL + "/v1" }

// Requests returns every chat request received so far.
func (s *Server) Requests() []testkit.Received { return s.log.All() }

// Close stops the server, releasing any handler that hangs.
func (s *Server) Close() {
	s.once.Do(func() { close(s.quit) })
	s.ts.CloseClientConnections()
	s.ts.Close()
}

// wire types: only what the fake reads or writes.

type wireRequest struct {
	Model               string        `json:"model"`
	Messages            []wireMessage `json:"messages"`
	Tools               wireTools     `json:"tools"`
	MaxTokens           int           `json:"max_tokens"`
	MaxCompletionTokens int           `json:"max_completion_tokens"`
	PromptCacheKey      string        `json:"prompt_cache_key"`
	Stream              bool          `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type wireMessage struct {
	Role             string         `json:"role"`
	Content          wireContent    `json:"content"`
	ReasoningContent string         `json:"reasoning_content"`
	Reasoning        string         `json:"reasoning"`
	ToolCalls        []wireToolCall `json:"tool_calls"`
	ToolCallID       string         `json:"tool_call_id"`
	Name             string         `json:"name"`
}

type wireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type wirePart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// toolList is a request's tools as the fake reads them: their names, and
// each tool's block of the prompt (its texts, counted).
type toolList struct {
	raw    string // as sent, checked by decoding it
	names  []string
	blocks []testkit.Block
	tokens int
}

// wireTools is a request's tools, decoded once per distinct list
// (toolLists).
type wireTools struct{ *toolList }

func (t *wireTools) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	t.toolList, err = lists.get(raw)
	return err
}

// toolLists decodes each distinct tool list once. agentd sends all the
// chats of one tool set the same list, byte for byte; in the scale bench
// it is four fifths of every request, and the benches run this fake on
// agentd's cores. At most maxToolLists are kept: past that it starts over.
// A list it knows is blanked out of a body before the body is decoded
// (blank), so the decoder does not scan it either.
type toolLists struct {
	mu    sync.Mutex
	lists map[string]*toolList
}

// lists is every fake's: a list's decoding depends on its bytes alone.
var lists toolLists

const maxToolLists = 64

func (l *toolLists) get(raw jsontext.Value) (*toolList, error) {
	if raw.Kind() == 'n' {
		return nil, nil
	}
	l.mu.Lock()
	tl, ok := l.lists[string(raw)]
	l.mu.Unlock()
	if ok {
		return tl, nil
	}
	var wire []wireTool
	if err := jsonv2.Unmarshal(raw, &wire, v1); err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	tl = &toolList{raw: string(raw)}
	for _, t := range wire {
		tl.names = append(tl.names, t.Function.Name)
		b := block("tool", t.Function.Name, t.Function.Description, string(t.Function.Parameters))
		tl.blocks = append(tl.blocks, b)
		tl.tokens += b.Tokens
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lists) >= maxToolLists || l.lists == nil {
		l.lists = make(map[string]*toolList)
	}
	l.lists[tl.raw] = tl
	return tl, nil
}

// block is one part of the prompt for the cache: its role (or "tool")
// names it without being counted, as the fake counts only the texts.
func block(role string, texts ...string) testkit.Block {
	b := testkit.Block{Text: role + "\x00"}
	for _, t := range texts {
		b.Tokens += testkit.CountTokens(t)
		if t != "" {
			b.Text += t + "\x00"
		}
	}
	return b
}

// received turns a wire request into the neutral record and counts its
// input. With blocks set it also returns the prompt's blocks for the
// cache: the leading system messages, then the tools (OpenAI renders them
// after the instructions), then every other message. A fake that forgets
// has no cache and skips them: joined, they copy the whole prompt again.
func received(req wireRequest, raw []byte, blocks bool) (testkit.Received, []testkit.Block, error) {
	tools := req.Tools.toolList
	if tools == nil {
		tools = &toolList{}
	}
	r := testkit.Received{Model: req.Model, Raw: raw, MaxTokens: req.MaxTokens, CacheKey: req.PromptCacheKey,
		Messages: make([]chat.Message, 0, len(req.Messages)), Tools: slices.Clip(tools.names), InputTokens: tools.tokens}
	if req.MaxCompletionTokens > 0 {
		r.MaxTokens = req.MaxCompletionTokens
	}
	var lead, rest []testkit.Block
	add := func(to *[]testkit.Block, role string, texts ...string) {
		if !blocks {
			for _, t := range texts {
				r.InputTokens += testkit.CountTokens(t)
			}
			return
		}
		b := block(role, texts...)
		r.InputTokens += b.Tokens
		*to = append(*to, b)
	}
	for i, m := range req.Messages {
		text, images, err := content(m.Content)
		if err != nil {
			return r, nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		switch m.Role {
		case "system", "developer":
			if r.System != "" {
				r.System += "\n"
			}
			r.System += text
			to := &lead
			if len(rest) > 0 {
				to = &rest
			}
			add(to, m.Role, text)
			continue
		}
		cm := chat.Message{Role: chat.Role(m.Role), Content: text, Images: images, ToolCallID: m.ToolCallID, ToolName: m.Name}
		cm.Thinking = m.ReasoningContent
		if cm.Thinking == "" {
			cm.Thinking = m.Reasoning
		}
		texts := []string{text, cm.Thinking}
		for _, tc := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			texts = append(texts, tc.Function.Name, tc.Function.Arguments)
		}
		add(&rest, m.Role, texts...)
		r.Messages = append(r.Messages, cm)
	}
	if !blocks {
		return r, nil, nil
	}
	return r, append(append(lead, tools.blocks...), rest...), nil
}

// wireContent is a message's content as sent: a string, a list of parts
// (text and image_url), or null. It is decoded once, in the request's own
// decoding, not kept raw and decoded again.
type wireContent struct {
	text  string
	parts []wirePart
}

func (c *wireContent) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '"':
		tok, err := dec.ReadToken()
		c.text = tok.String()
		return err
	case '[':
		return jsonv2.UnmarshalDecode(dec, &c.parts)
	}
	return errors.New("content is neither a string nor a list of parts")
}

// content reads a message's text and images.
func content(c wireContent) (string, []chat.Image, error) {
	if c.parts == nil {
		return c.text, nil, nil
	}
	var text strings.Builder
	var images []chat.Image
	for _, p := range c.parts {
		switch p.Type {
		case "text":
			text.WriteString(p.Text)
		case "image_url":
			img, err := dataURL(p.ImageURL.URL)
			if err != nil {
				return "", nil, err
			}
			images = append(images, img)
		default:
			return "", nil, fmt.Errorf("unknown content part type %q", p.Type)
		}
	}
	return text.String(), images, nil
}

func dataURL(u string) (chat.Image, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return chat.Image{}, fmt.Errorf("image url is not a data URL")
	}
	mediaType, b64, ok := strings.Cut(rest, ";base64,")
	if !ok {
		return chat.Image{}, fmt.Errorf("image data URL is not base64")
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return chat.Image{}, fmt.Errorf("image data: %w", err)
	}
	return chat.Image{MediaType: mediaType, Data: data}, nil
}

// openAIError writes an error in OpenAI's envelope.
func openAIError(w http.ResponseWriter, status int, msg, typ string, code any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
	_, _ = w.Write(body)
}

// tooLongMessage builds OpenAI's real refusal text. Both forms are copied from
// real bodies: "your messages resulted in" from chathub-dev/chathub#320 and
// "you requested … in the completion" from mckaywrigley/chatbot-ui#102 (see
// ../shared/provider-bodies/too_long.jsonl A002 and A004).
func tooLongMessage(window, input, maxTokens int) string {
	if input <= window {
		return fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.", window, input+maxTokens, input, maxTokens)
	}
	return fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", window, input)
}

// readBody reads a request's body in one allocation of its declared
// length (io.ReadAll grows its buffer to about twice a big body).
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength <= 0 {
		return io.ReadAll(r.Body)
	}
	b := make([]byte, r.ContentLength)
	_, err := io.ReadFull(r.Body, b)
	return b, err
}

// decodeRequest decodes a chat request, its tool list blanked out while
// it decodes when it is one already decoded (toolLists.blank).
func decodeRequest(raw []byte) (wireRequest, error) {
	tools, at := lists.blank(raw)
	var req wireRequest
	err := jsonv2.Unmarshal(raw, &req, v1)
	if tools != nil {
		copy(raw[at:], tools.raw)
		req.Tools.toolList = tools
	}
	return req, err
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	raw, err := readBody(r)
	if err != nil {
		openAIError(w, http.StatusBadRequest, "could not read body", "invalid_request_error", nil)
		return
	}
	req, err := decodeRequest(raw)
	if err != nil {
		openAIError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", "invalid_request_error", nil)
		return
	}
	rec, blocks, err := received(req, raw, !s.opts.Forget)
	if err != nil {
		openAIError(w, http.StatusBadRequest, err.Error(), "invalid_request_error", nil)
		return
	}
	if !s.opts.Forget {
		rec.CachedTokens = s.cache.OpenAI(blocks)
		s.log.Add(rec)
	}

	if !testkit.Sleep(r.Context(), s.opts.Latency, s.quit) {
		return
	}
	if s.opts.Window > 0 && (rec.InputTokens > s.opts.Window || rec.InputTokens+rec.MaxTokens > s.opts.Window) {
		openAIError(w, http.StatusBadRequest, tooLongMessage(s.opts.Window, rec.InputTokens, rec.MaxTokens), "invalid_request_error", "context_length_exceeded")
		return
	}
	reply := testkit.Reply{Text: DefaultAnswer}
	if s.opts.Script != nil {
		reply = s.opts.Script(rec)
	}
	if reply.Hang {
		select {
		case <-r.Context().Done():
		case <-s.quit:
		}
		return
	}
	if reply.Status != 0 && (reply.Status < 200 || reply.Status > 299) {
		if w.Header().Get("Content-Type") == "" {
			ct := "application/json"
			if !json.Valid([]byte(reply.Body)) {
				ct = "text/plain; charset=utf-8"
			}
			w.Header().Set("Content-Type", ct)
		}
		if reply.Status == http.StatusTooManyRequests {
			// OpenAI sends the wait in seconds with its 429s.
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(reply.Status)
		_, _ = io.WriteString(w, reply.Body)
		return
	}
	usage := chat.Usage{InputTokens: rec.InputTokens, OutputTokens: outputTokens(reply), CachedTokens: rec.CachedTokens}
	if reply.Usage != nil {
		usage = *reply.Usage
	}
	finish := reply.Finish
	if finish == "" {
		finish = "stop"
		if len(reply.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	id := fmt.Sprintf("chatcmpl-fake%d", s.seq.Add(1))
	if !req.Stream {
		s.whole(w, id, req.Model, reply, finish, usage)
		return
	}
	s.stream(w, id, req, reply, finish, usage)
}

func outputTokens(r testkit.Reply) int {
	n := 0
	for _, t := range []string{r.Text, r.Refusal, r.Thinking} {
		if t != "" {
			n += testkit.CountTokens(t)
		}
	}
	for _, tc := range r.ToolCalls {
		n += testkit.CountTokens(tc.Name) + testkit.CountTokens(tc.Arguments)
	}
	return n
}

func callID(tc chat.ToolCall, i int) string {
	if tc.ID != "" {
		return tc.ID
	}
	return fmt.Sprintf("call_fake%d", i)
}

// whole answers a non-streaming request with a chat.completion object.
func (s *Server) whole(w http.ResponseWriter, id, model string, reply testkit.Reply, finish string, usage chat.Usage) {
	msg := map[string]any{"role": "assistant", "content": reply.Text, "refusal": nil}
	if reply.Refusal != "" {
		// https://platform.openai.com/docs/guides/structured-outputs#refusals
		msg["content"], msg["refusal"] = nil, reply.Refusal
	}
	if reply.Thinking != "" {
		msg[s.opts.ReasoningField] = reply.Thinking
	}
	if len(reply.ToolCalls) > 0 {
		var calls []map[string]any
		for i, tc := range reply.ToolCalls {
			calls = append(calls, map[string]any{"id": callID(tc, i), "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}})
		}
		msg["tool_calls"] = calls
	}
	body := map[string]any{
		"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices": []map[string]any{{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage":   json.RawMessage(appendUsage(nil, usage)), "system_fingerprint": "fp_fake",
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// stream answers with SSE chunks the way the real service frames them.
func (s *Server) stream(w http.ResponseWriter, id string, req wireRequest, reply testkit.Reply, finish string, usage chat.Usage) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	created := time.Now().Unix()
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage

	if reply.Garbage {
		// A proxy's HTML page and a truncated JSON line: neither is the protocol.
		_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>\n\ndata: {\"id\": \"chatcmpl-x\", \"choices\": [{\"delta\": {\"content\": \"hi\"\n\n")
		return
	}

	sent := 0
	send := func(line []byte) {
		if reply.CutAfterChunks > 0 && sent >= reply.CutAfterChunks {
			// Drop the connection mid-stream: the client sees a chunked
			// body that never terminates properly.
			panic(http.ErrAbortHandler)
		}
		_, _ = w.Write(line)
		if flusher != nil {
			flusher.Flush()
		}
		sent++
	}
	lines := newChunkLines(id, created, req.Model, includeUsage)

	send(lines.delta(wireDelta{Role: "assistant", Content: new(string), Refusal: json.RawMessage("null")}, ""))
	if reply.StreamError != "" {
		data := reply.StreamError
		if !strings.HasPrefix(strings.TrimSpace(data), "{") {
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": data, "type": "server_error", "param": nil, "code": nil}})
			data = string(b)
		}
		_, _ = fmt.Fprintf(w, "data: %s\n\n", data)
		return
	}
	for _, p := range testkit.Chunks(reply.Thinking, reply.ChunkRunes) {
		d := wireDelta{}
		if s.opts.ReasoningField == "reasoning" {
			d.Reasoning = &p
		} else {
			d.ReasoningContent = &p
		}
		send(lines.delta(d, ""))
	}
	for _, p := range testkit.Chunks(reply.Text, reply.ChunkRunes) {
		send(lines.delta(wireDelta{Content: &p}, ""))
	}
	for _, p := range testkit.Chunks(reply.Refusal, reply.ChunkRunes) {
		// choices[].delta.refusal of a chat.completion.chunk
		// (https://platform.openai.com/docs/api-reference/chat-streaming/streaming).
		send(lines.delta(wireDelta{Refusal: appendString(nil, p)}, ""))
	}
	for i, tc := range reply.ToolCalls {
		send(lines.delta(wireDelta{ToolCall: &deltaCall{Index: i, ID: callID(tc, i), Type: "function", Name: tc.Name}}, ""))
		for _, p := range testkit.Chunks(tc.Arguments, reply.ChunkRunes) {
			send(lines.delta(wireDelta{ToolCall: &deltaCall{Index: i, Arguments: p}}, ""))
		}
	}
	send(lines.delta(wireDelta{}, finish))
	if includeUsage {
		send(lines.usage(usage))
	}
	if reply.CutAfterChunks > 0 && sent >= reply.CutAfterChunks {
		panic(http.ErrAbortHandler)
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	data := []map[string]any{}
	for _, m := range s.opts.Models {
		e := map[string]any{"id": m.ID, "object": "model", "created": 1700000000, "owned_by": "openaifake"}
		if m.Window > 0 {
			field := m.WindowField
			if field == "" {
				field = "context_length"
			}
			e[field] = m.Window
		}
		data = append(data, e)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}
