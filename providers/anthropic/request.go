package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// params turns a providers.Request into the Messages request body.
func (c *Client) params(req providers.Request) (anthropic.MessageNewParams, error) {
	if req.Model == "" {
		return anthropic.MessageNewParams{}, ErrNoModel
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = c.cfg.MaxTokens
	}
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: int64(maxTokens),
		Thinking:  c.thinking(maxTokens),
	}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		tool, err := toolParam(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, tool)
	}
	if req.Settings.OneToolCall() && len(p.Tools) > 0 { // tool_choice needs tools
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{DisableParallelToolUse: anthropic.Bool(true)}}
	}
	msgs, err := messages(req.Model, req.Messages)
	if err != nil {
		return p, err
	}
	p.Messages = msgs
	cacheBreakpoints(&p)
	p.StopSequences = req.Settings.Stop
	if e := req.Settings.ReasoningEffort; e != "" {
		p.OutputConfig.Effort = anthropic.OutputConfigEffort(e)
	}
	return p, c.CheckSettings(req.Settings)
}

// cacheBreakpoints marks the stable parts of a request for the prompt
// cache, at most four as the API allows: the tools, the system prompt, the
// first message (it carries the summary frame, which changes only at a
// fold) and the newest message (the next request repeats all of this one).
// The API reads the longest prefix written earlier, looking back 20 blocks
// from each mark, so the mark on the newest message finds the one of the
// request before it.
func cacheBreakpoints(p *anthropic.MessageNewParams) {
	mark := func(cc *anthropic.CacheControlEphemeralParam) {
		if cc != nil {
			*cc = anthropic.NewCacheControlEphemeralParam()
		}
	}
	if n := len(p.Tools); n > 0 {
		mark(p.Tools[n-1].GetCacheControl())
	}
	if n := len(p.System); n > 0 {
		mark(&p.System[n-1].CacheControl)
	}
	markLast := func(m *anthropic.MessageParam) {
		var content []anthropic.ContentBlockParamUnion
		switch {
		case m.OfUser != nil:
			content = m.OfUser.Content
		case m.OfAssistant != nil:
			content = m.OfAssistant.Content
		}
		for i := len(content) - 1; i >= 0; i-- {
			if cc := content[i].GetCacheControl(); cc != nil {
				mark(cc) // thinking blocks take no mark: the one before them does
				return
			}
		}
	}
	if n := len(p.Messages); n > 0 {
		markLast(&p.Messages[0])
		if n > 1 {
			markLast(&p.Messages[n-1])
		}
	}
}

// anthropicEfforts are the efforts output_config.effort names.
var anthropicEfforts = []string{"low", "medium", "high", "xhigh", "max"}

// CheckSettings refuses what the Messages API has no field for: its newer
// models refuse sampling settings ("temperature is deprecated for this
// model"), and the SDK agentd speaks it with has no temperature or top_p.
func (c *Client) CheckSettings(s chat.Settings) error {
	switch {
	case s.Temperature != nil:
		return chat.RefuseSetting("temperature", "the Anthropic protocol takes no temperature")
	case s.TopP != nil:
		return chat.RefuseSetting("top_p", "the Anthropic protocol takes no top_p")
	}
	return providers.CheckEffort("the Anthropic protocol", s.ReasoningEffort, anthropicEfforts...)
}

// thinking builds the thinking setting; budget_tokens must stay below
// max_tokens ("`max_tokens` must be greater than `thinking.budget_tokens`",
// ProfSynapse/nexus#17), so a shrunk answer room shrinks the budget too.
func (c *Client) thinking(maxTokens int) anthropic.ThinkingConfigParamUnion {
	switch c.cfg.Thinking {
	case ThinkingAdaptive:
		return anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{}}
	case ThinkingEnabled:
		budget := c.cfg.ThinkingBudget
		if budget >= maxTokens {
			budget = maxTokens / 2
		}
		if budget < minThinkingBudget {
			return anthropic.ThinkingConfigParamUnion{}
		}
		return anthropic.ThinkingConfigParamUnion{OfEnabled: &anthropic.ThinkingConfigEnabledParam{BudgetTokens: int64(budget)}}
	}
	return anthropic.ThinkingConfigParamUnion{}
}

