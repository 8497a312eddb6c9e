package oai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// withKey sends a request with an Idempotency-Key, as a client of the SDK
// does per request (the SDK sends the same one on its own retries).
func withKey(key string) option.RequestOption {
	return option.WithHeader(oai.IdempotencyKeyHeader, key)
}

// heldScript answers as talker, but holds its answer to "held question"
// until release is closed, and counts the turn requests ending with each
// message.
func heldScript(release <-chan struct{}) (testkit.Script, func(last string) int) {
	var mu sync.Mutex
	asked := map[string]int{}
	return func(r testkit.Received) testkit.Reply {
			if !isTurn(r) {
				return talker(r)
			}
			last := r.Messages[len(r.Messages)-1].Content
			last = last[strings.LastIndex(last, "\n")+1:]
			mu.Lock()
			asked[last]++
			mu.Unlock()
			if last == "held question" {
				<-release
			}
			return talker(r)
		}, func(last string) int {
			mu.Lock()
			defer mu.Unlock()
			return asked[last]
		}
}

// streamFinal streams a response, feeding its events to the SDK's
// accumulator, and returns the final response once the accumulator agrees
// with it; joined is closed at response.created.
func streamFinal(ctx context.Context, sdk openai.Client, params responses.ResponseNewParams, joined chan<- struct{}, opts ...option.RequestOption) (responses.Response, error) {
	s := sdk.Responses.NewStreaming(ctx, params, opts...)
	defer s.Close()
	var acc responses.ResponseAccumulator
	var final responses.Response
	for s.Next() {
		ev := s.Current()
		var same responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(ev.RawJSON()), &same); err != nil {
			return final, err
		}
		if err := acc.AddEvent(same); err != nil {
			return final, err
		}
		switch ev.Type {
		case "response.created":
			close(joined)
		case "response.completed", "response.incomplete", "response.failed":
			final = ev.Response
		}
	}
	if err := s.Err(); err != nil {
		return final, err
	}
	if rebuilt, err := acc.ReconstructedResponse(); err != nil || rebuilt.ID != final.ID || rebuilt.OutputText() != final.OutputText() {
		return final, errors.Join(err, errors.New("the accumulator rebuilt another response than the stream ended with"))
	}
	return final, nil
}

