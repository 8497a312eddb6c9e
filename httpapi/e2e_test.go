package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// calculatorScript asks for the calculator when the person says "calculate",
// and otherwise echoes the person's last words.
func calculatorScript(r testkit.Received) testkit.Reply {
	last := r.Messages[len(r.Messages)-1]
	switch {
	case last.Role == chat.RoleTool:
		return testkit.Reply{Text: "The result is " + last.Content + "."}
	case strings.Contains(last.Content, "calculate"):
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "calculate", Arguments: `{"expression":"6*7"}`}}}
	default:
		return testkit.Reply{Text: "You said: " + last.Content}
	}
}

func TestChatSurvivesRestartWithItsTranscriptExact(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: calculatorScript})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var deltas strings.Builder
	var sawToolCall bool
	for _, text := range []string{"hello there", "please calculate six times seven", "thanks"} {
		res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: text}, func(ev api.Event) {
			switch ev.Type {
			case chat.EventMessageDelta:
				var d struct{ Text string }
				_ = json.Unmarshal(ev.Data, &d)
				deltas.WriteString(d.Text)
			case chat.EventToolCall:
				sawToolCall = true
			}
		})
		if err != nil {
			t.Fatalf("send %q: %v", text, err)
		}
		if res.Problem != nil {
			t.Fatalf("send %q: problem %+v", text, res.Problem)
		}
	}
	if !sawToolCall || !strings.Contains(deltas.String(), "The result is 42.") {
		t.Fatalf("tool call seen %v; streamed text %q", sawToolCall, deltas.String())
	}
	before, err := d.Client.Transcript(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	// user, assistant ×3 turns, plus the tool call and its result.
	wantRoles := []api.Role{"user", "assistant", "user", "assistant", "tool", "assistant", "user", "assistant"}
	var roles []api.Role
	for i, m := range before {
		roles = append(roles, m.Role)
		if m.Seq != int64(i+1) {
			t.Fatalf("message %d has seq %d", i, m.Seq)
		}
	}
	if !reflect.DeepEqual(roles, wantRoles) {
		t.Fatalf("roles = %v, want %v", roles, wantRoles)
	}
	if before[4].Content != "42" || before[3].ToolCalls[0].Name != "calculate" {
		t.Fatalf("tool round = %+v / %+v", before[3], before[4])
	}

	d2 := d.Restart()
	after, err := d2.Client.Transcript(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(before)
	b, _ := json.Marshal(after)
	if !bytes.Equal(a, b) {
		t.Fatalf("transcript changed across restart:\nbefore %s\nafter  %s", a, b)
	}
	// The woken chat goes on where it was.
	if _, err := d2.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "still there?"}, nil); err != nil {
		t.Fatal(err)
	}
	again, _ := d2.Client.Transcript(ctx, c.ID)
	if len(again) != len(before)+2 || again[len(before)].Seq != int64(len(before)+1) {
		t.Fatalf("after restart the chat has %d messages", len(again))
	}
}

func TestManyChatsAtOnceKeepEveryTranscriptComplete(t *testing.T) {
	const chats, turns = 200, 3
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: calculatorScript})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Limits.RequestsPerSecond = 1e6
	// 200 clients open and close connections faster than a loaded machine
	// reaps the closed ones; the per-tenant bound is not what this tests.
	cfg.HTTP.ConnsPerTenant = 4 * chats
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, chats)
	ids := make([]string, chats)
	for i := range chats {
		wg.Go(func() {
			c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
			if err != nil {
				errs <- err
				return
			}
			ids[i] = c.ID
			for j := range turns {
				if _, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: fmt.Sprintf("chat %d turn %d", i, j)}, nil); err != nil {
					errs <- fmt.Errorf("chat %d turn %d: %w", i, j, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, id := range ids {
		msgs, err := d.Client.Transcript(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 2*turns {
			t.Fatalf("chat %d has %d messages, want %d", i, len(msgs), 2*turns)
		}
		for j := range turns {
			want := fmt.Sprintf("chat %d turn %d", i, j)
			if msgs[2*j].Content != want || msgs[2*j+1].Content != "You said: "+want {
				t.Fatalf("chat %d turn %d = %q / %q", i, j, msgs[2*j].Content, msgs[2*j+1].Content)
			}
		}
	}
}

func TestBadInputGetsAClearErrorAndChangesNothing(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Limits.MaxBodyBytes = 4096
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if _, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "first"}, nil); err != nil {
		t.Fatal(err)
	}
	before, _ := d.Client.Transcript(ctx, c.ID)
	cases := map[string]struct {
		path, body string
		status     int
		kind       string
	}{
		"malformed json": {"/v1/chats/" + c.ID + "/messages", `{"content": "unterminated`, 400, "bad_request"},
		"unknown field":  {"/v1/chats/" + c.ID + "/messages", `{"contnet": "typo"}`, 400, "bad_request"},
		"empty content":  {"/v1/chats/" + c.ID + "/messages", `{"content": "   "}`, 400, "bad_request"},
		"unknown chat":   {"/v1/chats/nope/messages", `{"content": "hi"}`, 404, "not_found"},
		"body too big":   {"/v1/chats/" + c.ID + "/messages", `{"content": "` + strings.Repeat("x", 5000) + `"}`, 413, "too_large"},
		"empty body":     {"/v1/chats/" + c.ID + "/messages", ``, 400, "bad_request"},
		"a name twice":   {"/v1/chats/" + c.ID + "/messages", `{"content": "one", "content": "two"}`, 400, "bad_request"},
		"a name's case":  {"/v1/chats/" + c.ID + "/messages", `{"Content": "hi"}`, 400, "bad_request"},
		"two values":     {"/v1/chats/" + c.ID + "/messages", `{"content": "one"} {"content": "two"}`, 400, "bad_request"},
		"bad model":      {"/v1/chats", `{"model": "nobody/none"}`, 400, "bad_request"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp, err := http.Post(d.Server.URL+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e api.Error
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatalf("error body is not JSON: %v", err)
			}
			if resp.StatusCode != tc.status || e.Kind != tc.kind || e.Message == "" {
				t.Fatalf("status %d kind %q message %q; want %d %q", resp.StatusCode, e.Kind, e.Message, tc.status, tc.kind)
			}
		})
	}
	after, _ := d.Client.Transcript(ctx, c.ID)
	if !reflect.DeepEqual(before, after) {
		t.Fatal("bad requests changed the transcript")
	}
	var apiErr *api.Error
	if _, err := d.Client.Transcript(ctx, "nope"); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("unknown chat transcript: %v", err)
	}
}

