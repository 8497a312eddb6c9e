package oai_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// cutOnce answers like talker, except that the first time it is asked a
// message containing "cut" its stream drops after three deltas, and a
// message containing "huge" is answered past any answer cap.
func cutOnce() testkit.Script {
	var mu sync.Mutex
	cut := map[string]bool{}
	return func(r testkit.Received) testkit.Reply {
		last := r.Messages[len(r.Messages)-1].Content
		switch {
		case !isTurn(r):
		case strings.Contains(last, "huge"):
			return testkit.Reply{Text: strings.Repeat("an answer that never ends. ", 8<<10), ChunkRunes: 8192}
		case strings.Contains(last, "cut"):
			mu.Lock()
			first := !cut[last]
			cut[last] = true
			mu.Unlock()
			if first {
				// The role chunk, three deltas, then the connection drops.
				return testkit.Reply{Text: "Three little deltas and then nothing more", ChunkRunes: 4, CutAfterChunks: 4}
			}
		}
		return talker(r)
	}
}

// sseEvent is one data line of a Chat Completions stream.
type sseEvent struct {
	Choices []struct {
		Delta        struct{ Content string }
		FinishReason *string `json:"finish_reason"`
	}
	Error *struct {
		Message string
		Type    string
		Code    *string
	}
}

// rawStream posts a streamed Chat Completions request and reads its data
// lines as they came, [DONE] included.
func rawStream(t *testing.T, base string, msgs []map[string]string, chat string) (events []sseEvent, done bool, chatID string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "fake/m", "messages": msgs, "stream": true})
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer tok-a")
	if chat != "" {
		req.Header.Set(oai.ChatHeader, chat)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream answered %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		switch {
		case !ok:
		case data == "[DONE]":
			done = true
		default:
			var ev sseEvent
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("data line %q: %v", data, err)
			}
			events = append(events, ev)
		}
	}
	return events, done, resp.Header.Get(oai.ChatHeader)
}

// TestChatCompletionsAnInterruptedAnswerIsAnError: a provider stream that
// drops after some deltas is a failure, not an answer: a 502 in OpenAI's
// shape when whole; streamed, the deltas then an error event the SDKs
// raise, with no finish_reason and no [DONE]. The chat's tip stays where
// it was, so the client's retry of the same history continues the chat.
func TestChatCompletionsAnInterruptedAnswerIsAnError(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: cutOnce()})
	t.Cleanup(fake.Close)
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), map[string]string{"tok-a": "a"})
	sdk := openai.NewClient(option.WithBaseURL(d.Server.URL+"/v1"), option.WithAPIKey("tok-a"), option.WithMaxRetries(0))
	native := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	ctx := context.Background()

	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprint("streamed=", streamed), func(t *testing.T) {
			hello, ask := fmt.Sprintf("hello (%v)", streamed), fmt.Sprintf("please cut (%v)", streamed)
			first, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(hello)}})
			if err != nil {
				t.Fatal(err)
			}
			history := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(hello), first.Choices[0].Message.ToParam(), openai.UserMessage(ask)}
			var chat string
			if !streamed {
				var resp *http.Response
				_, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: history}, option.WithResponseInto(&resp))
				var aerr *openai.Error
				if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusBadGateway || aerr.Type != "server_error" || aerr.Code != api.ProblemProvider || aerr.Message == "" {
					t.Fatalf("an interrupted answer, whole: %v; want a 502 server_error", err)
				}
				chat = resp.Header.Get(oai.ChatHeader)
			} else {
				msgs := []map[string]string{{"role": "user", "content": hello}, {"role": "assistant", "content": first.Choices[0].Message.Content}, {"role": "user", "content": ask}}
				events, done, id := rawStream(t, d.Server.URL, msgs, "")
				chat = id
				var text string
				for i, ev := range events {
					for _, c := range ev.Choices {
						text += c.Delta.Content
						if c.FinishReason != nil {
							t.Errorf("event %d: finish_reason %q on an interrupted answer", i, *c.FinishReason)
						}
					}
				}
				last := events[len(events)-1]
				if text == "" || last.Error == nil || last.Error.Type != "server_error" || last.Error.Code == nil || *last.Error.Code != api.ProblemProvider || last.Error.Message == "" {
					t.Fatalf("streamed %q, last event %+v; want the deltas, then an error event", text, last)
				}
				if done {
					t.Error("[DONE] after the error: an interrupted answer is not complete")
				}
				// The SDK raises it, after the deltas it yielded.
				stream := sdk.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: append(history[:2:2], openai.UserMessage("cut again"))})
				for stream.Next() {
				}
				if stream.Err() == nil || !strings.Contains(stream.Err().Error(), "server_error") {
					t.Errorf("the SDK's stream ended with %v; want the error event raised", stream.Err())
				}
			}

			// The same history again continues the same chat: the failed
			// answer did not become its tip.
			var resp *http.Response
			again, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: history}, option.WithResponseInto(&resp))
			if err != nil || again.Choices[0].FinishReason != "stop" {
				t.Fatalf("the retry: %v", err)
			}
			if got := resp.Header.Get(oai.ChatHeader); got != chat || chat == "" {
				t.Fatalf("the retry went to chat %q, not %q", got, chat)
			}
			stored, err := native.Transcript(ctx, chat)
			if err != nil {
				t.Fatal(err)
			}
			var partial int
			for _, m := range stored {
				if m.Partial {
					partial++
				}
			}
			if partial == 0 || stored[len(stored)-1].Partial || stored[len(stored)-2].Content != ask {
				t.Fatalf("the chat holds %d partial answers and ends %+v", partial, stored[len(stored)-2:])
			}
		})
	}
}

