package openai

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"pgregory.net/rapid"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// tb is what these helpers need of a test or a rapid draw.
type tb interface {
	Helper()
	Fatal(...any)
	Fatalf(string, ...any)
}

// sdkBody is the body the SDK's own types encode for req: the oracle the
// hand-written encoder is held to.
func sdkBody(t tb, c *Client, req providers.Request) map[string]any {
	t.Helper()
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(req.Model)}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	replay := c.replayMask(req.Messages)
	var pictures []chat.Image
	flush := func() {
		if len(pictures) > 0 {
			p.Messages = append(p.Messages, sdkUser(chat.Message{Content: "Pictures the tools above returned:", Images: pictures}))
			pictures = nil
		}
	}
	for i, m := range req.Messages {
		if m.Role != chat.RoleTool {
			flush()
		}
		switch m.Role {
		case chat.RoleUser:
			p.Messages = append(p.Messages, sdkUser(m))
		case chat.RoleTool:
			p.Messages = append(p.Messages, openai.ToolMessage(m.Content, m.ToolCallID))
			pictures = append(pictures, m.Images...)
		case chat.RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: tc.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: tc.Arguments}}})
			}
			if replay[i] {
				a.SetExtraFields(map[string]any{c.co.replayField: m.Thinking})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	flush()
	for _, sp := range req.Tools {
		def := shared.FunctionDefinitionParam{Name: sp.Name}
		if sp.Description != "" {
			def.Description = openai.String(sp.Description)
		}
		if len(sp.Parameters) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(sp.Parameters, &schema); err != nil {
				t.Fatal(err)
			}
			def.Parameters = schema
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(def))
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
	s := req.Settings
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
	var hints wireTail
	c.cacheHints(&hints, req.CacheKey)
	if hints.PromptCacheKey != "" {
		p.PromptCacheKey = openai.String(hints.PromptCacheKey)
	}
	extra := map[string]any{}
	if hints.CachePrompt {
		extra["cache_prompt"] = true
	}
	if hints.IDSlot != nil {
		extra["id_slot"] = *hints.IDSlot
	}
	if len(extra) > 0 {
		p.SetExtraFields(extra)
	}
	raw, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	out["stream"] = true // the SDK's NewStreaming sets it
	return out
}

func sdkUser(m chat.Message) openai.ChatCompletionMessageParamUnion {
	if len(m.Images) == 0 {
		return openai.UserMessage(m.Content)
	}
	var parts []openai.ChatCompletionContentPartUnionParam
	if m.Content != "" {
		parts = append(parts, openai.TextContentPart(m.Content))
	}
	for _, img := range m.Images {
		parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{
			URL: "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)}))
	}
	return openai.UserMessage(parts)
}

func decoded(t tb, b []byte) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, b)
	}
	return out
}

// drawRequest draws a chat request: every role, tool calls with and
// without text, thinking, pictures from the person and from tools,
// settings and tools.
func drawRequest(rt *rapid.T) providers.Request {
	text := rapid.StringMatching(`[a-z <>&"\\\n\x{00e9}\x{4e2d}]{0,40}`)
	req := providers.Request{Model: "gpt-test", System: text.Draw(rt, "system"), MaxTokens: rapid.IntRange(0, 9000).Draw(rt, "max"),
		CacheKey: rapid.SampledFrom([]string{"", "chat-1"}).Draw(rt, "key")}
	seq := int64(0)
	for range rapid.IntRange(1, 12).Draw(rt, "msgs") { // a request always carries the turn
		seq++
		m := chat.Message{Seq: seq, Content: text.Draw(rt, "content")}
		switch rapid.IntRange(0, 3).Draw(rt, "role") {
		case 0:
			m.Role = chat.RoleUser
		case 1, 2:
			m.Role, m.Thinking = chat.RoleAssistant, text.Draw(rt, "thinking")
			for i := range rapid.IntRange(0, 2).Draw(rt, "calls") {
				m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: fmt.Sprintf("c%d-%d", seq, i), Name: "lookup", Arguments: `{"q":` + fmt.Sprintf("%q", text.Draw(rt, "arg")) + `}`})
			}
		default:
			m.Role, m.ToolCallID, m.ToolName = chat.RoleTool, fmt.Sprintf("c%d-0", seq-1), "lookup"
		}
		if m.Role != chat.RoleAssistant && rapid.IntRange(0, 5).Draw(rt, "picture") == 0 {
			m.Images = []chat.Image{{MediaType: "image/png", Data: []byte(text.Draw(rt, "png"))}}
		}
		req.Messages = append(req.Messages, m)
	}
	if rapid.Bool().Draw(rt, "settings") {
		temp, top := 0.7, 0.9
		req.Settings = chat.Settings{Temperature: &temp, TopP: &top, Stop: []string{"END"}, ReasoningEffort: "low"}
	}
	for i := range rapid.IntRange(0, 3).Draw(rt, "tools") {
		req.Tools = append(req.Tools, chat.ToolSpec{Name: fmt.Sprintf("tool_%d", i), Description: text.Draw(rt, "desc"),
			Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)})
	}
	return req
}

