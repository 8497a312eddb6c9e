package oai_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// start runs a daemon on an OpenAI-style fake with window and script, and
// returns it with an SDK client of tenant a.
func start(t *testing.T, window int, script testkit.Script) (*daemontest.Daemon, *openaifake.Server, openai.Client) {
	t.Helper()
	return startOn(t, configs.Store{}, window, script)
}

// startOn is start on the given store (the zero one: Badger).
func startOn(t *testing.T, store configs.Store, window int, script testkit.Script) (*daemontest.Daemon, *openaifake.Server, openai.Client) {
	t.Helper()
	fake := openaifake.New(openaifake.Options{Window: window, Script: script})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), window)
	if store.Kind != "" {
		cfg.Store = store
	}
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "a", "tok-b": "b"})
	return d, fake, sdkFor(d, "tok-a")
}

func sdkFor(d *daemontest.Daemon, token string) openai.Client {
	return openai.NewClient(option.WithBaseURL(d.Server.URL+"/v1"), option.WithAPIKey(token), option.WithMaxRetries(0))
}

// created creates a response, streamed (checked as streamed checks it)
// or whole.
func created(t *testing.T, sdk openai.Client, params responses.ResponseNewParams, stream bool, opts ...option.RequestOption) responses.Response {
	t.Helper()
	if stream {
		return streamed(t, sdk, params, opts...)
	}
	r, err := sdk.Responses.New(context.Background(), params, opts...)
	if err != nil {
		t.Fatalf("create a response: %v", err)
	}
	return *r
}

// streamed creates a response by streaming, checks the events' numbering,
// feeds them to the SDK's response accumulator and checks that what it
// rebuilds, and the text deltas, agree with the final response, which it
// returns.
func streamed(t *testing.T, sdk openai.Client, params responses.ResponseNewParams, opts ...option.RequestOption) responses.Response {
	t.Helper()
	s := sdk.Responses.NewStreaming(context.Background(), params, opts...)
	defer s.Close()
	var types []string
	var deltas strings.Builder
	var final responses.Response
	var acc responses.ResponseAccumulator
	next := int64(0)
	for s.Next() {
		ev := s.Current()
		var same responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(ev.RawJSON()), &same); err != nil {
			t.Fatalf("event %d: %v", next, err)
		}
		if err := acc.AddEvent(same); err != nil {
			t.Fatalf("the accumulator refuses event %d (%s): %v", next, ev.Type, err)
		}
		if ev.SequenceNumber != next {
			t.Fatalf("event %d (%s) has sequence_number %d", next, ev.Type, ev.SequenceNumber)
		}
		next++
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.completed", "response.incomplete", "response.failed":
			final = ev.Response
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) < 3 || types[0] != "response.created" || types[1] != "response.in_progress" {
		t.Fatalf("events %v: want response.created, response.in_progress first", types)
	}
	if last := types[len(types)-1]; last != "response."+string(final.Status) || final.Status == "in_progress" {
		t.Fatalf("last event %s, the response's status %q", last, final.Status)
	}
	if final.Status == "completed" && deltas.Len() > 0 && deltas.String() != final.OutputText() {
		t.Fatalf("deltas say %q, the response %q", deltas.String(), final.OutputText())
	}
	rebuilt, err := acc.ReconstructedResponse()
	if err != nil || rebuilt.ID != final.ID || rebuilt.OutputText() != final.OutputText() || len(rebuilt.Output) != len(final.Output) ||
		acc.Snapshot().OutputText() != final.OutputText() {
		t.Fatalf("the accumulator rebuilt %+v (%v), the stream ended with %+v", rebuilt, err, final)
	}
	return final
}

