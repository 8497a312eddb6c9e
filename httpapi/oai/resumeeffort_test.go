package oai_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
)

// weatherEfforts calls get_weather on a turn's first request and answers
// with the tool's result after it, recording the reasoning_effort each
// turn request carried ("" for none).
func weatherEfforts() (testkit.Script, func() []string) {
	return recordEfforts(func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleTool {
			return testkit.Reply{Text: "It is " + last.Content + "."}
		}
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}}
	})
}

// chatOf is the tenant's chat as the hub holds it.
func chatOf(t *testing.T, d *daemontest.Daemon, tenant, chatID string) api.Chat {
	t.Helper()
	c, err := d.Hub.Chat(context.Background(), tenant, chatID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// weatherFunction is get_weather (weatherTool) as a Responses tool.
var weatherFunction = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
	Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}

// pausedOnWeather asks tenant a's one chat for the weather on fake/m with
// effort (none: unset) and returns the response paused on get_weather,
// the chat and how many messages it then holds.
func pausedOnWeather(t *testing.T, d *daemontest.Daemon, sdk openai.Client, effort shared.ReasoningEffort) (*responses.Response, string, int64) {
	t.Helper()
	ctx := context.Background()
	first, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", Tools: []responses.ToolUnionParam{weatherFunction},
		Reasoning: shared.ReasoningParam{Effort: effort}, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("The weather in Oslo?")}})
	if err != nil || len(first.Output) != 1 || first.Output[0].Type != "function_call" {
		t.Fatalf("no paused response: %v %+v", err, first)
	}
	cs, err := d.Hub.Chats(ctx, "a")
	if err != nil || len(cs) != 1 {
		t.Fatalf("tenant a has %d chats (%v), want one", len(cs), err)
	}
	return first, cs[0].ID, chatOf(t, d, "a", cs[0].ID).Messages
}

// resumeWeather sends get_weather's result to the paused response first,
// naming model and effort.
func resumeWeather(sdk openai.Client, first *responses.Response, model string, effort shared.ReasoningEffort) (*responses.Response, error) {
	out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny")
	out.OfFunctionCallOutput.CallID = openai.String("call_w")
	return sdk.Responses.New(context.Background(), responses.ResponseNewParams{Model: model, PreviousResponseID: openai.String(first.ID),
		Tools: []responses.ToolUnionParam{weatherFunction}, Reasoning: shared.ReasoningParam{Effort: effort},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}})
}

// TestResponsesFunctionCallOutputsCheckTheirEffort: function_call_output
// items resume a paused turn, which keeps the setup it started with. Their
// reasoning.effort is still checked as any request's: one the chat's
// protocol has no word for is a 400 on reasoning.effort, storing nothing
// (the turn still takes its outputs); a valid one leaves the resumed
// turn's effort as it started (docs/openai.md).
func TestResponsesFunctionCallOutputsCheckTheirEffort(t *testing.T) {
	script, seen := weatherEfforts()
	d, _, sdk := start(t, 32000, script)
	first, chatID, before := pausedOnWeather(t, d, sdk, "low")
	resume := func(effort string) (*responses.Response, error) {
		return resumeWeather(sdk, first, "fake/m", shared.ReasoningEffort(effort))
	}
	_, err := resume("max")
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest || e.Param != "reasoning.effort" || !strings.Contains(e.Message, `"max"`) {
		t.Fatalf("outputs asking effort max of an OpenAI-style model: %v, want a 400 on reasoning.effort naming it", err)
	}
	if n := chatOf(t, d, "a", chatID).Messages; n != before {
		t.Fatalf("the refused outputs left the chat with %d messages, it held %d", n, before)
	}
	second, err := resume("high")
	if err != nil {
		t.Fatal(err)
	}
	if second.OutputText() != "It is sunny." {
		t.Fatalf("the resumed response says %q", second.OutputText())
	}
	if got, want := seen(), []string{"low", "low"}; !slices.Equal(got, want) {
		t.Fatalf("the turn's requests carried reasoning_effort %q, want %q: the resumed turn keeps its own", got, want)
	}
}

// TestChatCompletionsToolResultsCheckTheirEffort: tool messages resume a
// paused turn, which keeps the setup it started with; their
// reasoning_effort is still checked: one the chat's protocol has no word
// for is a 400 on reasoning_effort, storing nothing, and a valid one
// leaves the resumed turn's effort as it started.
func TestChatCompletionsToolResultsCheckTheirEffort(t *testing.T) {
	script, seen := weatherEfforts()
	d, _, _ := start(t, 32000, script)
	ask := userMsg("The weather in Oslo?")
	r := postCCWith(t, d, "tok-a", "", []any{ask}, map[string]any{"reasoning_effort": "low"})
	if r.status != http.StatusOK || len(r.body.Choices) != 1 || r.body.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("no paused answer: %d %+v", r.status, r.body)
	}
	chatID, before := r.chatID, chatOf(t, d, "a", r.chatID).Messages
	history := []any{ask, callsMsg("call_w", `{"city":"Oslo"}`), toolMsg("call_w", "sunny")}
	r = postCCWith(t, d, "tok-a", chatID, history, map[string]any{"reasoning_effort": "max"})
	if r.status != http.StatusBadRequest || r.body.Error.Param == nil || *r.body.Error.Param != "reasoning_effort" || !strings.Contains(r.body.Error.Message, `"max"`) {
		t.Fatalf("tool results asking effort max of an OpenAI-style model: %d %+v, want a 400 on reasoning_effort naming it", r.status, r.body.Error)
	}
	if n := chatOf(t, d, "a", chatID).Messages; n != before {
		t.Fatalf("the refused results left the chat with %d messages, it held %d", n, before)
	}
	r = postCCWith(t, d, "tok-a", chatID, history, map[string]any{"reasoning_effort": "high"})
	if r.status != http.StatusOK || r.chatID != chatID || r.body.Choices[0].Message.Content != "It is sunny." {
		t.Fatalf("the resumed answer: %d chat %q (paused %q) %+v", r.status, r.chatID, chatID, r.body)
	}
	if got, want := seen(), []string{"low", "low"}; !slices.Equal(got, want) {
		t.Fatalf("the turn's requests carried reasoning_effort %q, want %q: the resumed turn keeps its own", got, want)
	}
}
