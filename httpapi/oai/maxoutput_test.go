package oai_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
)

// cutAtItsCap answers every turn request as a model whose answer runs
// into the request's max_tokens: it says what cap it saw and stops for
// length, having spent all of it.
func cutAtItsCap(r testkit.Received) testkit.Reply {
	switch r.System {
	case learner.Instructions:
		return testkit.Reply{Text: "[]"}
	case summarizer.Instructions, summarizer.CondenseInstructions:
		return testkit.Reply{Text: "The person asked for long stories."}
	}
	return testkit.Reply{Text: fmt.Sprintf("cut at %d", r.MaxTokens), Finish: "length", Usage: &chat.Usage{InputTokens: 40, OutputTokens: r.MaxTokens}}
}

// turnRequests counts the chat turns' requests the provider received.
func turnRequests(fake *openaifake.Server) int {
	n := 0
	for _, r := range fake.Requests() {
		if isTurn(r) {
			n++
		}
	}
	return n
}

// TestChatCompletionsMaxTokensCutIsLength: an answer the model stopped at
// the client's max_tokens (or max_completion_tokens) is the answer: one
// request, finish_reason length, streamed or not, and the stored message
// says it stopped at the cap. agentd does not ask for the rest.
func TestChatCompletionsMaxTokensCutIsLength(t *testing.T) {
	d, fake, sdk := start(t, 32000, cutAtItsCap)
	ctx := context.Background()
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprint("streamed=", streamed), func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: "fake/m",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("Write a long story (%v).", streamed))}}
			var resp *http.Response
			var choice openai.ChatCompletionChoice
			var usage openai.CompletionUsage
			if !streamed {
				params.MaxTokens = openai.Int(16)
				c, err := sdk.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp))
				if err != nil {
					t.Fatal(err)
				}
				choice, usage = c.Choices[0], c.Usage
			} else {
				params.MaxCompletionTokens = openai.Int(16)
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				acc := accumulated(t, sdk.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&resp)))
				choice, usage = acc.Choices[0], acc.Usage
			}
			if choice.FinishReason != "length" || choice.Message.Content != "cut at 16" || usage.CompletionTokens != 16 {
				t.Fatalf("finish_reason %q, content %q, completion_tokens %d: want length, the one cut answer, 16",
					choice.FinishReason, choice.Message.Content, usage.CompletionTokens)
			}
			stored, err := (&api.Client{BaseURL: d.Server.URL, Token: "tok-a"}).Transcript(ctx, resp.Header.Get(oai.ChatHeader))
			if err != nil {
				t.Fatal(err)
			}
			if last := stored[len(stored)-1]; len(stored) != 2 || !last.MaxOutputReached {
				t.Fatalf("transcript %+v: want the question and the answer marked max_output_reached", stored)
			}
		})
	}
	if n := turnRequests(fake); n != 2 {
		t.Fatalf("the provider was asked %d times for two capped answers; a cut at the client's cap is not continued", n)
	}
}

// TestResponsesCutAtMaxOutputTokensIsIncomplete: an answer the model
// stopped at the client's max_output_tokens ends the response as OpenAI's
// does: status incomplete, incomplete_details.reason max_output_tokens,
// its message item incomplete; streamed, the last event is
// response.incomplete; the stored response says the same.
func TestResponsesCutAtMaxOutputTokensIsIncomplete(t *testing.T) {
	_, fake, sdk := start(t, 32000, cutAtItsCap)
	ctx := context.Background()
	for _, stream := range []bool{false, true} {
		params := responses.ResponseNewParams{Model: "fake/m", MaxOutputTokens: openai.Int(16),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("Write a long story (%v).", stream))}}
		got := created(t, sdk, params, stream)
		var items []string
		for _, it := range got.Output {
			items = append(items, it.Type+" "+it.Status)
		}
		if got.Status != "incomplete" || got.IncompleteDetails.Reason != "max_output_tokens" || got.OutputText() != "cut at 16" ||
			len(items) != 1 || items[0] != "message incomplete" || got.Usage.OutputTokens != 16 {
			t.Fatalf("stream %v: status %q, incomplete_details %q, text %q, items %q, output_tokens %d", stream, got.Status,
				got.IncompleteDetails.Reason, got.OutputText(), items, got.Usage.OutputTokens)
		}
		stored, err := sdk.Responses.Get(ctx, got.ID, responses.ResponseGetParams{})
		if err != nil || stored.Status != "incomplete" || stored.IncompleteDetails.Reason != "max_output_tokens" {
			t.Fatalf("stream %v: stored %v, %+v", stream, err, stored)
		}
	}
	if n := turnRequests(fake); n != 2 {
		t.Fatalf("the provider was asked %d times for two capped answers; a cut at the client's cap is not continued", n)
	}
}

// TestChatCompletionsAnEmptyAnswerIsAnAnswer: a model that says nothing,
// stopped at the client's max_tokens before its first word or ending at
// once, answers an empty message with finish_reason length or stop, as
// OpenAI's does, streamed or not. It is not a 502: the SDK would retry it,
// and every retry of a turn that ended stored the question again.
func TestChatCompletionsAnEmptyAnswerIsAnAnswer(t *testing.T) {
	d, _, _ := start(t, 32000, func(r testkit.Received) testkit.Reply {
		switch r.System {
		case learner.Instructions:
			return testkit.Reply{Text: "[]"}
		case summarizer.Instructions, summarizer.CondenseInstructions:
			return testkit.Reply{Text: "The person asked."}
		}
		if r.MaxTokens == 2 { // the client's cap; agentd's own answer room is far more
			return testkit.Reply{Finish: "length", Usage: &chat.Usage{InputTokens: 40, OutputTokens: r.MaxTokens}}
		}
		return testkit.Reply{}
	})
	sdk := openai.NewClient(option.WithBaseURL(d.Server.URL+"/v1"), option.WithAPIKey("tok-a")) // the SDK's own retries
	ctx := context.Background()
	for _, capped := range []bool{true, false} {
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("capped=%v,streamed=%v", capped, streamed), func(t *testing.T) {
				params := openai.ChatCompletionNewParams{Model: "fake/m",
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("Say nothing (%v, %v).", capped, streamed))}}
				want := "stop"
				if capped {
					params.MaxTokens, want = openai.Int(2), "length"
				}
				choice, resp := completion(ctx, t, sdk, params, streamed)
				if choice.FinishReason != want || choice.Message.Content != "" {
					t.Fatalf("finish_reason %q, content %q: want %s and no words", choice.FinishReason, choice.Message.Content, want)
				}
				stored, err := (&api.Client{BaseURL: d.Server.URL, Token: "tok-a"}).Transcript(ctx, resp.Header.Get(oai.ChatHeader))
				if err != nil {
					t.Fatal(err)
				}
				if len(stored) != 2 || stored[0].Role != api.RoleUser || stored[1].MaxOutputReached != capped {
					t.Fatalf("transcript %+v: want the question once and its empty answer", stored)
				}
			})
		}
	}
}
