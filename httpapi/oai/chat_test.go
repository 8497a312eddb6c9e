package oai_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// isTurn tells a chat turn's request from the summariser's and learner's.
func isTurn(r testkit.Received) bool {
	switch r.System {
	case summarizer.Instructions, summarizer.CondenseInstructions, learner.Instructions:
		return false
	}
	return true
}

// talker answers each turn at some length (so a small window fills), calls
// the client's weather tool when asked about weather, and summarises.
func talker(r testkit.Received) testkit.Reply {
	switch r.System {
	case learner.Instructions:
		return testkit.Reply{Text: "[]"}
	case summarizer.Instructions, summarizer.CondenseInstructions:
		return testkit.Reply{Text: "What the person wants: numbered messages answered.\nFacts to keep: none."}
	}
	last := r.Messages[len(r.Messages)-1]
	switch {
	case last.Role == chat.RoleTool:
		return testkit.Reply{Text: "The tool said " + last.Content + "."}
	case strings.Contains(last.Content, "weather") && len(r.Tools) > 0:
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: fmt.Sprintf("call_%d", len(r.Messages)), Name: "get_weather", Arguments: `{"city":"Oslo"}`}}}
	}
	f := strings.Fields(last.Content)
	return testkit.Reply{Text: "Answer to " + strings.Join(f[max(0, len(f)-2):], " ") + " " + strings.Repeat("lorem ipsum dolor sit amet ", 12)}
}

func startChat(t *testing.T, window int, tune ...func(*configs.Config)) (*daemontest.Daemon, *openaifake.Server, openai.Client) {
	t.Helper()
	fake := openaifake.New(openaifake.Options{Window: window, Script: talker})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), window)
	for _, f := range tune {
		f(&cfg)
	}
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "a", "tok-b": "b"})
	return d, fake, openai.NewClient(option.WithBaseURL(d.Server.URL+"/v1"), option.WithAPIKey("tok-a"), option.WithMaxRetries(0))
}

func words(i int) string {
	var b strings.Builder
	for k := range 50 {
		fmt.Fprintf(&b, "word%d ", (i*7+k)%97)
	}
	fmt.Fprintf(&b, "message %d.", i)
	return b.String()
}

// TestChatCompletionsGrowingHistoryIsOneFittedChat: a client re-sending its
// whole history plus one message, alternately streamed and not, continues
// one agentd chat; agentd stores each message once, and what the provider
// receives is agentd's fitted request, inside the window, while the client's
// list grows past it.
func TestChatCompletionsGrowingHistoryIsOneFittedChat(t *testing.T) {
	const window, turns = 2048, 24
	d, fake, sdk := startChat(t, window)
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse.")}
	chats := map[string]bool{}
	for i := range turns {
		msgs = append(msgs, openai.UserMessage(words(i)))
		params := openai.ChatCompletionNewParams{Model: "fake/m", Messages: msgs}
		var resp *http.Response
		var got openai.ChatCompletionMessage
		if i%2 == 0 {
			c, err := sdk.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp))
			if err != nil {
				t.Fatalf("turn %d: %v", i, err)
			}
			if c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].FinishReason != "stop" || c.Usage.PromptTokens == 0 {
				t.Fatalf("turn %d: %+v", i, c)
			}
			got = c.Choices[0].Message
		} else {
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := sdk.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&resp))
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("turn %d stream: %v", i, err)
			}
			if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "stop" || acc.Usage.PromptTokens == 0 || acc.Usage.TotalTokens != acc.Usage.PromptTokens+acc.Usage.CompletionTokens {
				t.Fatalf("turn %d stream: %+v", i, acc.ChatCompletion)
			}
			got = acc.Choices[0].Message
		}
		if !strings.HasPrefix(got.Content, fmt.Sprintf("Answer to message %d. ", i)) {
			t.Fatalf("turn %d answered %q", i, got.Content)
		}
		chats[resp.Header.Get(oai.ChatHeader)] = true
		msgs = append(msgs, got.ToParam())
	}
	if len(chats) != 1 || chats[""] {
		t.Fatalf("the growing history went to chats %v, not one", chats)
	}
	var id string
	for id = range chats {
	}
	stored, err := (&api.Client{BaseURL: d.Server.URL, Token: "tok-a"}).Transcript(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2*turns {
		t.Fatalf("the chat stored %d messages for %d turns; each message once is %d", len(stored), turns, 2*turns)
	}
	var folds, last int
	for i, r := range fake.Requests() {
		if r.InputTokens > window {
			t.Errorf("request %d holds %d tokens, over the window of %d", i, r.InputTokens, window)
		}
		if r.System == summarizer.Instructions {
			folds++
		}
		if isTurn(r) {
			last = len(r.Messages)
			if !strings.HasPrefix(r.System, "You are terse.") {
				t.Errorf("request %d: the client's system message is not the instructions sent first: %q", i, r.System[:min(40, len(r.System))])
			}
		}
	}
	if folds == 0 || last >= len(msgs)-1 {
		t.Fatalf("%d folds; the last request carried %d messages of the client's %d: not fitted", folds, last, len(msgs))
	}
}

