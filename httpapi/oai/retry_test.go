package oai_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// providerRefusal is OpenAI's 400 for a request it cannot read: a fault
// agentd does not retry itself, so the turn fails at once.
var providerRefusal = testkit.Reply{Status: http.StatusBadRequest,
	Body: `{"error":{"message":"Invalid 'messages': the request could not be read.","type":"invalid_request_error","param":null,"code":null}}`}

// refusedOnce answers like talker, except that a turn's first request
// ending with a message that contains "flaky" is refused (providerRefusal).
// asked counts the turn requests ending with each message. (Person's
// messages in a row reach the model as one, joined by blank lines: the
// last of them is what the request ends with.)
func refusedOnce() (testkit.Script, func(last string) int) {
	var mu sync.Mutex
	asked := map[string]int{}
	script := func(r testkit.Received) testkit.Reply {
		if !isTurn(r) {
			return talker(r)
		}
		last := r.Messages[len(r.Messages)-1].Content
		last = last[strings.LastIndex(last, "\n")+1:]
		mu.Lock()
		asked[last]++
		first := asked[last] == 1
		mu.Unlock()
		if first && strings.Contains(last, "flaky") {
			return providerRefusal
		}
		return talker(r)
	}
	return script, func(last string) int {
		mu.Lock()
		defer mu.Unlock()
		return asked[last]
	}
}

// onlyChat is the id of tenant a's chat, which must be its only one.
func onlyChat(t *testing.T, d *daemontest.Daemon) string {
	t.Helper()
	chats, err := (&api.Client{BaseURL: d.Server.URL, Token: "tok-a"}).Chats(context.Background(), "")
	if err != nil || len(chats.Chats) != 1 {
		t.Fatalf("the tenant has %+v (%v); want the one chat", chats.Chats, err)
	}
	return chats.Chats[0].ID
}

// contents are a chat's stored messages' words, in order.
func contents(t *testing.T, d *daemontest.Daemon, chatID string) []string {
	t.Helper()
	stored, err := (&api.Client{BaseURL: d.Server.URL, Token: "tok-a"}).Transcript(context.Background(), chatID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range stored {
		out = append(out, m.Content)
	}
	return out
}

// TestAMessageTheSDKRetriesIsStoredOnce: a turn that fails at the provider
// leaves its message in the chat, unanswered, and the request is answered
// 502; the official SDK retries it (its default), and the retry's turn
// answers the message as stored. A new chat's first message and a later
// one alike: one chat, each message once.
func TestAMessageTheSDKRetriesIsStoredOnce(t *testing.T) {
	script, asked := refusedOnce()
	d, sdk := retrying(t, script)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var resp *http.Response
	first, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a flaky start")}}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	chatID := resp.Header.Get(oai.ChatHeader)
	history := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a flaky start"), first.Choices[0].Message.ToParam(), openai.UserMessage("a flaky second")}
	second, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: history}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get(oai.ChatHeader); got != chatID {
		t.Fatalf("the second message went to chat %q, not %q", got, chatID)
	}
	if n := asked("a flaky start") + asked("a flaky second"); n != 4 {
		t.Fatalf("the provider was asked %d times; want each message refused once, then answered", n)
	}
	want := []string{"a flaky start", first.Choices[0].Message.Content, "a flaky second", second.Choices[0].Message.Content}
	if got := contents(t, d, chatID); !slices.Equal(got, want) {
		t.Fatalf("the chat holds %q, want %q", got, want)
	}
	onlyChat(t, d)
}

