package oai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
)

// ccReply is what these tests read of a Chat Completions answer or error.
type ccReply struct {
	status int
	chatID string
	body   struct {
		Choices []struct {
			Message struct {
				Content   string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Error struct {
			Message string  `json:"message"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
}

var weatherTool = []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}

// postCC sends a Chat Completions request as raw JSON, so a test says the
// history's bytes exactly (re-serialized arguments). A refused request
// answers at once; the guard only ends a test whose request would wait.
func postCC(t *testing.T, d *daemontest.Daemon, token, chatID string, msgs []any) ccReply {
	t.Helper()
	return postCCWith(t, d, token, chatID, msgs, nil)
}

// postCCWith is postCC with more fields of the request's body.
func postCCWith(t *testing.T, d *daemontest.Daemon, token, chatID string, msgs []any, more map[string]any) ccReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body := map[string]any{"model": "fake/m", "messages": msgs, "tools": weatherTool}
	maps.Copy(body, more)
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.Server.URL+"/v1/chat/completions", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	if chatID != "" {
		req.Header.Set(oai.ChatHeader, chatID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := ccReply{status: resp.StatusCode, chatID: resp.Header.Get(oai.ChatHeader)}
	if err := json.NewDecoder(resp.Body).Decode(&out.body); err != nil {
		t.Fatal(err)
	}
	return out
}

func userMsg(s string) any { return map[string]any{"role": "user", "content": s} }

func toolMsg(id, s string) any {
	return map[string]any{"role": "tool", "tool_call_id": id, "content": s}
}

// callsMsg is the assistant message of a paused answer as a client keeps
// it, its arguments as the client writes them.
func callsMsg(id, args string) any {
	return map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
		"id": id, "type": "function", "function": map[string]any{"name": "get_weather", "arguments": args}}}}
}

// pauseOn asks about the weather in history and returns the paused
// answer's call id and chat.
func pauseOn(t *testing.T, d *daemontest.Daemon, token string, history []any) (callID, chatID string) {
	t.Helper()
	r := postCC(t, d, token, "", history)
	if r.status != http.StatusOK || len(r.body.Choices) != 1 || r.body.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("no paused answer: %d %+v", r.status, r.body)
	}
	calls := r.body.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Function.Arguments != `{"city":"Oslo"}` {
		t.Fatalf("paused answer's calls: %+v", calls)
	}
	return calls[0].ID, r.chatID
}

func chatCount(t *testing.T, d *daemontest.Daemon, token string) int {
	t.Helper()
	l, err := (&api.Client{BaseURL: d.Server.URL, Token: token}).Chats(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Chats)
}

// TestChatCompletionsToolResultsFindTheirPausedChat: tool results whose
// history agentd does not recognise (arguments re-serialized as
// LangChain's json.dumps writes them; a restart that forgot every history)
// resume the chat that paused on their calls, in the caller's tenant only;
// results no chat waits for are a 400 that makes no chat.
func TestChatCompletionsToolResultsFindTheirPausedChat(t *testing.T) {
	d, _, _ := startChat(t, 32000)
	ask := userMsg("What is the weather?")
	call, chatID := pauseOn(t, d, "tok-a", []any{ask})
	resent := []any{ask, callsMsg(call, `{"city": "Oslo"}`), toolMsg(call, "12°C")}

	// Another tenant with the very same history finds nothing of a's.
	if r := postCC(t, d, "tok-b", "", resent); r.status != http.StatusBadRequest || chatCount(t, d, "tok-b") != 0 {
		t.Fatalf("tenant b's tool results: %d %q, %d chats of b", r.status, r.body.Error.Message, chatCount(t, d, "tok-b"))
	}
	r := postCC(t, d, "tok-a", "", resent)
	if r.status != http.StatusOK || r.chatID != chatID || r.body.Choices[0].Message.Content != "The tool said 12°C." {
		t.Fatalf("re-serialized arguments: %d chat %q (paused %q) %+v", r.status, r.chatID, chatID, r.body)
	}

	// A restart forgets every history; the pause and its index stay.
	history := append(resent, map[string]any{"role": "assistant", "content": r.body.Choices[0].Message.Content}, userMsg("And the weather now?"))
	call2, again := pauseOn(t, d, "tok-a", history)
	if again != chatID {
		t.Fatalf("the history went on in chat %q, not %q", again, chatID)
	}
	d = d.Restart()
	r = postCC(t, d, "tok-a", "", append(history, callsMsg(call2, `{"city":"Oslo"}`), toolMsg(call2, "3°C")))
	if r.status != http.StatusOK || r.chatID != chatID || r.body.Choices[0].Message.Content != "The tool said 3°C." {
		t.Fatalf("after a restart: %d chat %q (paused %q) %+v", r.status, r.chatID, chatID, r.body)
	}

	// Results of calls no turn waits for: a 400, and no chat made.
	r = postCC(t, d, "tok-a", "", []any{userMsg("hi"), callsMsg("call_zzz", `{}`), toolMsg("call_zzz", "x")})
	if r.status != http.StatusBadRequest || !strings.Contains(r.body.Error.Message, "call_zzz") {
		t.Fatalf("results nothing waits for: %d %q", r.status, r.body.Error.Message)
	}
	if n := chatCount(t, d, "tok-a"); n != 1 {
		t.Fatalf("tenant a has %d chats; the tool results made some", n)
	}
}

const unansweredCalls = "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: "

// TestChatCompletionsNewMessageWhileCallsPending: a user message instead
// of the results of the calls agentd's answer asked for is OpenAI's 400 at
// once, whether the history shows the calls or not (X-Agentd-Chat with
// only a new message); the paused turn still takes its results after.
func TestChatCompletionsNewMessageWhileCallsPending(t *testing.T) {
	d, _, _ := startChat(t, 32000)
	ask := userMsg("What is the weather?")
	call, chatID := pauseOn(t, d, "tok-a", []any{ask})
	calls := callsMsg(call, `{"city":"Oslo"}`)

	r := postCC(t, d, "tok-a", "", []any{ask, calls, userMsg("never mind, just say hi")})
	if r.status != http.StatusBadRequest || r.body.Error.Message != unansweredCalls+call || r.body.Error.Param == nil || *r.body.Error.Param != "messages.[2].role" {
		t.Fatalf("a new message in place of the results: %d %+v", r.status, r.body.Error)
	}
	r = postCC(t, d, "tok-a", chatID, []any{userMsg("status?")})
	if r.status != http.StatusBadRequest || !strings.HasPrefix(r.body.Error.Message, unansweredCalls+call+" ") {
		t.Fatalf("a new message to the paused chat: %d %+v", r.status, r.body.Error)
	}
	r = postCC(t, d, "tok-a", "", []any{ask, calls, toolMsg(call, "12°C")})
	if r.status != http.StatusOK || r.chatID != chatID || r.body.Choices[0].Message.Content != "The tool said 12°C." {
		t.Fatalf("the results after: %d chat %q %+v", r.status, r.chatID, r.body)
	}
}

// TestChatCompletionsToolResultsAndANewMessage: tool results and the
// person's next message in one request resume the paused turn with both,
// and the model answers the message having read the results.
func TestChatCompletionsToolResultsAndANewMessage(t *testing.T) {
	d, fake, _ := startChat(t, 32000)
	ask := userMsg("What is the weather?")
	call, chatID := pauseOn(t, d, "tok-a", []any{ask})
	r := postCC(t, d, "tok-a", "", []any{ask, callsMsg(call, `{"city":"Oslo"}`), toolMsg(call, "12°C"), userMsg("so, a coat then?")})
	if r.status != http.StatusOK || r.chatID != chatID || !strings.HasPrefix(r.body.Choices[0].Message.Content, "Answer to coat then? ") {
		t.Fatalf("results and a message: %d chat %q %+v", r.status, r.chatID, r.body)
	}
	reqs := fake.Requests()
	msgs := reqs[len(reqs)-1].Messages
	if n := len(msgs); n < 2 || msgs[n-2].Role != chat.RoleTool || msgs[n-2].Content != "12°C" || msgs[n-1].Content != "so, a coat then?" {
		t.Fatalf("the model read %+v", msgs)
	}
}

// serverError is a provider's 500 in OpenAI's words.
var serverError = testkit.Reply{Status: http.StatusInternalServerError,
	Body: `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`}

// weatherScript calls get_weather for Paris (call_1) and answers the
// tool's result, or fails with serverError while down says so.
func weatherScript(down func() bool) testkit.Script {
	return func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleTool {
			if down() {
				return serverError
			}
			return testkit.Reply{Text: "It is " + last.Content + " there."}
		}
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
	}
}

// askWeather asks about the weather with the get_weather tool and returns
// the response, which waits for call_1's output, and the tool.
func askWeather(ctx context.Context, t *testing.T, sdk openai.Client) (*responses.Response, responses.ToolUnionParam) {
	t.Helper()
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: map[string]any{"type": "object"}}}
	first, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the weather in Paris?")}})
	if err != nil {
		t.Fatal(err)
	}
	return first, tool
}

// TestResponsesNewMessageWhileCallsPending: a plain message continuing a
// response whose function calls have no output is refused at once, in
// OpenAI's words; the outputs are taken after.
func TestResponsesNewMessageWhileCallsPending(t *testing.T) {
	_, _, sdk := start(t, 32000, weatherScript(func() bool { return false }))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, tool := askWeather(ctx, t, sdk)
	_, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", PreviousResponseID: openai.String(first.ID), Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("never mind")}})
	var aerr *openai.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusBadRequest || aerr.Message != "No tool output found for function call call_1." {
		t.Fatalf("a message in place of the output: %v", err)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny")
	out.OfFunctionCallOutput.CallID = openai.String("call_1")
	second, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", PreviousResponseID: openai.String(first.ID),
		Tools: []responses.ToolUnionParam{tool}, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}})
	if err != nil || second.OutputText() != "It is sunny there." {
		t.Fatalf("the output after: %v", err)
	}
}

// resumeFailed pauses a new chat of tok-a's on a weather call and sends
// its results while the provider fails them (the caller's script answers
// a tool result with serverError): the results are stored, the resumed
// turn failed with a 502.
func resumeFailed(t *testing.T, d *daemontest.Daemon) (ask any, call, chatID string, results []any) {
	t.Helper()
	ask = userMsg("What is the weather?")
	call, chatID = pauseOn(t, d, "tok-a", []any{ask})
	results = []any{ask, callsMsg(call, `{"city":"Oslo"}`), toolMsg(call, "12°C")}
	if r := postCC(t, d, "tok-a", "", results); r.status != http.StatusBadGateway {
		t.Fatalf("the resumed turn at a failing provider: %d %+v", r.status, r.body)
	}
	return ask, call, chatID, results
}

// TestToolResultsRetriedAfterTheirTurnFailedAreAnswered: tool results
// whose resumed turn failed at the provider (a 502, which the SDKs retry)
// are stored; the same request again finds no turn waiting, but the chat
// ending with those results, and answers them without storing them twice.
// Results that differ from the stored ones are still refused.
func TestToolResultsRetriedAfterTheirTurnFailedAreAnswered(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	d, _, _ := start(t, 32000, func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleTool && down.Load() {
			return serverError
		}
		return talker(r)
	})
	ask, call, chatID, results := resumeFailed(t, d)
	down.Store(false)
	other := []any{ask, callsMsg(call, `{"city":"Oslo"}`), toolMsg(call, "13°C")}
	if r := postCC(t, d, "tok-a", chatID, other); r.status != http.StatusBadRequest {
		t.Fatalf("other results than those stored: %d %+v", r.status, r.body)
	}
	r := postCC(t, d, "tok-a", "", results)
	if r.status != http.StatusOK || r.chatID != chatID || r.body.Choices[0].Message.Content != "The tool said 12°C." {
		t.Fatalf("the retry: %d chat %q (paused %q) %+v", r.status, r.chatID, chatID, r.body)
	}
	stored, err := (&api.Client{BaseURL: d.Server.URL, Token: "tok-a"}).Transcript(context.Background(), chatID)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range stored {
		roles = append(roles, string(m.Role))
	}
	if want := []string{"user", "assistant", "tool", "assistant"}; !slices.Equal(roles, want) {
		t.Fatalf("the chat holds %v, want %v", roles, want)
	}
}

// TestFunctionCallOutputsRetriedAfterTheirResponseFailedAreAnswered: the
// same on the Responses surface, through the SDK: outputs whose response
// failed at the provider, sent again on the same previous_response_id,
// are answered by a new response.
func TestFunctionCallOutputsRetriedAfterTheirResponseFailedAreAnswered(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	_, _, sdk := start(t, 32000, weatherScript(down.Load))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, tool := askWeather(ctx, t, sdk)
	out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny")
	out.OfFunctionCallOutput.CallID = openai.String("call_1")
	params := responses.ResponseNewParams{Model: "fake/m", PreviousResponseID: openai.String(first.ID),
		Tools: []responses.ToolUnionParam{tool}, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}}
	if failed, err := sdk.Responses.New(ctx, params); err == nil && failed.Status != responses.ResponseStatusFailed {
		t.Fatalf("the outputs at a failing provider: %+v", failed)
	}
	down.Store(false)
	again, err := sdk.Responses.New(ctx, params)
	if err != nil || again.OutputText() != "It is sunny there." {
		t.Fatalf("the retry: %v %+v", err, again)
	}
}
