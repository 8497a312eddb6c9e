package openai

import (
	"bytes"
	"container/list"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"hash/maphash"
	"slices"
	"strconv"
	"sync"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/slicepool"
)

// The request body is written here and handed to the SDK whole
// (option.WithRequestBody); the SDK still sends it and parses the stream.
// Its own encoder reflects over its param unions: on a 32K chat it took
// about 2.7 ms of CPU a model call, a third of all agentd spent on a turn
// (BENCHMARKS.md, issue 20 point 2). Here each message is encoded once:
// a chat's next request reuses the bytes of every message its last one
// carried unchanged, and a tool list's bytes are shared by every chat that
// sends the same list, so a call encodes only what is new. A request whose
// log extends its chat's last one in the same array (a session's next
// turn) reuses the last one's messages joined, as one copy: it reads only
// what is new (chatBytes.settled).

// Bounds of what the encoder keeps between requests: the chats that sent
// last (an idle chat's bytes go as others send), and the distinct tool
// lists.
const (
	maxEncodedChats = 256
	maxEncodedBytes = 16 << 20
	maxToolLists    = 64
)

// The arrays of a chat's per-message records are pooled: they are replaced
// by its next request's (the encoder hands a chat's bytes to one request at
// a time, and none reads them after). On a 32K chat they were one of every
// model call's largest allocations (≈50 KB).
var records slicepool.Pool[msgBytes]

// encoder keeps encoded bytes between requests; safe for concurrent use.
type encoder struct {
	mu    sync.Mutex
	chats map[string]*list.Element // of *chatBytes, newest at the front
	order list.List
	bytes int
	seed  maphash.Seed
	tools map[uint64][]*toolBytes
}

// chatBytes is one chat's last request, encoded.
type chatBytes struct {
	key    string
	system string
	sysEnc []byte
	msgs   []msgBytes
	tools  *toolBytes // shared with other chats: never changed
	size   int
	// log is the request's log, and joined its wire messages as the body
	// lists them (the system prompt first, comma-separated). Its first
	// settled messages' bytes (msgs[:settled], up to msgs[settled-1].end)
	// stay what they are whatever follows them: 0 when a picture rides in
	// the log, and with thinking sent back only on turns that call tools,
	// the messages before the last person's (a later call in the open
	// turn changes its messages' bytes).
	log     []chat.Message
	joined  []byte
	settled int
}

// msgBytes is one stored message as last sent, and its bytes. It keeps
// only the fields its bytes depend on (sameMsg), not the whole message: a
// request copies one of these for each message it carries.
type msgBytes struct {
	seq                           int64
	role                          chat.Role
	content, toolCallID, thinking string
	calls                         []chat.ToolCall
	replay                        bool
	enc                           []byte
	end                           int // len(chatBytes.joined) with this message
}

type toolBytes struct {
	specs []chat.ToolSpec
	enc   []byte
}

func newEncoder() *encoder {
	return &encoder{chats: map[string]*list.Element{}, seed: maphash.MakeSeed(), tools: map[uint64][]*toolBytes{}}
}

// take removes and returns key's bytes (nil: none), so no two requests of
// one chat share them.
func (e *encoder) take(key string) *chatBytes {
	if key == "" {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	el, ok := e.chats[key]
	if !ok {
		return nil
	}
	cb := e.order.Remove(el).(*chatBytes)
	delete(e.chats, key)
	e.bytes -= cb.size
	return cb
}

// keep stores a chat's bytes as the newest, dropping the oldest past the
// bounds.
func (e *encoder) keep(cb *chatBytes) {
	if cb.key == "" || cb.size > maxEncodedBytes/4 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if el, ok := e.chats[cb.key]; ok { // a concurrent request of the chat kept its own
		e.bytes -= e.order.Remove(el).(*chatBytes).size
	}
	e.chats[cb.key] = e.order.PushFront(cb)
	e.bytes += cb.size
	for e.order.Len() > maxEncodedChats || e.bytes > maxEncodedBytes {
		old := e.order.Remove(e.order.Back()).(*chatBytes)
		delete(e.chats, old.key)
		e.bytes -= old.size
	}
}

// toolList returns the encoded tool list, shared by every request that
// carries the same specs. The chat's last list (last) is checked first:
// its specs share their texts with the chat's, so comparing them costs
// little, where hashing reads every schema.
func (e *encoder) toolList(last *toolBytes, specs []chat.ToolSpec) (*toolBytes, error) {
	if last != nil && slices.EqualFunc(last.specs, specs, sameSpec) {
		return last, nil
	}
	var h maphash.Hash
	h.SetSeed(e.seed)
	for _, sp := range specs {
		h.WriteString(sp.Name)
		h.WriteByte(0)
		h.WriteString(sp.Description)
		h.WriteByte(0)
		h.Write(sp.Parameters)
		h.WriteByte(0)
	}
	sum := h.Sum64()
	e.mu.Lock()
	for _, tb := range e.tools[sum] {
		if slices.EqualFunc(tb.specs, specs, sameSpec) {
			e.mu.Unlock()
			return tb, nil
		}
	}
	e.mu.Unlock()
	enc, err := encodeTools(specs)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.tools) >= maxToolLists {
		clear(e.tools)
	}
	tb := &toolBytes{specs: slices.Clone(specs), enc: enc}
	e.tools[sum] = append(e.tools[sum], tb)
	return tb, nil
}