// TestAHistoryWhoseTurnFailedIsKnown: after a failed turn, the chat is
// found both by the same history again (whose turn answers what the chat
// holds, stored once: two new messages, whole or streamed) and by a
// history that says something else in place of the failed message (stored
// after it, as before).
func TestAHistoryWhoseTurnFailedIsKnown(t *testing.T) {
	script, _ := refusedOnce()
	d, _, _ := start(t, 32000, script)
	r := postCC(t, d, "tok-a", "", []any{userMsg("hello")})
	if r.status != http.StatusOK {
		t.Fatalf("the first turn: %d %+v", r.status, r.body)
	}
	chatID, a1 := r.chatID, r.body.Choices[0].Message.Content
	answer := func(s string) any { return map[string]any{"role": "assistant", "content": s} }

	if r := postCC(t, d, "tok-a", "", []any{userMsg("hello"), answer(a1), userMsg("a flaky question")}); r.status != http.StatusBadGateway {
		t.Fatalf("the failing turn: %d %+v", r.status, r.body)
	}
	r = postCC(t, d, "tok-a", "", []any{userMsg("hello"), answer(a1), userMsg("another question")})
	if r.status != http.StatusOK || r.chatID != chatID {
		t.Fatalf("another question after the failure: %d in chat %q, not %q: %+v", r.status, r.chatID, chatID, r.body)
	}
	a2 := r.body.Choices[0].Message.Content

	two := []any{userMsg("hello"), answer(a1), userMsg("another question"), answer(a2), userMsg("part one"), userMsg("a flaky part two")}
	if r := postCC(t, d, "tok-a", "", two); r.status != http.StatusBadGateway {
		t.Fatalf("two messages, failing: %d %+v", r.status, r.body)
	}
	r = postCC(t, d, "tok-a", "", two)
	if r.status != http.StatusOK || r.chatID != chatID {
		t.Fatalf("the retry of two messages: %d in chat %q, not %q", r.status, r.chatID, chatID)
	}
	a3 := r.body.Choices[0].Message.Content

	streamed := []map[string]string{{"role": "user", "content": "hello"}, {"role": "assistant", "content": a1},
		{"role": "user", "content": "another question"}, {"role": "assistant", "content": a2},
		{"role": "user", "content": "part one"}, {"role": "user", "content": "a flaky part two"}, {"role": "assistant", "content": a3},
		{"role": "user", "content": "a flaky stream"}}
	if events, done, _ := rawStream(t, d.Server.URL, streamed, ""); done || events[len(events)-1].Error == nil {
		t.Fatalf("the failing stream ended with %+v (done %v); want an error event", events[len(events)-1], done)
	}
	events, done, id := rawStream(t, d.Server.URL, streamed, "")
	if !done || id != chatID {
		t.Fatalf("the stream's retry: done %v in chat %q, not %q", done, id, chatID)
	}
	var a4 string
	for _, ev := range events {
		for _, c := range ev.Choices {
			a4 += c.Delta.Content
		}
	}
	want := []string{"hello", a1, "a flaky question", "another question", a2, "part one", "a flaky part two", a3, "a flaky stream", a4}
	if got := contents(t, d, chatID); !slices.Equal(got, want) {
		t.Fatalf("the chat holds %q,\nwant %q", got, want)
	}
}

// TestAResponseRetriedAfterItFailedStoresItsInputOnce: on the Responses
// surface, the same input on the same previous_response_id after the
// response failed is answered as the chat holds it.
func TestAResponseRetriedAfterItFailedStoresItsInputOnce(t *testing.T) {
	script, _ := refusedOnce()
	d, _, sdk := start(t, 32000, script)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := sdk.Responses.New(ctx, responses.ResponseNewParams{Model: "fake/m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	params := responses.ResponseNewParams{Model: "fake/m", PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("a flaky follow-up")}}
	if failed, err := sdk.Responses.New(ctx, params); err == nil && failed.Status != responses.ResponseStatusFailed {
		t.Fatalf("the follow-up at a refusing provider: %+v", failed)
	}
	again, err := sdk.Responses.New(ctx, params)
	if err != nil || again.Status != responses.ResponseStatusCompleted {
		t.Fatalf("the retry: %v %+v", err, again)
	}
	want := []string{"hello", first.OutputText(), "a flaky follow-up", again.OutputText()}
	if got := contents(t, d, onlyChat(t, d)); !slices.Equal(got, want) {
		t.Fatalf("the chat holds %q, want %q", got, want)
	}
}

// retrying starts a daemon for tenant a on an OpenAI-style fake answering
// script, and an SDK client of it that retries as the SDK does by default.
func retrying(t *testing.T, script testkit.Script) (*daemontest.Daemon, openai.Client) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: script})
	t.Cleanup(fake.Close)
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), map[string]string{"tok-a": "a"})
	return d, openai.NewClient(option.WithBaseURL(d.Server.URL+"/v1"), option.WithAPIKey("tok-a"), option.WithMaxRetries(3))
}

// losing is an SDK option that loses the answers of the first n attempts of
// each request after agentd made them, as a connection cut on the way back
// does, so that the SDK sends the request again by itself (its default
// retries); tries has the X-Stainless-Retry-Count of every attempt.
func losing(n int, tries *[]string) option.RequestOption {
	return option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		try := req.Header.Get(oai.RetryCountHeader)
		*tries = append(*tries, try)
		res, err := next(req)
		if err != nil {
			return res, err
		}
		if i, _ := strconv.Atoi(try); i < n {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			return nil, errors.New("the connection was reset (the test lost this answer)")
		}
		return res, nil
	})
}