// TestBodyIsTheSDKs: for every company's quirks, the body written here
// decodes to what the SDK's own types encode for the same request.
func TestBodyIsTheSDKs(t *testing.T) {
	for _, company := range []string{"openai", "deepseek", "openrouter", "mistral", "llamacpp", "generic"} {
		t.Run(company, func(t *testing.T) {
			c := newClient(t, company, "http://127.0.0.1:1/v1")
			c.slots.Store(4)
			rapid.Check(t, func(rt *rapid.T) {
				req := drawRequest(rt)
				b, err := c.body(nil, req)
				if err != nil {
					rt.Fatalf("body: %v", err)
				}
				if got, want := decoded(rt, b), sdkBody(rt, c, req); !reflect.DeepEqual(got, want) {
					rt.Fatalf("body\n%v\nthe SDK's\n%v", got, want)
				}
			})
		})
	}
}

// TestCachedBytesAreAFreshEncode: a chat's requests grow, fold, stub a
// message, change the system prompt; every body built from the bytes kept
// between them equals the body a client with nothing kept writes.
func TestCachedBytesAreAFreshEncode(t *testing.T) {
	c := newClient(t, "deepseek", "http://127.0.0.1:1/v1")
	rapid.Check(t, func(rt *rapid.T) {
		req := drawRequest(rt)
		req.CacheKey = "chat-1"
		for step := range 6 {
			bodyIsFresh(rt, c, "deepseek", req, step)
			msgs := append([]chat.Message(nil), req.Messages...)
			switch rapid.IntRange(0, 4).Draw(rt, "change") {
			case 0: // a new exchange
				next := int64(len(msgs) + 100*step + 100)
				msgs = append(msgs, chat.Message{Seq: next, Role: chat.RoleUser, Content: "more"}, chat.Message{Seq: next + 1, Role: chat.RoleAssistant, Content: "ok"})
			case 1: // a fold drops the front
				if len(msgs) > 0 {
					msgs = msgs[rapid.IntRange(0, len(msgs)).Draw(rt, "fold"):]
				}
			case 2: // a message in the middle turns into a stub, same seq
				if len(msgs) > 0 {
					i := rapid.IntRange(0, len(msgs)-1).Draw(rt, "stub")
					msgs[i].Content = "[stubbed]"
				}
			case 3:
				req.System += " and more"
			default: // the tools change
				req.Tools = append(slices.Clone(req.Tools), chat.ToolSpec{Name: fmt.Sprintf("late_%d", step)})
			}
			req.Messages = msgs
		}
	})
}

// TestGrownLogInOneArrayIsAFreshEncode: a chat's log grows in one array,
// as a session's does, by new messages of every kind (thinking, calls,
// results, pictures), and now and then folds into a new array; for every
// company's rule on sending thinking back, each body equals the body a
// client with nothing kept writes.
func TestGrownLogInOneArrayIsAFreshEncode(t *testing.T) {
	for _, company := range []string{"deepseek", "openrouter", "openai"} {
		t.Run(company, func(t *testing.T) {
			c := newClient(t, company, "http://127.0.0.1:1/v1")
			rapid.Check(t, func(rt *rapid.T) {
				req := drawRequest(rt)
				req.CacheKey = "chat-1"
				all := slices.Grow(slices.Clone(req.Messages), 64)
				n := len(all)
				for step := range 8 {
					req.Messages = all[:n:n] // each request capped, as fromWindow hands them out
					bodyIsFresh(rt, c, company, req, step)
					if rapid.IntRange(0, 5).Draw(rt, "fold") == 0 {
						all = slices.Grow(slices.Clone(all[rapid.IntRange(0, n-1).Draw(rt, "from"):n]), 64)
						n = len(all)
					}
					more := drawRequest(rt).Messages
					for i := range more {
						more[i].Seq = all[n-1].Seq + int64(i) + 1
					}
					all = append(all[:n], more...)
					n = len(all)
				}
			})
		})
	}
}

// bodyIsFresh fails rt unless c's body of req, from what c keeps, is the
// body a client of company with nothing kept writes.
func bodyIsFresh(rt *rapid.T, c *Client, company string, req providers.Request, step int) {
	fresh, err := New(Config{Company: company, BaseURL: "http://127.0.0.1:1/v1"})
	if err != nil {
		rt.Fatal(err)
	}
	got, err := c.body(nil, req)
	if err != nil {
		rt.Fatalf("body: %v", err)
	}
	want, err := fresh.body(nil, req)
	if err != nil {
		rt.Fatalf("fresh body: %v", err)
	}
	if string(got) != string(want) {
		rt.Fatalf("step %d: kept bytes give\n%s\na fresh encode\n%s", step, got, want)
	}
}

