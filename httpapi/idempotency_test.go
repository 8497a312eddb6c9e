package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit/daemontest"
)

// TestAMessageSentAgainUnderItsKeyIsAnsweredFromTheTranscript: a message
// whose answer was lost, sent again with its Idempotency-Key, is not
// stored again: its stored turn comes back, replayed, as SSE through the
// Go client and as JSON; the same key with other words is 422 key_reused,
// a malformed key 400, and a new key a new message.
func TestAMessageSentAgainUnderItsKeyIsAnsweredFromTheTranscript(t *testing.T) {
	fake := newFake(t, echoScript)
	d := daemontest.Start(t, baseConfig(t, fake.URL()), nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := d.Client.SendKeyed(ctx, c.ID, "key-1", api.SendMessageRequest{Content: "hello"}, nil)
	if err != nil || first.Replayed || len(first.Messages) != 2 {
		t.Fatalf("the first send: %+v, %v", first, err)
	}
	var events []string
	again, err := d.Client.SendKeyed(ctx, c.ID, "key-1", api.SendMessageRequest{Content: "hello"}, func(ev api.Event) { events = append(events, ev.Type) })
	if err != nil || !again.Replayed || !sameMessages(again.Messages, first.Messages) {
		t.Fatalf("sent again: %+v, %v; want %+v replayed", again, err, first.Messages)
	}
	if want := []string{api.EventTurnStarted, api.EventMessage, api.EventMessage, api.EventTurnCompleted}; strings.Join(events, ",") != strings.Join(want, ",") {
		t.Fatalf("the replay's events %v, want %v", events, want)
	}
	send := func(key, content string) (int, api.TurnResult, api.Error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.Server.URL+"/v1/chats/"+c.ID+"/messages", strings.NewReader(`{"content":"`+content+`"}`))
		req.Header.Set(httpapi.IdempotencyKeyHeader, key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var res api.TurnResult
		var e api.Error
		_ = json.Unmarshal(body, &res)
		_ = json.Unmarshal(body, &e)
		return resp.StatusCode, res, e
	}
	if status, res, _ := send("key-1", "hello"); status != 200 || !res.Replayed || !sameMessages(res.Messages, first.Messages) {
		t.Fatalf("sent again as JSON: %d %+v", status, res)
	}
	for key, want := range map[string]struct {
		status int
		kind   string
	}{
		"key-1":                  {422, "key_reused"},
		"a key":                  {400, "bad_request"},
		strings.Repeat("k", 256): {400, "bad_request"},
	} {
		if status, _, e := send(key, "goodbye"); status != want.status || e.Kind != want.kind {
			t.Fatalf("key %.20q with other words: %d %q (%s), want %d %q", key, status, e.Kind, e.Message, want.status, want.kind)
		}
	}
	if msgs, _ := d.Hub.Transcript(ctx, "default", c.ID, 0, 0); len(msgs) != 2 || msgs[0].IdempotencyKey != "key-1" || msgs[1].IdempotencyKey != "" {
		t.Fatalf("the transcript after the same key three times and refusals: %+v, want the message, keyed, and its answer", msgs)
	}
	if status, res, _ := send("key-2", "hello"); status != 200 || res.Replayed || len(res.Messages) != 2 || res.Messages[0].Seq != 3 {
		t.Fatalf("a new key: %d %+v", status, res)
	}
	var aerr *api.Error
	if _, err := d.Client.SendKeyed(ctx, "nochat", "key-1", api.SendMessageRequest{Content: "hello"}, nil); !errors.As(err, &aerr) || aerr.Status != 404 {
		t.Fatalf("a key in an unknown chat: %v, want 404", err)
	}
}

func sameMessages(a, b []api.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Seq != b[i].Seq || a[i].Role != b[i].Role || a[i].Content != b[i].Content {
			return false
		}
	}
	return true
}