// cappedDaemon serves cutOnce's model with limits.max_answer_bytes, which
// it returns, at 64 KB.
func cappedDaemon(t *testing.T) (openai.Client, int) {
	t.Helper()
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: cutOnce()})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Limits.MaxAnswerBytes = 64 << 10
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "a"})
	return sdkFor(d, "tok-a"), cfg.Limits.MaxAnswerBytes
}

// TestChatCompletionsACappedAnswerFinishesWithLength: an answer cut at
// limits.max_answer_bytes is an answer, not a failure: finish_reason
// "length", whole and streamed.
func TestChatCompletionsACappedAnswerFinishesWithLength(t *testing.T) {
	sdk, maxAnswer := cappedDaemon(t)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "fake/m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a huge answer")}}
	c, err := sdk.Chat.Completions.New(ctx, params)
	if err != nil || c.Choices[0].FinishReason != "length" || len(c.Choices[0].Message.Content) != maxAnswer {
		t.Fatalf("whole: %v", err)
	}
	params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("another huge answer")}
	stream := sdk.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || acc.Choices[0].FinishReason != "length" {
		t.Fatalf("streamed: %v, %+v", err, acc.Choices)
	}
}

// TestResponsesACappedAnswerIsIncomplete: the same cut on Responses is an
// incomplete response, as a cut at max_output_tokens is, not a failed one:
// its message item is incomplete and carries the part kept, whole and
// streamed, and the stored response says the same.
func TestResponsesACappedAnswerIsIncomplete(t *testing.T) {
	sdk, maxAnswer := cappedDaemon(t)
	ctx := context.Background()
	for _, stream := range []bool{false, true} {
		params := responses.ResponseNewParams{Model: "fake/m",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("a huge answer (%v)", stream))}}
		got := created(t, sdk, params, stream)
		if got.Status != "incomplete" || got.IncompleteDetails.Reason != "max_output_tokens" || got.Error.Message != "" ||
			len(got.Output) != 1 || got.Output[0].Status != "incomplete" || len(got.OutputText()) != maxAnswer {
			t.Fatalf("stream %v: status %q (%q), error %q, %d items, %d bytes of text", stream, got.Status,
				got.IncompleteDetails.Reason, got.Error.Message, len(got.Output), len(got.OutputText()))
		}
		stored, err := sdk.Responses.Get(ctx, got.ID, responses.ResponseGetParams{})
		if err != nil || stored.Status != "incomplete" || stored.Output[0].Status != "incomplete" {
			t.Fatalf("stream %v: stored %v, %q", stream, err, stored.Status)
		}
	}
}