// TestChatCompletionsClientTools: the client's tools come back as
// tool_calls exactly as OpenAI sends them, streamed and not; its role=tool
// messages answer agentd's paused turn, and the model reads them.
func TestChatCompletionsClientTools(t *testing.T) {
	_, fake, sdk := startChat(t, 32000)
	ctx := context.Background()
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Description: openai.String("The weather in a city."),
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	})}
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprint("streamed=", streamed), func(t *testing.T) {
			msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("What is the weather (%v)?", streamed))}
			// ask also checks the completion's usage: the provider's count of
			// the turn requests this completion made, and no other's.
			ask := func() openai.ChatCompletionChoice {
				before := len(fake.Requests())
				params := openai.ChatCompletionNewParams{Model: "fake/m", Messages: msgs, Tools: tools}
				var choice openai.ChatCompletionChoice
				var usage openai.CompletionUsage
				if !streamed {
					c, err := sdk.Chat.Completions.New(ctx, params)
					if err != nil {
						t.Fatal(err)
					}
					choice, usage = c.Choices[0], c.Usage
				} else {
					params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
					acc := accumulated(t, sdk.Chat.Completions.NewStreaming(ctx, params))
					choice, usage = acc.Choices[0], acc.Usage
				}
				var input int64
				for _, r := range fake.Requests()[before:] {
					if isTurn(r) {
						input += int64(r.InputTokens)
					}
				}
				if usage.PromptTokens != input || input == 0 {
					t.Errorf("usage says %d prompt tokens; this completion's requests had %d", usage.PromptTokens, input)
				}
				return choice
			}
			first := ask()
			calls := first.Message.ToolCalls
			if first.FinishReason != "tool_calls" || len(calls) != 1 || calls[0].Type != "function" || calls[0].Function.Name != "get_weather" ||
				calls[0].Function.Arguments != `{"city":"Oslo"}` || calls[0].ID == "" {
				t.Fatalf("paused answer: %+v", first)
			}
			msgs = append(msgs, first.Message.ToParam(), openai.ToolMessage("12°C and rain", calls[0].ID))
			second := ask()
			if second.FinishReason != "stop" || second.Message.Content != "The tool said 12°C and rain." {
				t.Fatalf("resumed answer: %+v", second)
			}
		})
	}
	// The provider saw the client's tool and, after the pause, its result
	// paired with the call.
	var sawResult bool
	for _, r := range fake.Requests() {
		if n := len(r.Messages); isTurn(r) && n >= 2 && r.Messages[n-1].Role == chat.RoleTool {
			sawResult = r.Messages[n-1].Content == "12°C and rain" && len(r.Messages[n-2].ToolCalls) == 1 && r.Messages[n-2].ToolCalls[0].ID == r.Messages[n-1].ToolCallID
		}
	}
	if !sawResult {
		t.Fatal("no request carried the client's tool result after its call")
	}
}