// toolParam describes a tool; the JSON schema's properties and required go
// in their own fields, every other keyword rides along unchanged.
func toolParam(t chat.ToolSpec) (anthropic.ToolUnionParam, error) {
	schema := anthropic.ToolInputSchemaParam{Properties: map[string]any{}}
	if len(bytes.TrimSpace(t.Parameters)) > 0 {
		var m map[string]any
		if err := json.Unmarshal(t.Parameters, &m); err != nil {
			return anthropic.ToolUnionParam{}, fmt.Errorf("tool %s: parameters are not a JSON object: %w", t.Name, err)
		}
		for k, v := range m {
			switch k {
			case "type":
				// Always "object"; the SDK writes it.
			case "properties":
				schema.Properties = v
			case "required":
				req, err := stringList(v)
				if err != nil {
					return anthropic.ToolUnionParam{}, fmt.Errorf("tool %s: required: %w", t.Name, err)
				}
				schema.Required = req
			default:
				if schema.ExtraFields == nil {
					schema.ExtraFields = map[string]any{}
				}
				schema.ExtraFields[k] = v
			}
		}
	}
	tool := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
	if t.Description != "" {
		tool.Description = anthropic.String(t.Description)
	}
	return anthropic.ToolUnionParam{OfTool: &tool}, nil
}

func stringList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("not an array")
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("not an array of strings")
		}
		out = append(out, s)
	}
	return out, nil
}

// turn is one wire message being assembled.
type turn struct {
	role   chat.Role // RoleUser or RoleAssistant
	blocks []anthropic.ContentBlockParamUnion
}

// messages builds the wire messages. Tool results become tool_result
// blocks of a user message; consecutive messages of one side merge into
// one wire message, so a run of tool results (and any user text after them)
// answers the assistant's tool_use blocks in the very next message, as the
// API requires. Messages with nothing to send are left out.
func messages(model string, log []chat.Message) ([]anthropic.MessageParam, error) {
	var turns []turn
	add := func(role chat.Role, blocks []anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].role == role {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, turn{role: role, blocks: blocks})
	}
	for _, m := range log {
		switch m.Role {
		case chat.RoleUser:
			add(chat.RoleUser, userBlocks(m))
		case chat.RoleTool:
			add(chat.RoleUser, []anthropic.ContentBlockParamUnion{toolResult(m)})
		case chat.RoleAssistant:
			blocks, err := assistantBlocks(model, m)
			if err != nil {
				return nil, err
			}
			add(chat.RoleAssistant, blocks)
		default:
			return nil, fmt.Errorf("message seq %d: unknown role %q", m.Seq, m.Role)
		}
	}
	out := make([]anthropic.MessageParam, 0, len(turns))
	for _, t := range turns {
		if t.role == chat.RoleAssistant {
			out = append(out, anthropic.NewAssistantMessage(t.blocks...))
		} else {
			out = append(out, anthropic.NewUserMessage(t.blocks...))
		}
	}
	return out, nil
}

// userBlocks: the text, then each image as a base64 image block. The API
// refuses empty text blocks, so empty text is left out.
func userBlocks(m chat.Message) []anthropic.ContentBlockParamUnion {
	var bs []anthropic.ContentBlockParamUnion
	if m.Content != "" {
		bs = append(bs, anthropic.NewTextBlock(m.Content))
	}
	for _, img := range m.Images {
		bs = append(bs, anthropic.NewImageBlockBase64(img.MediaType, base64.StdEncoding.EncodeToString(img.Data)))
	}
	return bs
}

// toolResult answers one tool_use block; images a tool returned ride in
// the result, as the API allows.
func toolResult(m chat.Message) anthropic.ContentBlockParamUnion {
	r := anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
	if m.Content != "" {
		r.Content = append(r.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: m.Content}})
	}
	for _, img := range m.Images {
		src := anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
			Data: base64.StdEncoding.EncodeToString(img.Data), MediaType: anthropic.Base64ImageSourceMediaType(img.MediaType)}}
		r.Content = append(r.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: &anthropic.ImageBlockParam{Source: src}})
	}
	if m.IsError {
		r.IsError = anthropic.Bool(true)
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: &r}
}

// assistantBlocks: thinking first (the API wants it to lead), then text,
// then the tool calls.
func assistantBlocks(model string, m chat.Message) ([]anthropic.ContentBlockParamUnion, error) {
	var bs []anthropic.ContentBlockParamUnion
	if sameModel(model, m.Model) {
		thinking, err := decodeThinking(m.Thinking, m.ThinkingSignature)
		if err != nil {
			return nil, fmt.Errorf("message seq %d: %w", m.Seq, err)
		}
		for _, t := range thinking {
			bs = append(bs, t.param())
		}
	}
	if m.Content != "" {
		bs = append(bs, anthropic.NewTextBlock(m.Content))
	}
	for _, call := range m.ToolCalls {
		input, _ := providers.ToolArguments(call.Arguments)
		bs = append(bs, anthropic.NewToolUseBlock(call.ID, json.RawMessage(input), call.Name))
	}
	return bs, nil
}

// sameModel says whether a stored message was written by the model being
// asked; an unnamed writer is taken to be it.
func sameModel(model, writer string) bool {
	return writer == "" || writer == model || strings.HasSuffix(writer, "/"+model)
}