// TestAResponseSentAgainUnderItsKeyIsStoredAndAnsweredOnce: a message sent
// to a chain with an Idempotency-Key and sent again with the same key —
// once its response ended, while its turn runs (whole and streamed), once
// the chat folded it away, and after a restart — is stored once and
// answered by one response, the same id and words every time; the key with
// other words is 422; the provider answers it once. A response that was
// not stored (store false) is read back from the transcript.
func TestAResponseSentAgainUnderItsKeyIsStoredAndAnsweredOnce(t *testing.T) {
	release := make(chan struct{})
	script, asked := heldScript(release)
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: script})
	t.Cleanup(fake.Close)
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), map[string]string{"tok-a": "a"})
	sdk := sdkFor(d, "tok-a")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	first := created(t, sdk, responses.ResponseNewParams{Model: "fake/m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}, false)
	ask := func(prev, text string) responses.ResponseNewParams {
		return responses.ResponseNewParams{Model: "fake/m", PreviousResponseID: openai.String(prev),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}}
	}
	keyed := ask(first.ID, "a keyed question")
	one := created(t, sdk, keyed, false, withKey("k-1"))
	chatID := onlyChat(t, d)
	want := []string{"hello", first.OutputText(), "a keyed question", one.OutputText()}
	same := func(what string, r responses.Response) {
		t.Helper()
		if r.ID != one.ID || r.OutputText() != one.OutputText() || r.Status != responses.ResponseStatusCompleted {
			t.Fatalf("%s: response %s %q (%s), want %s %q", what, r.ID, r.OutputText(), r.Status, one.ID, one.OutputText())
		}
		if got := contents(t, d, chatID); !slices.Equal(got, want) {
			t.Fatalf("%s: the chat holds %q, want %q", what, got, want)
		}
		if n := asked("a keyed question"); n != 1 {
			t.Fatalf("%s: the provider was asked %d times for the keyed question", what, n)
		}
	}
	var oerr *openai.Error
	if _, err := sdk.Responses.New(ctx, ask(one.ID, "a bad key"), withKey("not a key")); !errors.As(err, &oerr) || oerr.StatusCode != http.StatusBadRequest {
		t.Fatalf("a key with a space: %v, want 400 (and nothing stored)", err)
	}
	same("sent again", created(t, sdk, keyed, false, withKey("k-1")))
	same("sent again, streamed", created(t, sdk, keyed, true, withKey("k-1")))
	if _, err := sdk.Responses.New(ctx, ask(first.ID, "other words"), withKey("k-1")); !errors.As(err, &oerr) || oerr.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("the key with other words: %v, want 422", err)
	}

	// Sent again while its turn runs: the retries join it.
	held := ask(one.ID, "held question")
	type answer struct {
		r   responses.Response
		err error
	}
	answers := make(chan answer, 3)
	whole := func(opts ...option.RequestOption) {
		r, err := sdk.Responses.New(ctx, held, opts...)
		if err != nil {
			answers <- answer{err: err}
			return
		}
		answers <- answer{r: *r}
	}
	go whole(withKey("k-2"))
	for !slices.Contains(contents(t, d, chatID), "held question") {
		time.Sleep(5 * time.Millisecond)
	}
	joined := make(chan struct{})
	retrying := option.WithMaxRetries(5) // a retry that comes before the turn says it started is 409, and the SDK retries it
	go func() {
		r, err := streamFinal(ctx, sdk, held, joined, withKey("k-2"), retrying)
		answers <- answer{r, err}
	}()
	var got []answer
	select {
	case <-joined:
	case a := <-answers:
		t.Fatalf("an answer before the streamed retry joined: %+v", a)
	}
	// This one joins too, or, should it come after the turn ended, is
	// answered with the response stored: the same either way.
	go whole(withKey("k-2"), retrying)
	close(release)
	var ids, texts []string
	for len(got) < 3 {
		a := <-answers
		got = append(got, a)
		if a.err != nil {
			t.Fatal(a.err)
		}
		ids, texts = append(ids, a.r.ID), append(texts, a.r.OutputText())
	}
	if ids[0] != ids[1] || ids[1] != ids[2] || texts[0] != texts[1] || texts[1] != texts[2] || texts[0] == "" {
		t.Fatalf("the held question and its two retries: ids %q, texts %q; want one response", ids, texts)
	}
	want = append(want, "held question", texts[0])
	if got := contents(t, d, chatID); !slices.Equal(got, want) || asked("held question") != 1 {
		t.Fatalf("after the retries while the turn ran: the chat holds %q (want %q), the provider was asked %d times", got, want, asked("held question"))
	}
	stored, err := sdk.Responses.Get(ctx, ids[0], responses.ResponseGetParams{})
	if err != nil || stored.OutputText() != texts[0] {
		t.Fatalf("the held question's response as stored: %+v, %v", stored, err)
	}

	// A response not stored is read back from the transcript.
	unstored := ask(ids[0], "not stored")
	unstored.Store = openai.Bool(false)
	three := created(t, sdk, unstored, false, withKey("k-3"))
	want = append(want, "not stored", three.OutputText())

	// Folded away, and after a restart, the same.
	if err := (&api.Client{BaseURL: d.Server.URL, Token: "tok-a"}).Post(ctx, "/v1/chats/"+chatID+"/compact", nil, &api.Compacted{}); err != nil {
		t.Fatal(err)
	}
	if c, _ := (&api.Client{BaseURL: d.Server.URL, Token: "tok-a"}).Context(ctx, chatID); c.FirstKeptSeq <= 5 {
		t.Fatalf("compact kept from seq %d: the keyed messages are not folded", c.FirstKeptSeq)
	}
	for _, name := range []string{"folded", "after a restart"} {
		same(name, created(t, sdk, keyed, false, withKey("k-1")))
		again := created(t, sdk, unstored, true, withKey("k-3"))
		if again.ID != three.ID || again.OutputText() != three.OutputText() {
			t.Fatalf("%s: the unstored response sent again: %s %q, want %s %q", name, again.ID, again.OutputText(), three.ID, three.OutputText())
		}
		d = d.Restart()
		sdk = sdkFor(d, "tok-a")
	}
	if got := contents(t, d, chatID); !slices.Equal(got, want) {
		t.Fatalf("the chat holds %q, want %q", got, want)
	}
	if _, err := sdk.Responses.Get(ctx, three.ID, responses.ResponseGetParams{}); !errors.As(err, &oerr) || oerr.StatusCode != http.StatusNotFound {
		t.Fatalf("a response of store false, read back: %v; want it still not stored (404)", err)
	}
}

// TestConversationItemsSentAgainUnderTheirKeyAreStoredOnce: items added to
// a conversation with an Idempotency-Key, sent again with it, are answered
// as stored (the same item ids), not stored twice; other items under the
// key, more of them included, are 422.
func TestConversationItemsSentAgainUnderTheirKeyAreStoredOnce(t *testing.T) {
	d, _, sdk := start(t, 32000, talker)
	ctx := context.Background()
	conv, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	items := func(texts ...string) conversations.ItemNewParams {
		var its []responses.ResponseInputItemUnionParam
		for _, text := range texts {
			its = append(its, responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser))
		}
		return conversations.ItemNewParams{Items: its}
	}
	added, err := sdk.Conversations.Items.New(ctx, conv.ID, items("one", "two"), withKey("k-items"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := sdk.Conversations.Items.New(ctx, conv.ID, items("one", "two"), withKey("k-items"))
	if err != nil || again.FirstID != added.FirstID || again.LastID != added.LastID || len(again.Data) != 2 {
		t.Fatalf("sent again: %+v, %v; want items %s..%s", again, err, added.FirstID, added.LastID)
	}
	var oerr *openai.Error
	if _, err := sdk.Conversations.Items.New(ctx, conv.ID, items("three"), withKey("not a key")); !errors.As(err, &oerr) || oerr.StatusCode != http.StatusBadRequest {
		t.Fatalf("a key with a space: %v, want 400", err)
	}
	if _, err := sdk.Conversations.Items.New(ctx, conv.ID, items("one", "three"), withKey("k-items")); !errors.As(err, &oerr) || oerr.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("other items under the key: %v, want 422", err)
	}
	// The items the conversation ends with, stored whole, are no add cut
	// partway: more of them under the key are other items, not the rest.
	if _, err := sdk.Conversations.Items.New(ctx, conv.ID, items("one", "two", "three"), withKey("k-items")); !errors.As(err, &oerr) || oerr.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("more items under the key: %v, want 422", err)
	}
	chatID := strings.TrimPrefix(conv.ID, "conv_")
	if got := contents(t, d, chatID); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("the conversation holds %q", got)
	}
}