// TestResponsesChainOfThreeHundredTurnsFoldsOnAnEightKWindow: 300
// responses chained by previous_response_id, every other one streamed,
// are one agentd chat; it folds, and no request the provider receives is
// over its 8K window. Each response is stored and read back.
func TestResponsesChainOfThreeHundredTurnsFoldsOnAnEightKWindow(t *testing.T) {
	const window, turns = 8192, 300
	answer := strings.Repeat("a fairly long answer that fills the window over the turns ", 6)
	d, fake, sdk := start(t, window, func(r testkit.Received) testkit.Reply { return testkit.Reply{Text: answer} })
	ctx := context.Background()
	prev := ""
	for i := range turns {
		params := responses.ResponseNewParams{Model: "fake/m", Instructions: openai.String("Be brief."),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("question %d: %s", i, strings.Repeat("words ", 40)))}}
		if prev != "" {
			params.PreviousResponseID = openai.String(prev)
		}
		resp := created(t, sdk, params, i%2 == 1)
		if resp.Status != "completed" || resp.OutputText() != answer || resp.Usage.InputTokens == 0 {
			t.Fatalf("turn %d: status %s, text %q, usage %+v, error %+v", i, resp.Status, resp.OutputText(), resp.Usage, resp.Error)
		}
		if i > 0 && resp.PreviousResponseID != prev {
			t.Fatalf("turn %d: previous_response_id %q, want %q", i, resp.PreviousResponseID, prev)
		}
		prev = resp.ID
	}
	cs, err := d.Hub.Chats(ctx, "a")
	if err != nil || len(cs) != 1 {
		t.Fatalf("the chain is %d chats (%v), want one", len(cs), err)
	}
	v, err := d.Hub.Context(ctx, "a", cs[0].ID)
	if err != nil || v.FirstKeptSeq == 0 || v.Summary == "" {
		t.Fatalf("the chat did not fold: first kept %d, summary %q (%v)", v.FirstKeptSeq, v.Summary, err)
	}
	for i, r := range fake.Requests() {
		if r.InputTokens+r.MaxTokens > window {
			t.Fatalf("request %d: %d input + %d answer tokens, over the %d window", i, r.InputTokens, r.MaxTokens, window)
		}
	}
	got, err := sdk.Responses.Get(ctx, prev, responses.ResponseGetParams{})
	if err != nil || got.ID != prev || got.OutputText() != answer {
		t.Fatalf("GET the last response: %v %+v", err, got)
	}
	// After a restart the chain's responses are still there and go on.
	d = d.Restart()
	sdk = sdkFor(d, "tok-a")
	items, err := sdk.Responses.InputItems.List(ctx, prev, responses.InputItemListParams{})
	if err != nil || len(items.Data) != 1 || items.Data[0].Role != "user" || !strings.Contains(items.Data[0].RawJSON(), fmt.Sprintf(`"text":"question %d:`, turns-1)) {
		t.Fatalf("input items after a restart: %v %+v", err, items)
	}
	next, err := sdk.Responses.New(ctx, responses.ResponseNewParams{PreviousResponseID: openai.String(prev),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("one more")}})
	if err != nil || next.OutputText() != answer {
		t.Fatalf("after a restart: %v", err)
	}
}

// TestResponsesFunctionToolRoundTrip: a function tool is run by the
// client: the response ends with its function_call, and the next one,
// carrying the function_call_output, has the model's answer from it.
func TestResponsesFunctionToolRoundTrip(t *testing.T) {
	script := func(r testkit.Received) testkit.Reply {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == chat.RoleTool {
			return testkit.Reply{Text: "It is " + last.Content + " there."}
		}
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
	}
	_, fake, sdk := start(t, 32000, script)
	ctx := context.Background()
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Description: openai.String("The weather in a city"),
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}}
	for _, stream := range []bool{false, true} {
		params := responses.ResponseNewParams{Model: "fake/m", Tools: []responses.ToolUnionParam{tool},
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the weather in Paris?")}}
		first := created(t, sdk, params, stream)
		if len(first.Output) != 1 || first.Output[0].Type != "function_call" || first.Output[0].Name != "get_weather" ||
			first.Output[0].CallID != "call_1" || first.Output[0].Arguments.OfString != `{"city":"Paris"}` {
			t.Fatalf("stream %v: first output %+v", stream, first.Output)
		}
		out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny")
		out.OfFunctionCallOutput.CallID = openai.String("call_1")
		before := len(fake.Requests())
		second, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", PreviousResponseID: openai.String(first.ID),
			Tools: []responses.ToolUnionParam{tool}, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}})
		if err != nil {
			t.Fatal(err)
		}
		if second.OutputText() != "It is sunny there." {
			t.Fatalf("stream %v: after the output: %q %+v", stream, second.OutputText(), second.Output)
		}
		// The second response's usage is its own request's, not the
		// turn's: the first response reported the call before the pause.
		var input int64
		for _, r := range fake.Requests()[before:] {
			if isTurn(r) {
				input += int64(r.InputTokens)
			}
		}
		if second.Usage.InputTokens != input || input == 0 || first.Usage.InputTokens == 0 {
			t.Fatalf("stream %v: the resuming response's usage says %d input tokens; its request had %d", stream, second.Usage.InputTokens, input)
		}
	}
	sawTool := false
	for _, r := range fake.Requests() {
		sawTool = sawTool || len(r.Tools) > 0 && strings.Contains(strings.Join(r.Tools, ","), "get_weather")
	}
	if !sawTool {
		t.Fatal("the provider was never offered get_weather")
	}
}

