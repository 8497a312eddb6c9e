package openai

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// params turns a providers.Request into the wire body.
func (c *Client) params(req providers.Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(req.Model)}
	msgs, err := c.messages(req.System, req.Messages)
	if err != nil {
		return p, err
	}
	p.Messages = msgs
	for _, t := range req.Tools {
		tool, err := functionTool(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, tool)
	}
	if req.MaxTokens > 0 {
		if c.co.maxCompletion {
			p.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
		} else {
			p.MaxTokens = openai.Int(int64(req.MaxTokens))
		}
	}
	if !c.co.noStreamOptions {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	applySettings(&p, req.Settings)
	c.cacheHints(&p, req.CacheKey)
	return p, nil
}

// cacheHints asks the server to keep this chat's prefix: OpenAI routes
// requests with one prompt_cache_key to the same cache; llama.cpp reuses a
// slot's evaluated prompt (cache_prompt), and with several slots a chat
// keeps its own (id_slot by the key's hash), so chats do not evict each
// other's prefix. A busy slot makes its chat wait rather than move.
func (c *Client) cacheHints(p *openai.ChatCompletionNewParams, key string) {
	if key != "" && c.co.promptCacheKey {
		p.PromptCacheKey = openai.String(key)
	}
	if !c.co.llamaCache {
		return
	}
	extra := map[string]any{"cache_prompt": true}
	if n := c.slots.Load(); n > 1 && key != "" {
		h := fnv.New64a()
		_, _ = h.Write([]byte(key))
		extra["id_slot"] = int64(h.Sum64() % uint64(n))
	}
	p.SetExtraFields(extra)
}

// openAIEfforts are the reasoning efforts Chat Completions names.
var openAIEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// CheckSettings: Chat Completions takes every setting agentd passes.
func (c *Client) CheckSettings(s chat.Settings) error {
	return providers.CheckEffort("the OpenAI-style protocol", s.ReasoningEffort, openAIEfforts...)
}

func applySettings(p *openai.ChatCompletionNewParams, s chat.Settings) {
	if s.Temperature != nil {
		p.Temperature = openai.Float(*s.Temperature)
	}
	if s.TopP != nil {
		p.TopP = openai.Float(*s.TopP)
	}
	if len(s.Stop) > 0 {
		p.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: s.Stop}
	}
	if s.ReasoningEffort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(s.ReasoningEffort)
	}
}

func functionTool(t chat.ToolSpec) (openai.ChatCompletionToolUnionParam, error) {
	def := shared.FunctionDefinitionParam{Name: t.Name}
	if t.Description != "" {
		def.Description = openai.String(t.Description)
	}
	if len(t.Parameters) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(t.Parameters, &schema); err != nil {
			return openai.ChatCompletionToolUnionParam{}, fmt.Errorf("tool %s: parameters are not a JSON object: %w", t.Name, err)
		}
		def.Parameters = shared.FunctionParameters(schema)
	}
	return openai.ChatCompletionFunctionTool(def), nil
}

// messages builds the wire messages: the system prompt first, then the
// stored log in order.
func (c *Client) messages(system string, log []chat.Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(log)+1)
	if system != "" {
		out = append(out, openai.SystemMessage(system))
	}
	replay := c.replayMask(log)
	// Tool messages carry text only on this protocol: pictures a tool
	// returned follow the run of results as one user message.
	var pictures []chat.Image
	flush := func() {
		if len(pictures) > 0 {
			out = append(out, userMessage(chat.Message{Content: "Pictures the tools above returned:", Images: pictures}))
			pictures = nil
		}
	}
	for i, m := range log {
		if m.Role != chat.RoleTool {
			flush()
		}
		switch m.Role {
		case chat.RoleUser:
			out = append(out, userMessage(m))
		case chat.RoleAssistant:
			out = append(out, c.assistantMessage(m, replay[i]))
		case chat.RoleTool:
			out = append(out, openai.ToolMessage(m.Content, m.ToolCallID))
			pictures = append(pictures, m.Images...)
		default:
			return nil, fmt.Errorf("message seq %d: unknown role %q", m.Seq, m.Role)
		}
	}
	flush()
	return out, nil
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

func userMessage(m chat.Message) openai.ChatCompletionMessageParamUnion {
	if len(m.Images) == 0 {
		return openai.UserMessage(m.Content)
	}
	parts := make([]openai.ChatCompletionContentPartUnionParam, 0, len(m.Images)+1)
	if m.Content != "" {
		parts = append(parts, openai.TextContentPart(m.Content))
	}
	for _, img := range m.Images {
		parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{
			URL: "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data),
		}))
	}
	return openai.UserMessage(parts)
}

func (c *Client) assistantMessage(m chat.Message, replayThinking bool) openai.ChatCompletionMessageParamUnion {
	a := openai.ChatCompletionAssistantMessageParam{}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		// Content is required unless there are tool calls; some servers
		// (DeepSeek) reject an assistant message with neither.
		a.Content.OfString = openai.String(m.Content)
	}
	for _, tc := range m.ToolCalls {
		a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       tc.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: tc.Arguments},
			},
		})
	}
	if replayThinking {
		// Sent back verbatim: thinking is never edited.
		a.SetExtraFields(map[string]any{c.co.replayField: m.Thinking})
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}