func sameSpec(a, b chat.ToolSpec) bool {
	return a.Name == b.Name && a.Description == b.Description && bytes.Equal(a.Parameters, b.Parameters)
}

// wire shapes of Chat Completions (https://platform.openai.com/docs/api-reference/chat/create).
type (
	wireMessage struct {
		Role       string     `json:"role"`
		Content    any        `json:"content,omitempty"`
		ToolCalls  []wireCall `json:"tool_calls,omitempty"`
		ToolCallID string     `json:"tool_call_id,omitempty"`
	}
	wireCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function wireFunction `json:"function"`
	}
	wireFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	wirePart struct {
		Type     string   `json:"type"`
		Text     string   `json:"text,omitempty"`
		ImageURL *wireURL `json:"image_url,omitempty"`
	}
	wireURL struct {
		URL string `json:"url"`
	}
	wireTool struct {
		Type     string           `json:"type"`
		Function wireToolFunction `json:"function"`
	}
	wireToolFunction struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	// wireTail is the body's fields after the messages and tools.
	wireTail struct {
		MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
		MaxTokens           int             `json:"max_tokens,omitempty"`
		StreamOptions       *wireStreamOpts `json:"stream_options,omitempty"`
		Temperature         *float64        `json:"temperature,omitempty"`
		TopP                *float64        `json:"top_p,omitempty"`
		Stop                []string        `json:"stop,omitempty"`
		ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
		PromptCacheKey      string          `json:"prompt_cache_key,omitempty"`
		CachePrompt         bool            `json:"cache_prompt,omitempty"`
		IDSlot              *int64          `json:"id_slot,omitempty"`
		ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	}
	wireStreamOpts struct {
		IncludeUsage bool `json:"include_usage"`
	}
)

// encodeJSON is json.Marshal without HTML escaping: the model reads the
// text as it was written.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	en := json.NewEncoder(&b)
	en.SetEscapeHTML(false)
	if err := en.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// appendFields appends t's fields as encodeJSON writes them, each after a
// comma, by hand: reflection over them cost about as much as the rest of a
// next turn's body (BenchmarkBodyNextTurn).
func (t *wireTail) appendFields(b []byte) ([]byte, error) {
	if t.MaxCompletionTokens != 0 {
		b = strconv.AppendInt(append(b, `,"max_completion_tokens":`...), int64(t.MaxCompletionTokens), 10)
	}
	if t.MaxTokens != 0 {
		b = strconv.AppendInt(append(b, `,"max_tokens":`...), int64(t.MaxTokens), 10)
	}
	if t.StreamOptions != nil {
		b = strconv.AppendBool(append(b, `,"stream_options":{"include_usage":`...), t.StreamOptions.IncludeUsage)
		b = append(b, '}')
	}
	var err error
	if t.Temperature != nil {
		if b, err = appendJSONFloat(append(b, `,"temperature":`...), *t.Temperature); err != nil {
			return nil, err
		}
	}
	if t.TopP != nil {
		if b, err = appendJSONFloat(append(b, `,"top_p":`...), *t.TopP); err != nil {
			return nil, err
		}
	}
	if len(t.Stop) > 0 {
		sep := byte('[')
		b = append(b, `,"stop":`...)
		for _, s := range t.Stop {
			b, sep = append(b, sep), ','
			if b, err = appendJSONString(b, s); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if t.ReasoningEffort != "" {
		if b, err = appendJSONString(append(b, `,"reasoning_effort":`...), t.ReasoningEffort); err != nil {
			return nil, err
		}
	}
	if t.PromptCacheKey != "" {
		if b, err = appendJSONString(append(b, `,"prompt_cache_key":`...), t.PromptCacheKey); err != nil {
			return nil, err
		}
	}
	if t.CachePrompt {
		b = append(b, `,"cache_prompt":true`...)
	}
	if t.IDSlot != nil {
		b = strconv.AppendInt(append(b, `,"id_slot":`...), *t.IDSlot, 10)
	}
	if t.ParallelToolCalls != nil {
		b = strconv.AppendBool(append(b, `,"parallel_tool_calls":`...), *t.ParallelToolCalls)
	}
	return b, nil
}

// appendJSONString appends s quoted as encodeJSON writes it: as it is when
// nothing in it needs escaping (printable ASCII, no quote or backslash),
// else by encodeJSON.
func appendJSONString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			enc, err := encodeJSON(s)
			return append(b, enc...), err
		}
	}
	return append(append(append(b, '"'), s...), '"'), nil
}

