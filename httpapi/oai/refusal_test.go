package oai_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit"
)

const refusalText = "I'm sorry, I can't help with that."

// refuser refuses, as OpenAI does (delta.refusal, then "stop"), any
// message that says "forbidden", and answers the rest.
func refuser(r testkit.Received) testkit.Reply {
	switch r.System {
	case learner.Instructions:
		return testkit.Reply{Text: "[]"}
	case summarizer.Instructions, summarizer.CondenseInstructions:
		return testkit.Reply{Text: "The person asked."}
	}
	if strings.Contains(r.Messages[len(r.Messages)-1].Content, "forbidden") {
		return testkit.Reply{Refusal: refusalText}
	}
	return testkit.Reply{Text: "A fine answer."}
}

// TestChatCompletionsRefusalIsContentFilter: a refused answer reaches the
// client with its text and finish_reason content_filter, streamed or not;
// the transcript keeps the question and the answer, marked refused; the
// SDK's retry of the request is told the same from the transcript;
// the chat goes on without sending the refused exchange to the model again.
func TestChatCompletionsRefusalIsContentFilter(t *testing.T) {
	d, fake, sdk := start(t, 32000, refuser)
	ctx := context.Background()
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprint("streamed=", streamed), func(t *testing.T) {
			question := fmt.Sprintf("A forbidden question (%v).", streamed)
			params := openai.ChatCompletionNewParams{Model: "fake/m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)}}
			choice, resp := completion(ctx, t, sdk, params, streamed)
			if choice.FinishReason != "content_filter" || choice.Message.Content != refusalText {
				t.Fatalf("finish_reason %q, content %q: want content_filter and the refusal's text", choice.FinishReason, choice.Message.Content)
			}
			asked := len(fake.Requests())
			again, err := sdk.Chat.Completions.New(ctx, params, option.WithHeader(oai.RetryCountHeader, "1"))
			if err != nil || again.Choices[0].FinishReason != "content_filter" || again.Choices[0].Message.Content != refusalText || len(fake.Requests()) != asked {
				t.Fatalf("the SDK's retry: %v, %+v: want content_filter and the refusal's text, read from the chat", err, again)
			}
			chatID := resp.Header.Get(oai.ChatHeader)
			params.Messages = append(params.Messages, openai.AssistantMessage(refusalText), openai.UserMessage("A fine question."))
			c, err := sdk.Chat.Completions.New(ctx, params, option.WithHeader(oai.ChatHeader, chatID))
			if err != nil || c.Choices[0].FinishReason != "stop" || c.Choices[0].Message.Content != "A fine answer." {
				t.Fatalf("the next question: %v, %+v", err, c)
			}
			reqs := fake.Requests()
			for _, m := range reqs[len(reqs)-1].Messages {
				if strings.Contains(m.Content, "forbidden") || strings.Contains(m.Content, refusalText) {
					t.Fatalf("the next request sent the refused exchange again: %+v", reqs[len(reqs)-1].Messages)
				}
			}
			stored, err := (&api.Client{BaseURL: d.Server.URL, Token: "tok-a"}).Transcript(ctx, chatID)
			if err != nil {
				t.Fatal(err)
			}
			if len(stored) != 4 || stored[0].Content != question || !stored[1].Refused || stored[1].Content != refusalText || stored[3].Refused {
				t.Fatalf("transcript %+v: want the question, its refusal marked refused, the next question and its answer", stored)
			}
		})
	}
}

// TestResponsesRefusalIsIncomplete: a refused answer ends the response as
// OpenAI ends a filtered one: status incomplete, incomplete_details.reason
// content_filter, its message item incomplete, streamed or not.
func TestResponsesRefusalIsIncomplete(t *testing.T) {
	_, _, sdk := start(t, 32000, refuser)
	for _, stream := range []bool{false, true} {
		params := responses.ResponseNewParams{Model: "fake/m",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("A forbidden question (%v).", stream))}}
		got := created(t, sdk, params, stream)
		var items []string
		for _, it := range got.Output {
			items = append(items, it.Type+" "+it.Status)
		}
		if got.Status != "incomplete" || got.IncompleteDetails.Reason != "content_filter" || got.OutputText() != refusalText ||
			len(items) != 1 || items[0] != "message incomplete" {
			t.Fatalf("stream %v: status %q, incomplete_details %q, text %q, items %q", stream, got.Status,
				got.IncompleteDetails.Reason, got.OutputText(), items)
		}
	}
}

// TestAResponseRefusedSentAgainUnderItsKeyIsIncomplete: a refused
// response that was not stored (store false), sent again under its
// Idempotency-Key, is read back from the transcript as it ended:
// incomplete, content_filter, without asking the provider again.
func TestAResponseRefusedSentAgainUnderItsKeyIsIncomplete(t *testing.T) {
	_, fake, sdk := start(t, 32000, refuser)
	base := created(t, sdk, responses.ResponseNewParams{Model: "fake/m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hello.")}}, false)
	params := responses.ResponseNewParams{Model: "fake/m", Store: openai.Bool(false), PreviousResponseID: openai.String(base.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("A forbidden question.")}}
	first := created(t, sdk, params, false, withKey("k-refused"))
	asked := turnRequests(fake)
	again := created(t, sdk, params, false, withKey("k-refused"))
	for _, r := range []responses.Response{first, again} {
		if r.Status != "incomplete" || r.IncompleteDetails.Reason != "content_filter" || r.OutputText() != refusalText {
			t.Fatalf("status %q, incomplete_details %q, text %q: want incomplete, content_filter, the refusal's text", r.Status, r.IncompleteDetails.Reason, r.OutputText())
		}
	}
	if n := turnRequests(fake); n != asked {
		t.Fatalf("the provider was asked %d times more for a response sent again under its key", n-asked)
	}
}