// TestNextTurnReadsOnlyItsNewMessages: a request whose log extends the
// chat's last one in the same array sends the last one's messages from
// their kept bytes, without reading them again (the array below a handed
// out length is never written, providers.Request.Messages); what is new,
// and a log in another array, is read.
func TestNextTurnReadsOnlyItsNewMessages(t *testing.T) {
	c := newClient(t, "openai", "http://127.0.0.1:1/v1")
	all := make([]chat.Message, 0, 8)
	all = append(all, chat.Message{Seq: 1, Role: chat.RoleUser, Content: "first"}, chat.Message{Seq: 2, Role: chat.RoleAssistant, Content: "one"})
	req := providers.Request{Model: "gpt-test", CacheKey: "chat-1", Messages: all[:2:2]}
	if _, err := c.body(nil, req); err != nil {
		t.Fatal(err)
	}
	all[0].Content = "written over" // what no caller does: it shows what is read
	all = append(all, chat.Message{Seq: 3, Role: chat.RoleUser, Content: "second"})
	req.Messages = all[:3:3]
	b, err := c.body(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.Contains(got, `"content":"first"`) || !strings.Contains(got, `"content":"second"`) {
		t.Errorf("the next turn's body read its kept messages again or missed its new one:\n%s", got)
	}
	req.Messages = slices.Clone(all)
	if b, err = c.body(nil, req); err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.Contains(got, `"content":"written over"`) {
		t.Errorf("a log in another array was not read:\n%s", got)
	}
}

// TestToolListSharedBetweenChats: two chats that carry equal tools get one
// encoded list, not a copy each.
func TestToolListSharedBetweenChats(t *testing.T) {
	c := newClient(t, "openai", "http://127.0.0.1:1/v1")
	specs := func() []chat.ToolSpec {
		return []chat.ToolSpec{{Name: "a", Description: "first", Parameters: json.RawMessage(`{"type":"object"}`)}, {Name: "b"}}
	}
	one, err := c.enc.toolList(nil, specs())
	if err != nil {
		t.Fatal(err)
	}
	two, err := c.enc.toolList(nil, specs())
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.SliceData(one.enc) != unsafe.SliceData(two.enc) {
		t.Errorf("equal tool lists were encoded twice")
	}
	if again, err := c.enc.toolList(one, specs()); err != nil || again != one {
		t.Errorf("the chat's own last list, unchanged, was not reused: %v", err)
	}
	other := specs()
	other[1].Description = "changed"
	three, err := c.enc.toolList(one, other)
	if err != nil {
		t.Fatal(err)
	}
	if string(three.enc) == string(one.enc) {
		t.Errorf("a changed tool list got the old bytes: %s", three.enc)
	}
	if _, err := c.enc.toolList(nil, []chat.ToolSpec{{Name: "bad", Parameters: json.RawMessage(`[1]`)}}); err == nil {
		t.Errorf("parameters that are not a JSON object were sent")
	}
}

// TestCutCallSentAsObject: a stored call whose arguments are no JSON object
// (the answer's length cut it) goes back as {}, which llama-server's chat
// template can parse (it answered such a request with a 500); a whole call's
// arguments go back as written.
func TestCutCallSentAsObject(t *testing.T) {
	c := newClient(t, "llamacpp", "http://127.0.0.1:1/v1")
	req := providers.Request{Model: "tiny", Messages: []chat.Message{
		{Seq: 1, Role: chat.RoleUser, Content: "look it up"},
		{Seq: 2, Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{
			{ID: "cut", Name: "find_tools", Arguments: "{\n\"query\":"},
			{ID: "whole", Name: "find_tools", Arguments: `{"query":"weather"}`}}},
		{Seq: 3, Role: chat.RoleTool, ToolCallID: "cut", ToolName: "find_tools", Content: "not valid JSON"},
		{Seq: 4, Role: chat.RoleTool, ToolCallID: "whole", ToolName: "find_tools", Content: "none"},
	}}
	b, err := c.body(nil, req)
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	var body struct {
		Messages []struct {
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, b)
	}
	got := map[string]string{}
	for _, m := range body.Messages {
		for _, tc := range m.ToolCalls {
			got[tc.ID] = tc.Function.Arguments
		}
	}
	if got["cut"] != "{}" || got["whole"] != `{"query":"weather"}` {
		t.Fatalf("arguments sent: %q", got)
	}
}