// TestResponsesBadInput: unknown and other tenants' ids are 404s in
// OpenAI's shape, an unsupported tool type a 400 naming it; nothing is
// created by a refused request.
func TestResponsesBadInput(t *testing.T) {
	d, _, sdk := start(t, 32000, nil)
	ctx := context.Background()
	mine, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	other := sdkFor(d, "tok-b")
	cases := map[string]struct {
		call   func() error
		status int
		param  string
		words  string
	}{
		"unknown previous_response_id": {func() error {
			_, err := sdk.Responses.New(ctx, responses.ResponseNewParams{PreviousResponseID: openai.String("resp_nope"),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
			return err
		}, 404, "previous_response_id", "resp_nope"},
		"another tenant's response": {func() error {
			_, err := other.Responses.Get(ctx, mine.ID, responses.ResponseGetParams{})
			return err
		}, 404, "", "not found"},
		"another tenant's response's input items": {func() error {
			_, err := other.Responses.InputItems.List(ctx, mine.ID, responses.InputItemListParams{})
			return err
		}, 404, "", "not found"},
		"deleting another tenant's response": {func() error {
			return other.Responses.Delete(ctx, mine.ID)
		}, 404, "", "not found"},
		"another tenant's previous_response_id": {func() error {
			_, err := other.Responses.New(ctx, responses.ResponseNewParams{PreviousResponseID: openai.String(mine.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
			return err
		}, 404, "previous_response_id", "not found"},
		"unsupported tool type": {func() error {
			_, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: "web_search"}}},
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
			return err
		}, 400, "tools[0].type", `"web_search"`},
		"malformed JSON": {func() error {
			return sdk.Post(ctx, "responses", json.RawMessage(`{"input": `), nil)
		}, 400, "", "JSON"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var aerr *openai.Error
			if err := tc.call(); !errors.As(err, &aerr) || aerr.StatusCode != tc.status || aerr.Param != tc.param ||
				!strings.Contains(aerr.Message, tc.words) || aerr.Type != "invalid_request_error" {
				t.Fatalf("got %v (%+v), want %d naming %q with param %q", err, aerr, tc.status, tc.words, tc.param)
			}
		})
	}
	if cs, _ := d.Hub.Chats(ctx, "a"); len(cs) != 1 {
		t.Fatalf("tenant a has %d chats, want its one", len(cs))
	}
	if cs, _ := d.Hub.Chats(ctx, "b"); len(cs) != 0 {
		t.Fatalf("tenant b has %d chats after refused requests", len(cs))
	}
	if err := sdk.Responses.Delete(ctx, mine.ID); err != nil {
		t.Fatal(err)
	}
	var aerr *openai.Error
	if _, err := sdk.Responses.Get(ctx, mine.ID, responses.ResponseGetParams{}); !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound {
		t.Fatalf("GET a deleted response: %v", err)
	}
}

// openAITooLong is OpenAI's real refusal of a request over the window,
// as chathub-dev/chathub#320 quotes it (../shared/provider-bodies/
// too_long.jsonl, A002).
func openAITooLong(window, input int) string {
	return fmt.Sprintf(`{"error":{"message":"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, window, input)
}

// tooLongOn is a provider that refuses as OpenAI does, however agentd fits
// it, every turn request that holds trigger.
func tooLongOn(trigger string) testkit.Script {
	return func(r testkit.Received) testkit.Reply {
		switch r.System {
		case summarizer.Instructions:
			return testkit.Reply{Text: "The person asked for echoes."}
		case learner.Instructions:
			return testkit.Reply{Text: "[]"}
		}
		for _, m := range r.Messages {
			if strings.Contains(m.Content, trigger) {
				return testkit.Reply{Status: http.StatusBadRequest, Body: openAITooLong(8000, r.InputTokens+8001)}
			}
		}
		return testkit.Reply{Text: "Noted."}
	}
}

// TestChatCompletionsTooLongIsContextLengthExceeded: the same provider on
// Chat Completions answers 400 in the body OpenAI sends for it (the
// code context_length_exceeded on param messages, which clients such as
// LangChain and LiteLLM read to trim their history), naming agentd's next
// step; streamed, the SDK raises the same error object.
func TestChatCompletionsTooLongIsContextLengthExceeded(t *testing.T) {
	const trigger = "Please go through everything above once more."
	_, _, sdk := start(t, 32000, tooLongOn(trigger))
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(strings.Repeat("a note ", 300))}
	first, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: msgs})
	if err != nil {
		t.Fatalf("first: %v", err)
	}
	msgs = append(msgs, first.Choices[0].Message.ToParam(), openai.UserMessage(trigger))
	params := openai.ChatCompletionNewParams{Model: "fake/m", Messages: msgs}
	var aerr *openai.Error
	if _, err := sdk.Chat.Completions.New(ctx, params); !errors.As(err, &aerr) || aerr.StatusCode != http.StatusBadRequest ||
		aerr.Type != "invalid_request_error" || aerr.Code != "context_length_exceeded" || aerr.Param != "messages" || !strings.Contains(aerr.Message, "next step") {
		t.Fatalf("whole: %v; want 400 context_length_exceeded on param messages", aerr.RawJSON())
	}
	stream := sdk.Chat.Completions.NewStreaming(ctx, params)
	for stream.Next() {
	}
	var serr *ssestream.StreamError
	var body struct {
		Error struct {
			Type  string  `json:"type"`
			Code  string  `json:"code"`
			Param *string `json:"param"`
		} `json:"error"`
	}
	if err := stream.Err(); !errors.As(err, &serr) || json.Unmarshal(serr.Event.Data, &body) != nil ||
		body.Error.Code != "context_length_exceeded" || body.Error.Type != "invalid_request_error" || body.Error.Param == nil || *body.Error.Param != "messages" {
		t.Fatalf("streamed: %v; want the error object of the whole answer", err)
	}
}

// TestResponsesTooLongFailsWithContextLengthExceeded: a provider that
// refuses every turn request as too long, however agentd fits it, ends
// the response failed, with context_length_exceeded naming agentd's next
// step: as response.failed when streaming, as the response otherwise.
func TestResponsesTooLongFailsWithContextLengthExceeded(t *testing.T) {
	const trigger = "Please go through everything above once more."
	_, _, sdk := start(t, 32000, tooLongOn(trigger))
	ctx := context.Background()
	first, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(strings.Repeat("a note ", 300))}})
	if err != nil || first.Status != "completed" {
		t.Fatalf("first: %v %+v", err, first)
	}
	params := responses.ResponseNewParams{PreviousResponseID: openai.String(first.ID), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(trigger)}}
	failed := streamed(t, sdk, params)
	if failed.Status != "failed" || failed.Error.Code != "context_length_exceeded" || !strings.Contains(failed.Error.Message, "Next step:") {
		t.Fatalf("streamed: status %s, error %+v", failed.Status, failed.Error)
	}
	params.PreviousResponseID = openai.String(failed.ID)
	again, err := sdk.Responses.New(ctx, params)
	if err != nil || again.Status != "failed" || again.Error.Code != "context_length_exceeded" {
		t.Fatalf("not streamed: %v, %+v", err, again)
	}
	stored, err := sdk.Responses.Get(ctx, again.ID, responses.ResponseGetParams{})
	if err != nil || stored.Status != "failed" || stored.Error.Code != "context_length_exceeded" {
		t.Fatalf("stored: %v, %+v", err, stored)
	}
}

// TestACompactThresholdFoldsBelowTheWindow: a request's context_management
// compact_threshold lowers the chat's fold trigger: on a 32K window that
// twenty short turns never fill, the chat folds to stay under 2,000 tokens.
// A threshold under OpenAI's minimum of 1,000 is refused, naming it.
func TestACompactThresholdFoldsBelowTheWindow(t *testing.T) {
	const window, threshold, turns = 32000, 2000, 20
	answer := strings.Repeat("an answer of some length ", 8)
	d, _, sdk := start(t, window, func(r testkit.Received) testkit.Reply { return testkit.Reply{Text: answer} })
	ctx := context.Background()
	compaction := []responses.ResponseNewParamsContextManagement{{Type: "compaction", CompactThreshold: openai.Int(threshold)}}
	prev := ""
	for i := range turns {
		params := responses.ResponseNewParams{Model: "fake/m", ContextManagement: compaction,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("question %d: %s", i, strings.Repeat("words ", 30)))}}
		if prev != "" {
			params.PreviousResponseID = openai.String(prev)
		}
		r, err := sdk.Responses.New(ctx, params)
		if err != nil || r.Status != "completed" {
			t.Fatalf("turn %d: %v %+v", i, err, r)
		}
		prev = r.ID
	}
	cs, err := d.Hub.Chats(ctx, "a")
	if err != nil || len(cs) != 1 {
		t.Fatalf("the chain is %d chats (%v), want one", len(cs), err)
	}
	v, err := d.Hub.Context(ctx, "a", cs[0].ID)
	if err != nil || v.FirstKeptSeq <= 1 || v.Summary == "" {
		t.Errorf("a chat past its compact_threshold did not fold: first kept %d, summary %q (%v)", v.FirstKeptSeq, v.Summary, err)
	}
	if b := v.Budget; b.System+b.Tools+b.Transcript > threshold {
		t.Errorf("the chat's budget allows %d tokens, over its compact_threshold of %d", b.System+b.Tools+b.Transcript, threshold)
	}

	_, err = sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", PreviousResponseID: openai.String(prev),
		ContextManagement: []responses.ResponseNewParamsContextManagement{{Type: "compaction", CompactThreshold: openai.Int(500)}},
		Input:             responses.ResponseNewParamsInputUnion{OfString: openai.String("smaller?")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "compact_threshold") {
		t.Errorf("a compact_threshold of 500: %v, want a 400 naming compact_threshold", err)
	}
}

// TestAStreamedResponseWhoseClientLeftIsStoredAtItsEnd: a client that
// reads response.created and leaves while the model answers does not lose
// its response: once the turn ends, the id it was told is retrieved whole,
// and previous_response_id naming it goes on in the same chat.
func TestAStreamedResponseWhoseClientLeftIsStoredAtItsEnd(t *testing.T) {
	asked, release := make(chan struct{}, 1), make(chan struct{})
	script := func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Content == "leave early" {
			asked <- struct{}{}
			<-release
			return testkit.Reply{Text: "Answered after you left."}
		}
		return testkit.Reply{Text: "Still here."}
	}
	d, fake, sdk := start(t, 32000, script)
	ctx, leave := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.Server.URL+"/v1/responses",
		strings.NewReader(`{"model":"fake/m","input":"leave early","stream":true}`))
	req.Header.Set("Authorization", "Bearer tok-a")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	sc := bufio.NewScanner(resp.Body)
	for id == "" && sc.Scan() {
		var ev struct {
			Type     string `json:"type"`
			Response struct {
				ID string `json:"id"`
			} `json:"response"`
		}
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "response.created" {
			id = ev.Response.ID
		}
	}
	if id == "" {
		t.Fatalf("no response.created: %v", sc.Err())
	}
	<-asked
	leave()
	_ = resp.Body.Close()
	close(release)

	var got *responses.Response
	for deadline := time.Now().Add(30 * time.Second); got == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got, _ = sdk.Responses.Get(context.Background(), id, responses.ResponseGetParams{})
	}
	if got == nil {
		t.Fatalf("response %s was never stored after its client left", id)
	}
	if got.Status != "completed" || got.OutputText() != "Answered after you left." {
		t.Fatalf("stored response: status %s, text %q", got.Status, got.OutputText())
	}
	next, err := sdk.Responses.New(context.Background(), responses.ResponseNewParams{Model: "fake/m", PreviousResponseID: openai.String(id),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and now?")}})
	if err != nil {
		t.Fatalf("previous_response_id naming the response its client left: %v", err)
	}
	if next.OutputText() != "Still here." {
		t.Fatalf("the next response: %q", next.OutputText())
	}
	reqs := fake.Requests()
	last := reqs[len(reqs)-1]
	if !strings.Contains(fmt.Sprint(last.Messages), "Answered after you left.") {
		t.Fatalf("the next turn's request does not carry the answer its client missed: %v", last.Messages)
	}
}