// TestAnAnswerTheSDKLostIsNotAskedTwice: a message continuing a response,
// answered and stored, whose answer the client loses on the way back is
// sent again by the official SDK with the same body, counting its retries
// (X-Stainless-Retry-Count) but with no idempotency key: the retry is
// answered with what the chat holds — the message stored once, the
// provider asked once — and so is a second retry, and the chain goes on
// from the response the client got. The same words sent again after the
// same response as a first sending are a new message, answered anew.
func TestAnAnswerTheSDKLostIsNotAskedTwice(t *testing.T) {
	script, asked := heldScript(nil)
	d, sdk := retrying(t, script)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ask := func(prev, text string) responses.ResponseNewParams {
		return responses.ResponseNewParams{Model: "fake/m", PreviousResponseID: openai.String(prev),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}}
	}

	first := created(t, sdk, responses.ResponseNewParams{Model: "fake/m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}, false)
	chatID := onlyChat(t, d)
	want := []string{"hello", first.OutputText()}
	for lost, text := range map[int]string{1: "an answer lost once", 2: "an answer lost twice"} {
		var tries []string
		got, err := sdk.Responses.New(ctx, ask(first.ID, text), losing(lost, &tries))
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if wantTries := []string{"0", "1", "2"}[:lost+1]; !slices.Equal(tries, wantTries) {
			t.Fatalf("%s: the SDK sent retry counts %q, want %q", text, tries, wantTries)
		}
		if n := asked(text); n != 1 {
			t.Fatalf("%s: the provider was asked %d times, want once", text, n)
		}
		want = append(want, text, got.OutputText())
		if c := contents(t, d, chatID); !slices.Equal(c, want) {
			t.Fatalf("%s: the chat holds %q, want %q", text, c, want)
		}
		if stored, err := sdk.Responses.Get(ctx, got.ID, responses.ResponseGetParams{}); err != nil || stored.OutputText() != got.OutputText() {
			t.Fatalf("%s: the response the client got, %s, as stored: %+v, %v", text, got.ID, stored, err)
		}
		first = *got
	}
	next := created(t, sdk, ask(first.ID, "and on"), false)
	again := created(t, sdk, ask(first.ID, "and on"), false)
	if n := asked("and on"); n != 2 || again.ID == next.ID {
		t.Fatalf("the same words after the same response, sent twice: asked %d times, responses %s and %s; want two", n, next.ID, again.ID)
	}
	want = append(want, "and on", next.OutputText(), "and on", again.OutputText())
	if c := contents(t, d, chatID); !slices.Equal(c, want) {
		t.Fatalf("the chat holds %q, want %q", c, want)
	}
}

// TestAChatCompletionTheSDKLostIsNotAskedTwice: a Chat Completions
// history whose answer the client lost — after it ended, whole or
// streamed, or while its turn still ran (the client gave up, as on a
// proxy's timeout) — is sent again by the official SDK with its retry
// count and no key, and answered from the chat it went to: the message
// stored once, the provider asked once, the answer the chat holds, and the
// client's next history goes on in the same chat.
func TestAChatCompletionTheSDKLostIsNotAskedTwice(t *testing.T) {
	release := make(chan struct{})
	script, asked := heldScript(release)
	d, sdk := retrying(t, script)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var history []openai.ChatCompletionMessageParamUnion
	var want []string
	var chatID string
	turn := func(text string, stream bool, opts ...option.RequestOption) {
		t.Helper()
		history = append(history, openai.UserMessage(text))
		params := openai.ChatCompletionNewParams{Model: "fake/m", Messages: history}
		var resp *http.Response
		opts = append(opts, option.WithResponseInto(&resp))
		var answer string
		if stream {
			s := sdk.Chat.Completions.NewStreaming(ctx, params, opts...)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil || len(acc.Choices) != 1 {
				t.Fatalf("%s, streamed: %v, %d choices", text, err, len(acc.Choices))
			}
			answer = acc.Choices[0].Message.Content
		} else {
			c, err := sdk.Chat.Completions.New(ctx, params, opts...)
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			answer = c.Choices[0].Message.Content
		}
		if got := resp.Header.Get(oai.ChatHeader); chatID == "" {
			chatID = got
		} else if got != chatID {
			t.Fatalf("%s went to chat %q, not %q", text, got, chatID)
		}
		if n := asked(text); n != 1 {
			t.Fatalf("%s: the provider was asked %d times, want once", text, n)
		}
		want = append(want, text, answer)
		if c := contents(t, d, chatID); !slices.Equal(c, want) {
			t.Fatalf("%s: the chat holds %q, want %q", text, c, want)
		}
		history = append(history, openai.AssistantMessage(answer))
	}
	var tries []string
	turn("hello", false)
	turn("lost once", false, losing(1, &tries))
	turn("lost twice, streamed", true, losing(2, &tries))
	if want := []string{"0", "1", "0", "1", "2"}; !slices.Equal(tries, want) {
		t.Fatalf("the SDK's attempts had retry counts %q, want %q", tries, want)
	}

	// The client gives up on its first attempt, streamed, while the turn
	// runs, and its retry joins the turn: its stream starts once it
	// joined, and only then does the turn go on.
	gaveUp := option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(req)
		if err != nil {
			return res, err
		}
		if req.Header.Get(oai.RetryCountHeader) != "0" {
			close(release)
			return res, nil
		}
		for asked("held question") == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		res.Body.Close()
		return nil, errors.New("the client gave up (the test cut this attempt)")
	})
	turn("held question", true, gaveUp)
	onlyChat(t, d)
}