// TestChatCompletionsToolArgumentsAreChecked: a call to the client's tool
// that its schema (strict, as OpenAI's SDKs write it) does not take is not
// handed to the client: the model reads what is wrong and calls again, and
// the client gets only that call.
func TestChatCompletionsToolArgumentsAreChecked(t *testing.T) {
	var mu sync.Mutex
	var toldModel string
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		if !isTurn(r) {
			return testkit.Reply{Text: "[]"}
		}
		switch last := r.Messages[len(r.Messages)-1]; {
		case last.Role != chat.RoleTool:
			return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "call_bad", Name: "get_weather", Arguments: `{"town":"Oslo"}`}}}
		case last.ToolCallID == "call_bad":
			mu.Lock()
			toldModel = last.Content
			mu.Unlock()
			return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "call_good", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}}
		default:
			return testkit.Reply{Text: "The tool said " + last.Content + "."}
		}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), map[string]string{"tok-a": "a"})
	sdk := openai.NewClient(option.WithBaseURL(d.Server.URL+"/v1"), option.WithAPIKey("tok-a"), option.WithMaxRetries(0))
	ctx := context.Background()
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Strict: openai.Bool(true),
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
			"required": []string{"city"}, "additionalProperties": false},
	})}
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Oslo?")}
	first, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	calls := first.Choices[0].Message.ToolCalls
	if first.Choices[0].FinishReason != "tool_calls" || len(calls) != 1 || calls[0].ID != "call_good" {
		t.Fatalf("the client was handed %+v", calls)
	}
	mu.Lock()
	if want := `Invalid arguments for get_weather: the arguments object has no field "town"`; !strings.HasPrefix(toldModel, want) {
		t.Errorf("the model read %q, want %q", toldModel, want)
	}
	mu.Unlock()
	msgs = append(msgs, first.Choices[0].Message.ToParam(), openai.ToolMessage("12°C and rain", calls[0].ID))
	second, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: msgs, Tools: tools})
	if err != nil || second.Choices[0].Message.Content != "The tool said 12°C and rain." {
		t.Fatalf("resumed: %v %+v", err, second)
	}
}

// TestChatCompletionsUnknownHistoryAndTheHeader: a history agentd never
// answered starts a new chat holding all of it; X-Agentd-Chat continues a
// chat outright, even when the client sends only its new message; an
// edited history branches into a new chat; another tenant's chat is a 404.
func TestChatCompletionsUnknownHistoryAndTheHeader(t *testing.T) {
	d, fake, sdk := startChat(t, 32000)
	ctx := context.Background()
	native := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	brought := []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage("first from elsewhere"), openai.AssistantMessage("an answer from elsewhere"), openai.UserMessage("and now?"),
	}
	var resp *http.Response
	c, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: brought}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get(oai.ChatHeader)
	stored, err := native.Transcript(ctx, id)
	if err != nil || len(stored) != 4 || stored[0].Content != "first from elsewhere" || stored[1].Role != api.RoleAssistant || stored[2].Content != "and now?" {
		t.Fatalf("the brought history was not stored as sent: %v %+v", err, stored)
	}
	reqs := fake.Requests()
	if last := reqs[len(reqs)-1]; len(last.Messages) != 3 || last.Messages[1].Content != "an answer from elsewhere" {
		t.Fatalf("the provider did not read the brought history: %+v", last.Messages)
	}

	// The header: only the new message, same chat.
	_, err = sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("only this")}},
		option.WithHeader(oai.ChatHeader, id), option.WithResponseInto(&resp))
	if err != nil || resp.Header.Get(oai.ChatHeader) != id {
		t.Fatalf("with the header: %v, chat %q", err, resp.Header.Get(oai.ChatHeader))
	}
	if stored, _ = native.Transcript(ctx, id); len(stored) != 6 || stored[4].Content != "only this" {
		t.Fatalf("the header's chat holds %+v", stored)
	}

	// An edited old message is another history: a new chat.
	edited := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("first, edited"), openai.AssistantMessage("an answer from elsewhere"),
		openai.UserMessage("and now?"), c.Choices[0].Message.ToParam(), openai.UserMessage("more")}
	if _, err = sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: edited}, option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	if other := resp.Header.Get(oai.ChatHeader); other == id || other == "" {
		t.Fatalf("an edited history continued chat %q", other)
	}

	// Another tenant names the chat: 404 in OpenAI's shape, and nothing stored.
	b := openai.NewClient(option.WithBaseURL(d.Server.URL+"/v1"), option.WithAPIKey("tok-b"), option.WithMaxRetries(0))
	_, err = b.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}},
		option.WithHeader(oai.ChatHeader, id))
	var aerr *openai.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound || aerr.Message == "" {
		t.Fatalf("another tenant's chat: %v", err)
	}
	if stored, _ = native.Transcript(ctx, id); len(stored) != 6 {
		t.Fatalf("a refused request changed the chat: %d messages", len(stored))
	}
}

