package anthropicfake

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
)

// The request body of POST /v1/messages, as documented at
// https://docs.anthropic.com/en/api/messages. system and content may be a
// string or an array of blocks, so they stay raw until read.
type wireRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []wireMessage   `json:"messages"`
	Tools     []wireTool      `json:"tools"`
	Stream    bool            `json:"stream"`
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Source    *wireSource     `json:"source,omitempty"`
	// CacheControl marks a prompt-cache breakpoint ({"type":"ephemeral"}).
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type cacheControl struct {
	Type string `json:"type"`
}

type wireSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

type wireTool struct {
	Type         string          `json:"type,omitempty"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

// parsed is a request read into neutral form plus what the fake checks.
type parsed struct {
	wire     wireRequest
	received testkit.Received
	// problem is a 400 message the real API would answer with, "" if none.
	problem string
	// blocks is the prompt in the order the prompt cache reads it: tools,
	// system, messages, each content block one block.
	blocks []testkit.Block
}

// parseRequest reads a Messages request. A body that is not JSON is an
// error; a request the real API refuses for its shape sets problem.
func parseRequest(raw []byte) (parsed, error) {
	var p parsed
	if err := json.Unmarshal(raw, &p.wire); err != nil {
		return p, fmt.Errorf("decode request: %w", err)
	}
	r := &p.received
	r.Raw = append([]byte(nil), raw...)
	r.Model = p.wire.Model
	r.MaxTokens = p.wire.MaxTokens
	sys, err := textOf(p.wire.System)
	if err != nil {
		return p, fmt.Errorf("system: %w", err)
	}
	r.System = sys
	r.InputTokens = count(sys)
	for _, t := range p.wire.Tools {
		r.Tools = append(r.Tools, t.Name)
		n := count(t.Name) + count(t.Description) + count(string(t.InputSchema))
		r.InputTokens += n
		p.blocks = append(p.blocks, testkit.Block{Text: "tool\x00" + t.Name + "\x00" + t.Description + "\x00" + string(t.InputSchema), Tokens: n, Breakpoint: t.CacheControl != nil})
	}
	sysBlocks, _ := blocksOf(p.wire.System)
	for _, b := range sysBlocks {
		p.blocks = append(p.blocks, cacheBlock("system", b))
	}
	var prevToolUse []string
	for i, m := range p.wire.Messages {
		blocks, err := blocksOf(m.Content)
		if err != nil {
			return p, fmt.Errorf("messages.%d: %w", i, err)
		}
		if p.problem == "" {
			p.problem = checkOrder(i, m.Role, blocks, prevToolUse)
		}
		if p.problem == "" {
			p.problem = checkSignatures(i, blocks)
		}
		prevToolUse = prevToolUse[:0]
		for _, b := range blocks {
			p.blocks = append(p.blocks, cacheBlock(m.Role, b))
			if b.Type == "tool_use" {
				prevToolUse = append(prevToolUse, b.ID)
			}
		}
		msgs, tokens, err := neutral(m.Role, blocks)
		if err != nil {
			return p, fmt.Errorf("messages.%d: %w", i, err)
		}
		r.Messages = append(r.Messages, msgs...)
		r.InputTokens += tokens
	}
	marks := 0
	for _, b := range p.blocks {
		if b.Breakpoint {
			marks++
		}
	}
	if p.problem == "" && marks > testkit.AnthropicMaxBreakpoints {
		// Wording of the real refusal (see SOURCES.md).
		p.problem = fmt.Sprintf("A maximum of %d blocks with cache_control may be provided. Found %d.", testkit.AnthropicMaxBreakpoints, marks)
	}
	if p.problem == "" && p.wire.MaxTokens <= 0 {
		// Wording of the real refusal for a missing max_tokens.
		p.problem = "max_tokens: Field required"
	}
	return p, nil
}

// cacheBlock is one content block as the prompt cache sees it, counted as
// the input count counts it.
func cacheBlock(role string, b wireBlock) testkit.Block {
	text := b.Text + b.Thinking + b.Data
	if b.Type == "tool_use" {
		text = b.Name + "\x00" + compact(b.Input)
	}
	if b.Type == "tool_result" {
		text, _ = textOf(b.Content)
	}
	tokens := count(text)
	if b.Type == "tool_use" {
		tokens = count(b.Name) + count(compact(b.Input))
	}
	return testkit.Block{Text: role + "\x00" + b.Type + "\x00" + b.ID + b.ToolUseID + "\x00" + text, Tokens: tokens, Breakpoint: b.CacheControl != nil}
}

// checkOrder enforces the tool_use / tool_result pairing the real API
// enforces, with its wording (see SOURCES.md).
func checkOrder(i int, role string, blocks []wireBlock, prevToolUse []string) string {
	results := map[string]bool{}
	for _, b := range blocks {
		if b.Type == "tool_result" {
			results[b.ToolUseID] = true
		}
	}
	var missing []string
	for _, id := range prevToolUse {
		if !results[id] || role != "user" {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i-1, strings.Join(missing, ", "))
	}
	asked := map[string]bool{}
	for _, id := range prevToolUse {
		asked[id] = true
	}
	for j, b := range blocks {
		if b.Type == "tool_result" && !asked[b.ToolUseID] {
			return fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
		}
	}
	return ""
}

// checkSignatures refuses a thinking block whose signature is not the one
// this fake gave its text, as the real API refuses edited thinking
// (anthropics/claude-code#10627).
func checkSignatures(i int, blocks []wireBlock) string {
	for j, b := range blocks {
		if b.Type == "thinking" && b.Signature != Sign(b.Thinking) {
			return fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
		}
	}
	return ""
}

// neutral turns one wire message into chat messages: tool results become
// tool messages (they lead the user message, as the API requires), the rest
// one user or assistant message. It also counts the message's input tokens.
func neutral(role string, blocks []wireBlock) ([]chat.Message, int, error) {
	var out []chat.Message
	m := chat.Message{Role: chat.Role(role)}
	var texts []string
	tokens := 0
	for _, b := range blocks {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
			tokens += count(b.Text)
		case "thinking":
			m.Thinking += b.Thinking
			m.ThinkingSignature = b.Signature
			tokens += count(b.Thinking)
		case "redacted_thinking":
			tokens += count(b.Data)
		case "tool_use":
			args := compact(b.Input)
			m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
			tokens += count(b.Name) + count(args)
		case "tool_result":
			text, err := textOf(b.Content)
			if err != nil {
				return nil, 0, fmt.Errorf("tool_result %s: %w", b.ToolUseID, err)
			}
			out = append(out, chat.Message{Role: chat.RoleTool, ToolCallID: b.ToolUseID, Content: text, IsError: b.IsError})
			tokens += count(text)
		case "image":
			img, err := imageOf(b.Source)
			if err != nil {
				return nil, 0, err
			}
			// Images are not text; the neutral count leaves them out.
			m.Images = append(m.Images, img)
		default:
			return nil, 0, fmt.Errorf("unsupported content block type %q", b.Type)
		}
	}
	m.Content = strings.Join(texts, "\n")
	if m.Content != "" || m.Thinking != "" || len(m.ToolCalls) > 0 || len(m.Images) > 0 || len(out) == 0 {
		out = append(out, m)
	}
	return out, tokens, nil
}

func imageOf(s *wireSource) (chat.Image, error) {
	if s == nil || s.Type != "base64" {
		return chat.Image{}, fmt.Errorf("image: only base64 sources are faked")
	}
	data, err := base64.StdEncoding.DecodeString(s.Data)
	if err != nil {
		return chat.Image{}, fmt.Errorf("image: %w", err)
	}
	return chat.Image{MediaType: s.MediaType, Data: data}, nil
}

// blocksOf reads content that is a string or an array of blocks.
func blocksOf(raw json.RawMessage) ([]wireBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []wireBlock{{Type: "text", Text: s}}, nil
	}
	var bs []wireBlock
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, err
	}
	return bs, nil
}

// textOf joins the text of a string-or-blocks field.
func textOf(raw json.RawMessage) (string, error) {
	bs, err := blocksOf(raw)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n"), nil
}

func compact(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

func count(s string) int {
	if s == "" {
		return 0
	}
	return testkit.CountTokens(s)
}
