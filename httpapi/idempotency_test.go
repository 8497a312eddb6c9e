package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
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

func seqsOf(msgs []api.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
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

// TestAKeyedMessageFoldedAwayIsAnsweredFromTheStoreAcrossARestart: on a
// small window a chat folds its keyed first message out of what its
// session keeps; the message sent again under its key is answered from the
// transcript (replayed), nothing stored and no model asked, its key with
// other words is still 422 key_reused; the same after the daemon restarts
// on the same data. On Badger and on Postgres.
func TestAKeyedMessageFoldedAwayIsAnsweredFromTheStoreAcrossARestart(t *testing.T) {
	const win = 4096
	script, _ := summaryScript()
	fake := openaifake.New(openaifake.Options{Window: win, Script: script})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), win)
	cfg.Limits.RequestsPerSecond = 1e6
	daemontest.EachStore(t, cfg, func(t *testing.T, cfg configs.Config) {
		cfg.DataDir = t.TempDir()
		d := daemontest.Start(t, cfg, nil)
		ctx := context.Background()
		c := newChat(t, d, "")
		long := func(i int) api.SendMessageRequest {
			return api.SendMessageRequest{Content: fmt.Sprintf("Note %d: %s", i, strings.Repeat("the order ships from shelf B by truck to Porto; ", 25))}
		}
		first, err := d.Client.SendKeyed(ctx, c.ID, "key-folded", long(0), nil)
		if err != nil || first.Replayed || len(first.Messages) != 2 || first.Messages[0].Seq != 1 {
			t.Fatalf("the keyed first message: %+v, %v", first, err)
		}
		for i := 1; chatContext(t, d, c.ID).FirstKeptSeq <= first.Messages[1].Seq; i++ {
			if i > 60 {
				t.Fatalf("no fold after %d turns on a %d-token window", i, win)
			}
			send(t, d, c.ID, long(i).Content)
		}
		stored, _ := d.Hub.Transcript(ctx, "default", c.ID, 0, 0)
		turns := len(requestsOf(fake, kindTurn))
		for _, name := range []string{"folded", "folded, after a restart"} {
			again, err := d.Client.SendKeyed(ctx, c.ID, "key-folded", long(0), nil)
			if err != nil || !again.Replayed || !sameMessages(again.Messages, first.Messages) {
				t.Fatalf("%s: sent again: seqs %v replayed %v, %v; want seqs %v replayed", name, seqsOf(again.Messages), again.Replayed, err, seqsOf(first.Messages))
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.Server.URL+"/v1/chats/"+c.ID+"/messages", strings.NewReader(`{"content":"other words"}`))
			req.Header.Set(httpapi.IdempotencyKeyHeader, "key-folded")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnprocessableEntity {
				t.Fatalf("%s: the key with other words: %d, want 422", name, resp.StatusCode)
			}
			if now, _ := d.Hub.Transcript(ctx, "default", c.ID, 0, 0); len(now) != len(stored) {
				t.Fatalf("%s: the transcript went from %d to %d messages", name, len(stored), len(now))
			}
			if n := len(requestsOf(fake, kindTurn)); n != turns {
				t.Fatalf("%s: the model was asked %d more times", name, n-turns)
			}
			d = d.Restart()
		}
		// A new key is a new message, folded chat or not; a key is its
		// chat's alone.
		if res, err := d.Client.SendKeyed(ctx, c.ID, "key-new", long(0), nil); err != nil || res.Replayed || res.Messages[0].Seq != int64(len(stored)+1) {
			t.Fatalf("a new key: seqs %v replayed %v, %v", seqsOf(res.Messages), res.Replayed, err)
		}
		other := newChat(t, d, "")
		if res, err := d.Client.SendKeyed(ctx, other.ID, "key-folded", long(0), nil); err != nil || res.Replayed || res.Messages[0].Seq != 1 {
			t.Fatalf("the key in another chat: seqs %v replayed %v, %v; want a new message there", seqsOf(res.Messages), res.Replayed, err)
		}
	})
}

// TestAKeyedRetryIsNotChargedAsANewMessage: a message answered from the
// chat under its key adds nothing, so it takes nothing of the tenant's
// ingest rate: with the burst spent by the message itself, sending it
// again is answered (not 429), while a new message is refused.
func TestAKeyedRetryIsNotChargedAsANewMessage(t *testing.T) {
	fake := newFake(t, echoScript)
	cfg := baseConfig(t, fake.URL())
	cfg.Limits.IngestBytesPerSecond = 1 // a burst of 8 bytes, refilled too slowly to matter here
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := d.Client.SendKeyed(ctx, c.ID, "key-1", api.SendMessageRequest{Content: "12345678"}, nil)
	if err != nil || first.Replayed {
		t.Fatalf("the first send: %+v, %v", first, err)
	}
	for i := range 3 {
		again, err := d.Client.SendKeyed(ctx, c.ID, "key-1", api.SendMessageRequest{Content: "12345678"}, nil)
		if err != nil || !again.Replayed {
			t.Fatalf("sent again (%d): %+v, %v; want it answered from the chat, not charged", i+1, again, err)
		}
	}
	var aerr *api.Error
	if _, err := d.Client.SendKeyed(ctx, c.ID, "key-2", api.SendMessageRequest{Content: "abcdefgh"}, nil); !errors.As(err, &aerr) || aerr.Status != http.StatusTooManyRequests {
		t.Fatalf("a new message past the rate: %v, want 429", err)
	}
}