// TestChatCompletionsRefusals: what agentd does not honour is a 400 naming
// the field, in OpenAI's shape.
func TestChatCompletionsRefusals(t *testing.T) {
	_, _, sdk := startChat(t, 32000)
	ctx := context.Background()
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	cases := []struct {
		name   string
		params openai.ChatCompletionNewParams
		param  string
	}{
		{"two choices", openai.ChatCompletionNewParams{Model: "fake/m", Messages: user, N: openai.Int(2)}, "n"},
		{"a picture", openai.ChatCompletionNewParams{Model: "fake/m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64,AAAA"})})}}, "messages[0].content[0].type"},
		{"no model", openai.ChatCompletionNewParams{Messages: user}, "model"},
		{"a forced tool", openai.ChatCompletionNewParams{Model: "fake/m", Messages: user, ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}}, "tool_choice"},
		{"only the system", openai.ChatCompletionNewParams{Model: "fake/m", Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("s")}}, "messages"},
	}
	for _, c := range cases {
		_, err := sdk.Chat.Completions.New(ctx, c.params)
		var aerr *openai.Error
		if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusBadRequest || aerr.Param != c.param || aerr.Type != "invalid_request_error" {
			t.Errorf("%s: %v (param %q, want %q)", c.name, err, paramOf(aerr), c.param)
		}
	}
}

func paramOf(e *openai.Error) string {
	if e == nil {
		return ""
	}
	return e.Param
}

// TestChatCompletionsBodyBound: a Chat Completions body is bounded by
// limits.max_history_bytes, not the native API's max_body_bytes (its
// client re-sends the whole history); past it, or past a message's bound,
// is a 413 in OpenAI's shape.
func TestChatCompletionsBodyBound(t *testing.T) {
	_, _, sdk := startChat(t, 32000, func(c *configs.Config) {
		c.Limits.MaxBodyBytes, c.Limits.MaxHistoryBytes, c.Limits.MaxMessageBytes = 16<<10, 64<<10, 12<<10
	})
	ctx := context.Background()
	history := func(n int) []openai.ChatCompletionMessageParamUnion {
		var out []openai.ChatCompletionMessageParamUnion
		for i := range n {
			out = append(out, openai.UserMessage(strings.Repeat("abc ", 2500)), openai.AssistantMessage(fmt.Sprint("answer ", i)))
		}
		return append(out, openai.UserMessage("now?"))
	}
	if _, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: history(4)}); err != nil {
		t.Fatalf("a 40 KiB history over max_body_bytes: %v", err)
	}
	for name, msgs := range map[string][]openai.ChatCompletionMessageParamUnion{
		"a body over max_history_bytes":    history(8),
		"a message over max_message_bytes": {openai.UserMessage(strings.Repeat("x", 13<<10))},
	} {
		_, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: msgs})
		var aerr *openai.Error
		if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusRequestEntityTooLarge || aerr.Code != "too_large" {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// completion asks sdk for params' completion, streamed or whole, and
// returns its first choice with the HTTP response that carried it.
func completion(ctx context.Context, t testing.TB, sdk openai.Client, params openai.ChatCompletionNewParams, streamed bool) (openai.ChatCompletionChoice, *http.Response) {
	t.Helper()
	var resp *http.Response
	if streamed {
		acc := accumulated(t, sdk.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&resp)))
		return acc.Choices[0], resp
	}
	c, err := sdk.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	return c.Choices[0], resp
}