// appendJSONFloat appends f as encodeJSON writes it. A setting (a
// temperature, top_p) is rare enough that its encoding is not hand-written.
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	enc, err := encodeJSON(f)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

func encodeTools(specs []chat.ToolSpec) ([]byte, error) {
	out := make([]wireTool, len(specs))
	for i, t := range specs {
		p := bytes.TrimSpace(t.Parameters)
		if len(p) > 0 && (p[0] != '{' || !json.Valid(p)) {
			return nil, fmt.Errorf("tool %s: parameters are not a JSON object", t.Name)
		}
		out[i] = wireTool{Type: "function", Function: wireToolFunction{Name: t.Name, Description: t.Description, Parameters: json.RawMessage(p)}}
	}
	return encodeJSON(out)
}

// body appends req's JSON body to dst: stream first (the SDK sets it again
// and finds it at once), then the model, messages, tools and the rest.
func (c *Client) body(dst []byte, req providers.Request) ([]byte, error) {
	prev := c.enc.take(req.CacheKey)
	cb, err := c.messages(prev, req.CacheKey, req.System, req.Messages)
	if prev != nil {
		records.Put(prev.msgs) // read for the last time: cb has what it reuses
	}
	if err != nil {
		return nil, err
	}
	var tools []byte
	if len(req.Tools) > 0 {
		var last *toolBytes
		if prev != nil {
			last = prev.tools
		}
		if cb.tools, err = c.enc.toolList(last, req.Tools); err != nil {
			return nil, err
		}
		tools = cb.tools.enc
	}
	b := slices.Grow(dst, 256+len(req.Model)+len(cb.joined)+len(tools))
	b, err = appendJSONString(append(b, `{"stream":true,"model":`...), req.Model)
	if err != nil {
		return nil, err
	}
	b = append(append(append(b, `,"messages":[`...), cb.joined...), ']')
	if tools != nil {
		b = append(append(b, `,"tools":`...), tools...)
	}
	t := c.tail(req)
	if b, err = t.appendFields(b); err != nil {
		return nil, err
	}
	c.enc.keep(cb)
	return append(b, '}'), nil
}

// tail is the body's last fields: the answer room, usage reporting, the
// chat's settings and the cache hints.
func (c *Client) tail(req providers.Request) wireTail {
	var t wireTail
	if req.MaxTokens > 0 {
		if c.co.maxCompletion {
			t.MaxCompletionTokens = req.MaxTokens
		} else {
			t.MaxTokens = req.MaxTokens
		}
	}
	if !c.co.noStreamOptions {
		t.StreamOptions = &wireStreamOpts{IncludeUsage: true}
	}
	s := req.Settings
	t.Temperature, t.TopP, t.Stop, t.ReasoningEffort = s.Temperature, s.TopP, s.Stop, s.ReasoningEffort
	if s.OneToolCall() && len(req.Tools) > 0 { // OpenAI refuses it without tools
		t.ParallelToolCalls = new(false)
	}
	c.cacheHints(&t, req.CacheKey)
	return t
}