// TestAChatIDOfOddBytesIsNotFoundOnEitherStore: a chat route whose id
// holds bytes Postgres's text refuses (%00, %FF, a lone surrogate's
// %ED%A0%80) is the 404 of an unknown chat on both stores, not a 500.
func TestAChatIDOfOddBytesIsNotFoundOnEitherStore(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000})
	defer fake.Close()
	daemontest.EachStore(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), func(t *testing.T, cfg configs.Config) {
		cfg.DataDir = t.TempDir()
		d := daemontest.Start(t, cfg, nil)
		for _, id := range []string{"x%00", "x%FF", "x%ED%A0%80"} {
			for _, route := range []struct{ method, path, body string }{
				{http.MethodGet, "/v1/chats/" + id, ""},
				{http.MethodGet, "/v1/chats/" + id + "/transcript", ""},
				{http.MethodPost, "/v1/chats/" + id + "/messages", `{"content":"hi"}`},
				{http.MethodDelete, "/v1/chats/" + id, ""},
			} {
				req, _ := http.NewRequest(route.method, d.Server.URL+route.path, strings.NewReader(route.body))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var e api.Error
				_ = json.NewDecoder(resp.Body).Decode(&e)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound || e.Kind != "not_found" {
					t.Errorf("%s %s: %d %q (%s), want 404 not_found", route.method, route.path, resp.StatusCode, e.Kind, e.Message)
				}
			}
		}
	})
}

func TestProviderDownSaysSo(t *testing.T) {
	// A port nobody listens on: a configured provider that is down.
	cfg := daemontest.Config(t.TempDir(), "http://127.0.0.1:1/v1", 8192)
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "hello"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Problem == nil || res.Problem.Kind != chat.ProblemNoProvider || !strings.Contains(res.Problem.Message, "fake/m could not be reached") ||
		strings.Contains(res.Problem.Message, "Configure a model provider") {
		t.Fatalf("problem = %+v", res.Problem)
	}
	msgs, _ := d.Client.Transcript(ctx, c.ID)
	if len(msgs) != 1 || msgs[0].Content != "hello" {
		t.Fatalf("the person's message was not kept: %+v", msgs)
	}
}

func TestIdleChatIsPassivatedAndWokenWithItsState(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: calculatorScript})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.IdleAfter.Duration = 20 * time.Millisecond
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if _, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "one"}, nil); err != nil {
		t.Fatal(err)
	}
	// Wait (without a time bound on the assertion) until the registry has let the actor go.
	for d.Hub.ActiveSessions() != 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "two"}, nil); err != nil {
		t.Fatal(err)
	}
	msgs, _ := d.Client.Transcript(ctx, c.ID)
	if len(msgs) != 4 || msgs[2].Content != "two" || msgs[2].Seq != 3 {
		t.Fatalf("after waking: %+v", msgs)
	}
	last := fake.Requests()[len(fake.Requests())-1]
	if len(last.Messages) != 3 || last.Messages[0].Content != "one" {
		t.Fatalf("the woken chat sent %d messages, want the whole history of 3", len(last.Messages))
	}
}

func TestReadsAreAnsweredWhileATurnStreams(t *testing.T) {
	release := make(chan struct{})
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		<-release // the model takes its time
		return testkit.Reply{Text: "done"}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	sub := d.Hub.Bus().Subscribe(c.ID, 64)
	defer sub.Close()
	sent := make(chan error, 1)
	go func() {
		_, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "slow one"}, nil)
		sent <- err
	}()
	for ev := range sub.C { // the turn has started and waits on the model
		if ev.Type == chat.EventTurnStarted {
			break
		}
	}
	v, err := d.Client.Context(ctx, c.ID)
	if err != nil || v.LastSeq != 1 {
		t.Fatalf("context during the turn: %+v, %v", v, err)
	}
	msgs, err := d.Client.Transcript(ctx, c.ID)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("transcript during the turn: %d messages, %v", len(msgs), err)
	}
	close(release)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}