// accumulated reads a streamed chat completion to its end through the
// SDK's accumulator.
func accumulated(t testing.TB, stream *ssestream.Stream[openai.ChatCompletionChunk]) openai.ChatCompletionAccumulator {
	t.Helper()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return acc
}

// TestChatCompletionsStreamsEachToolCallInItsOwnChunk: an answer of two
// calls streams as OpenAI streams parallel calls, each call starting in a
// chunk of its own, so openai-go's accumulator tells each one finished
// (JustFinishedToolCall, the SDK's streamed tool-calling pattern): two calls
// in one chunk told only the first, and a client that ran what it was told
// then sent a history missing the second call's result.
func TestChatCompletionsStreamsEachToolCallInItsOwnChunk(t *testing.T) {
	_, _, sdk := start(t, 32000, func(r testkit.Received) testkit.Reply {
		if !isTurn(r) || len(r.Tools) == 0 {
			return talker(r)
		}
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "call_oslo", Name: "get_weather", Arguments: `{"city":"Oslo"}`},
			{ID: "call_paris", Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
	})
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	})}
	stream := sdk.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "fake/m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("The weather in Oslo and Paris?")}, Tools: tools})
	var acc openai.ChatCompletionAccumulator
	var finished []string
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if c, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, c.ID+" "+c.Name+" "+c.Arguments)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{`call_oslo get_weather {"city":"Oslo"}`, `call_paris get_weather {"city":"Paris"}`}
	if fmt.Sprint(finished) != fmt.Sprint(want) || len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "tool_calls" || len(acc.Choices[0].Message.ToolCalls) != 2 {
		t.Fatalf("the SDK told finished calls %q, want %q; accumulated %+v", finished, want, acc.Choices)
	}
}

// TestChatCompletionsTakesAnAssistantsRefusal: a history whose assistant
// refused, as OpenAI's answers carry it (the refusal field, which the SDK's
// ToParam sends back, or a refusal part), is taken, and the model reads
// the refusal as what the assistant said: a refusal part was a 400 that
// spoke of attachments, and the refusal field an empty answer.
func TestChatCompletionsTakesAnAssistantsRefusal(t *testing.T) {
	_, fake, sdk := start(t, 32000, talker)
	ctx := context.Background()
	asField := openai.ChatCompletionMessage{Role: "assistant", Refusal: "I cannot help with the lock."}
	asPart := openai.ChatCompletionMessageParamOfAssistant([]openai.ChatCompletionAssistantMessageParamContentArrayOfContentPartUnion{
		{OfRefusal: &openai.ChatCompletionContentPartRefusalParam{Refusal: "I cannot help with the safe."}}})
	for name, refused := range map[string]openai.ChatCompletionMessageParamUnion{"field": asField.ToParam(), "part": asPart} {
		said := asField.Refusal
		if name == "part" {
			said = "I cannot help with the safe."
		}
		before := len(fake.Requests())
		_, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Open it (" + name + ")."), refused, openai.UserMessage("Then tell me a joke (" + name + ").")}})
		if err != nil {
			t.Fatalf("refusal as a %s: %v", name, err)
		}
		var read bool
		for _, r := range fake.Requests()[before:] {
			for _, m := range r.Messages {
				read = read || isTurn(r) && m.Role == chat.RoleAssistant && m.Content == said
			}
		}
		if !read {
			t.Errorf("refusal as a %s: no request to the model held the assistant's %q", name, said)
		}
	}
}