// cacheHints asks the server to keep this chat's prefix: OpenAI routes
// requests with one prompt_cache_key to the same cache; llama.cpp reuses a
// slot's evaluated prompt (cache_prompt), and with several slots a chat
// keeps its own (id_slot by the key's hash), so chats do not evict each
// other's prefix. A busy slot makes its chat wait rather than move.
func (c *Client) cacheHints(t *wireTail, key string) {
	if key != "" && c.co.promptCacheKey {
		t.PromptCacheKey = key
	}
	if !c.co.llamaCache {
		return
	}
	t.CachePrompt = true
	if n := c.slots.Load(); n > 1 && key != "" {
		h := fnv.New64a()
		_, _ = h.Write([]byte(key))
		slot := int64(h.Sum64() % uint64(n))
		t.IDSlot = &slot
	}
}

// messages encodes the wire messages: the system prompt first, then the
// stored log in order. A message the chat's last request (prev) carried
// unchanged keeps its bytes; the rest are encoded now. It returns what to
// keep for the chat's next request, its joined bytes the body's messages.
func (c *Client) messages(prev *chatBytes, key, system string, log []chat.Message) (*chatBytes, error) {
	cb := &chatBytes{key: key, system: system, log: log}
	from := prev.extendedBy(system, log)
	var old []msgBytes
	switch {
	case from > 0:
		// prev's settled messages are log's first ones, joined already:
		// its arrays become cb's, the records after them copied out first
		// (cb's appends overwrite them).
		old = slices.Clone(prev.msgs[from:])
		cb.sysEnc, cb.msgs, cb.joined = prev.sysEnc, prev.msgs[:from], prev.joined[:prev.msgs[from-1].end]
		prev.msgs = nil
	case prev != nil:
		old, cb.msgs, cb.joined = prev.msgs, records.Get(len(log)), prev.joined[:0] // prev's records point elsewhere
	default:
		cb.msgs = records.Get(len(log))
	}
	if from == 0 && system != "" {
		if prev != nil && prev.system == system {
			cb.sysEnc = prev.sysEnc
		} else {
			enc, err := encodeJSON(wireMessage{Role: "system", Content: system})
			if err != nil {
				return nil, err
			}
			cb.sysEnc = enc
		}
		cb.joined = append(cb.joined, cb.sysEnc...)
	}
	add := func(enc []byte) {
		if len(cb.joined) > 0 {
			cb.joined = append(cb.joined, ',')
		}
		cb.joined = append(cb.joined, enc...)
	}
	tail := log[from:]
	replay := c.replayMask(tail) // tail starts a turn: a person's message, or the log's start
	// Tool messages carry text only on this protocol: pictures a tool
	// returned follow the run of results as one user message.
	var pictures []chat.Image
	flush := func() error {
		if len(pictures) == 0 {
			return nil
		}
		enc, err := encodeJSON(userMessage(chat.Message{Content: "Pictures the tools above returned:", Images: pictures}))
		add(enc)
		pictures = nil
		return err
	}
	// With thinking sent back only on turns that call tools, a message's
	// bytes settle when the next person's message closes its turn.
	byTurn := c.co.replayField != "" && c.co.replayToolTurnsOnly
	settled, images := from+len(tail), false
	if byTurn {
		settled = from
	}
	for i := range tail {
		m := &tail[i] // not a copy: a request carries every kept message
		if m.Role != chat.RoleTool {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		if m.Role == chat.RoleTool {
			pictures = append(pictures, m.Images...)
		}
		if m.Role == chat.RoleUser && byTurn {
			settled = from + i
		}
		// Both logs run in seq order: skip what the chat no longer sends.
		for len(old) > 0 && old[0].seq < m.Seq {
			old = old[1:]
		}
		var enc []byte
		j := 0 // the first of old with this seq whose bytes are m's
		for j < len(old) && old[j].seq == m.Seq && !sameMsg(&old[j], m, replay[i]) {
			j++
		}
		if j < len(old) && old[j].seq == m.Seq {
			enc, old = old[j].enc, old[j+1:]
		} else {
			var err error
			if enc, err = c.encodeMessage(*m, replay[i]); err != nil {
				return nil, err
			}
		}
		add(enc)
		if len(m.Images) > 0 {
			images = true
			continue
		}
		cb.msgs = append(cb.msgs, msgBytes{seq: m.Seq, role: m.Role, content: m.Content, toolCallID: m.ToolCallID, thinking: m.Thinking,
			calls: m.ToolCalls, replay: replay[i], enc: enc, end: len(cb.joined)})
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if !images {
		cb.settled = settled
	}
	// Each message's bytes are held twice: on their own and joined.
	cb.size = 2 * len(cb.joined)
	return cb, nil
}

// extendedBy is how many of log's first messages cb's joined bytes hold
// as the body lists them after system: its settled ones when log extends
// cb's log in the same array (0: none). A log's array is never written
// below the length of a request handed out (providers.Request.Messages),
// so those messages are cb's, unchanged.
func (cb *chatBytes) extendedBy(system string, log []chat.Message) int {
	if cb == nil || cb.settled == 0 || cb.system != system || len(log) < cb.settled || &log[0] != &cb.log[0] {
		return 0
	}
	return cb.settled
}

// sameMsg: o's bytes are what m encodes to now.
func sameMsg(o *msgBytes, m *chat.Message, replay bool) bool {
	return len(m.Images) == 0 && o.seq == m.Seq && o.role == m.Role && o.content == m.Content && o.toolCallID == m.ToolCallID &&
		o.replay == replay && (!replay || o.thinking == m.Thinking) &&
		slices.EqualFunc(o.calls, m.ToolCalls, func(x, y chat.ToolCall) bool {
			return x.ID == y.ID && x.Name == y.Name && x.Arguments == y.Arguments
		})
}

// encodeMessage encodes one stored message; replayThinking sends its
// thinking back in the company's field.
func (c *Client) encodeMessage(m chat.Message, replayThinking bool) ([]byte, error) {
	switch m.Role {
	case chat.RoleUser:
		return encodeJSON(userMessage(m))
	case chat.RoleTool:
		return encodeJSON(wireMessage{Role: "tool", Content: m.Content, ToolCallID: m.ToolCallID})
	case chat.RoleAssistant:
	default:
		return nil, fmt.Errorf("message seq %d: unknown role %q", m.Seq, m.Role)
	}
	w := wireMessage{Role: "assistant"}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		// Content is required unless there are tool calls; some servers
		// (DeepSeek) reject an assistant message with neither.
		w.Content = m.Content
	}
	for _, tc := range m.ToolCalls {
		args, _ := providers.ToolArguments(tc.Arguments)
		w.ToolCalls = append(w.ToolCalls, wireCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: args}})
	}
	enc, err := encodeJSON(w)
	if err != nil || !replayThinking {
		return enc, err
	}
	// Sent back verbatim in the company's own field: thinking is never
	// edited.
	field, err := encodeJSON(map[string]string{c.co.replayField: m.Thinking})
	if err != nil {
		return nil, err
	}
	return append(append(enc[:len(enc)-1:len(enc)-1], ','), field[1:]...), nil
}

func userMessage(m chat.Message) wireMessage {
	if len(m.Images) == 0 {
		return wireMessage{Role: "user", Content: m.Content}
	}
	parts := make([]wirePart, 0, len(m.Images)+1)
	if m.Content != "" {
		parts = append(parts, wirePart{Type: "text", Text: m.Content})
	}
	for _, img := range m.Images {
		parts = append(parts, wirePart{Type: "image_url", ImageURL: &wireURL{URL: "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)}})
	}
	return wireMessage{Role: "user", Content: parts}
}

// openAIEfforts are the reasoning efforts Chat Completions names.
var openAIEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// CheckSettings: Chat Completions takes every setting agentd passes.
func (c *Client) CheckSettings(s chat.Settings) error {
	return providers.CheckEffort("the OpenAI-style protocol", s.ReasoningEffort, openAIEfforts...)
}

// replayMask says which assistant messages get their thinking sent back.
// Where the company wants it only for turns that called tools (DeepSeek:
// "between two user messages, if the model performed a tool call, the
// intermediate assistant's reasoning_content must participate"; older
// deepseek-reasoner refused it otherwise), a turn is the run of messages
// between two user messages.
func (c *Client) replayMask(log []chat.Message) []bool {
	mask := make([]bool, len(log))
	if c.co.replayField == "" {
		return mask
	}
	start := 0
	for i := 0; i <= len(log); i++ {
		if i < len(log) && log[i].Role != chat.RoleUser {
			continue
		}
		// log[start:i] is one turn's model side.
		called := false
		for _, m := range log[start:i] {
			if len(m.ToolCalls) > 0 {
				called = true
			}
		}
		for j := start; j < i; j++ {
			mask[j] = log[j].Role == chat.RoleAssistant && log[j].Thinking != "" && (called || !c.co.replayToolTurnsOnly)
		}
		start = i + 1
	}
	return mask
}
