package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestAStreamQueuedBehindABusyTurnIsNotDroppedForItsEvents: a message sent
// with SSE while another turn of its chat runs waits its turn; the running
// turn's events, which that stream never sends, do not fill its buffer, so
// it streams its own turn whole instead of starting with stream.dropped.
// busyChat starts a daemon whose chat runs a turn of 200 tool calls once
// release is called: each call is a tool.call and a tool.result event a
// stream queued behind that turn would have to hold in its buffer (256).
// It returns when that turn has called the model.
// tune, when given, changes the daemon's configuration.
func busyChat(t *testing.T, tune ...func(*configs.Config)) (d *daemontest.Daemon, chatID string, release func()) {
	t.Helper()
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == chat.RoleUser && last.Content == "busy":
			<-gate
			calls := make([]chat.ToolCall, 200)
			for i := range calls {
				calls[i] = chat.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: "no_such_tool", Arguments: "{}"}
			}
			return testkit.Reply{ToolCalls: calls}
		case last.Role == chat.RoleTool:
			return testkit.Reply{Text: "done with the tools"}
		}
		return testkit.Reply{Text: "answer to " + last.Content}
	}})
	t.Cleanup(fake.Close)
	t.Cleanup(open) // a test that fails before release lets the fake go
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	for _, f := range tune {
		f(&cfg)
	}
	d = daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The busy message asks for a JSON answer: a stream of its 400 events
	// to a test client that reads them slower than the turn makes them
	// (two loaded cores) was dropped, failing the test for what it does not
	// look at.
	busy := make(chan error, 1)
	go func() {
		resp, err := http.Post(d.Server.URL+"/v1/chats/"+c.ID+"/messages", "application/json", strings.NewReader(`{"content":"busy"}`))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("the busy message: status %s", resp.Status)
			}
		}
		busy <- err
	}()
	waitFor(t, "the busy turn to call the model", func() bool { return len(fake.Requests()) > 0 })
	return d, c.ID, func() {
		open()
		if err := <-busy; err != nil {
			t.Fatal(err)
		}
	}
}

// queuedStream posts body to path with the chat named and reads the SSE
// answer: its event names (the "event:" lines) and its data lines.
func queuedStream(d *daemontest.Daemon, chatID, path, body string) (events, data []string, err error) {
	req, _ := http.NewRequest(http.MethodPost, d.Server.URL+path, strings.NewReader(body))
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(oai.ChatHeader, chatID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%s: status %s", path, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, ev)
		}
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, line)
		}
	}
	return events, data, sc.Err()
}

// TestAStreamQueuedBehindABusyTurnIsNotDroppedForItsEvents: a message sent
// with SSE while another turn of its chat runs waits its turn (its stream
// says so at once: turn.queued); the running turn's events, which that
// stream never sends, do not fill its buffer, so it streams its own turn
// whole instead of starting with stream.dropped.
func TestAStreamQueuedBehindABusyTurnIsNotDroppedForItsEvents(t *testing.T) {
	d, chatID, release := busyChat(t)
	type answer struct {
		types []string
		err   error
	}
	queued := make(chan answer, 1)
	go func() {
		types, _, err := queuedStream(d, chatID, "/v1/chats/"+chatID+"/messages", `{"content":"queued"}`)
		queued <- answer{types, err}
	}()
	waitFor(t, "the second message to wait behind the first", func() bool { return turnsWaiting(t, d.Hub) == 1 })
	release()
	got := <-queued
	if got.err != nil {
		t.Fatal(got.err)
	}
	if n := len(got.types); n < 2 || got.types[0] != api.EventTurnQueued || got.types[1] != api.EventTurnStarted || got.types[n-1] != api.EventTurnCompleted {
		t.Fatalf("the queued stream's events: %v; want turn.queued, then its own turn, turn.started to turn.completed", got.types)
	}
}

// TestAnOpenAIStreamQueuedBehindABusyTurnAnswersWhole: the same on the
// OpenAI-compatible surfaces. A chat completion or a response streamed to
// a chat whose other turn runs waits for it, then streams its own answer
// to its end, not an error for events it fell behind on.
func TestAnOpenAIStreamQueuedBehindABusyTurnAnswersWhole(t *testing.T) {
	for _, tc := range []struct {
		path string
		body func(chatID string) string
		// done says the stream ended with its answer complete.
		done func(events, data []string) bool
	}{
		{"/v1/chat/completions",
			func(string) string {
				return `{"model":"fake/m","stream":true,"messages":[{"role":"user","content":"queued"}]}`
			},
			func(_, data []string) bool {
				n := len(data)
				return n >= 2 && data[n-1] == "[DONE]" && strings.Contains(data[n-2], `"finish_reason":"stop"`)
			}},
		{"/v1/responses",
			func(chatID string) string {
				return `{"model":"fake/m","stream":true,"input":"queued","conversation":"conv_` + chatID + `"}`
			},
			func(events, _ []string) bool {
				n := len(events)
				return n > 0 && events[n-1] == "response.completed"
			}},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/v1/"), func(t *testing.T) {
			d, chatID, release := busyChat(t)
			type answer struct {
				events, data []string
				err          error
			}
			queued := make(chan answer, 1)
			go func() {
				events, data, err := queuedStream(d, chatID, tc.path, tc.body(chatID))
				queued <- answer{events, data, err}
			}()
			waitFor(t, "the second message to wait behind the first", func() bool { return turnsWaiting(t, d.Hub) == 1 })
			release()
			got := <-queued
			if got.err != nil {
				t.Fatal(got.err)
			}
			if !tc.done(got.events, got.data) {
				t.Fatalf("the queued stream of %s: events %v, data %q; want its own answer to its end", tc.path, got.events, got.data)
			}
		})
	}
}

// TestAStreamQueuedBehindAPausedTurnStartsAtOnce: a message sent as SSE
// while the chat's turn waits for the application's tool results starts
// its stream at once with turn.queued (paused), keepalives following, and
// streams its own turn once the results come. It got no byte, not even
// its status, until the pause ended (up to toolsets.results_wait), so
// proxies and clients cut it, and their retry stored the message twice.
// Refused while it waits (here, its chat deleted), the stream ends with
// the error it would have been answered with.
func TestAStreamQueuedBehindAPausedTurnStartsAtOnce(t *testing.T) {
	d, _, c := startCRM(t, nil)
	ctx := context.Background()
	pause := func() api.TurnResult {
		t.Helper()
		res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "How is Ada doing?"}, nil)
		if err != nil || res.Status != "requires_action" {
			t.Fatalf("pause: %v %+v", err, res)
		}
		return res
	}
	type answer struct {
		res api.TurnResult
		err error
	}
	// queue sends a message behind the paused turn and returns once its
	// stream said it is queued.
	queue := func() (events chan api.Event, done chan answer) {
		t.Helper()
		events, done = make(chan api.Event, 64), make(chan answer, 1)
		go func() {
			res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "and a note"}, func(ev api.Event) { events <- ev })
			done <- answer{res, err}
		}()
		select {
		case ev := <-events:
			var q api.TurnQueued
			if ev.Type != api.EventTurnQueued || json.Unmarshal(ev.Data, &q) != nil || !q.Paused {
				t.Fatalf("the queued stream's first event: %s %s; want turn.queued, paused", ev.Type, ev.Data)
			}
		case a := <-done:
			t.Fatalf("the queued message was answered while the turn is paused: %v %+v", a.err, a.res)
		case <-time.After(time.Minute): // a liveness bound, not a speed check
			t.Fatal("the queued message's stream sent nothing while the turn before it is paused")
		}
		return events, done
	}

	paused := pause()
	events, done := queue()
	results := api.ToolResultsRequest{Results: []api.ToolResult{{CallID: paused.ToolCalls[0].ID, Output: "fine"}}}
	if _, err := d.Client.SendToolResults(ctx, c.ID, results, nil); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.res.Status != "completed" || a.res.Messages[len(a.res.Messages)-1].Content != "noted: and a note" {
		t.Fatalf("the queued message once the pause ended: %v %+v", a.err, a.res)
	}
	if ev := <-events; ev.Type != api.EventTurnStarted {
		t.Fatalf("after turn.queued: %s, want turn.started", ev.Type)
	}

	pause()
	_, done = queue()
	if err := d.Client.DeleteChat(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	var refused *api.Error
	if a := <-done; !errors.As(a.err, &refused) || refused.Status != http.StatusNotFound || refused.Kind != "not_found" {
		t.Fatalf("the queued message of a deleted chat: %v, want a 404 not_found", a.err)
	}
}

// quickKeepalives has a quiet stream send its comment every 10 ms, so
// that a test sees several while a turn is held without waiting long, and
// the busy turn's own stream, which sends its comments too, still keeps up
// with that turn's 400 events.
func quickKeepalives(c *configs.Config) { c.HTTP.Keepalive.Duration = 10 * time.Millisecond }

// openAIQueued are the OpenAI-compatible streamed requests to a chat
// (%s), and the line that ends each one's answer.
var openAIQueued = []struct{ path, body, last string }{
	{"/v1/chat/completions", `{"model":"fake/m","stream":true,"messages":[{"role":"user","content":"queued"}]}`, "data: [DONE]"},
	{"/v1/responses", `{"model":"fake/m","stream":true,"input":"queued","conversation":"conv_%s"}`, "event: response.completed"},
}

// openQueued posts body (its %s the chat's id) to path while the chat's
// other turn runs and returns the stream once it has read three keepalive
// comments and nothing else: the message still waits.
func openQueued(t *testing.T, d *daemontest.Daemon, chatID, path, body string) *bufio.Scanner {
	t.Helper()
	if strings.Contains(body, "%s") {
		body = fmt.Sprintf(body, chatID)
	}
	req, _ := http.NewRequest(http.MethodPost, d.Server.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(oai.ChatHeader, chatID)
	resp := answerOf(t, req, path+": no status while the message waits behind the running turn")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", path, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for comments := 0; comments < 3; {
		if !sc.Scan() {
			t.Fatalf("%s: the stream ended while its message waits: %v", path, sc.Err())
		}
		if sc.Text() == ": keepalive" {
			comments++
		} else if sc.Text() != "" {
			t.Fatalf("%s: %q before its turn started; want keepalive comments alone", path, sc.Text())
		}
	}
	if n := turnsWaiting(t, d.Hub); n != 1 {
		t.Fatalf("%d turns waiting; want the queued message's", int(n))
	}
	return sc
}

// rest is what a stream says after where sc is, but its comments.
func rest(sc *bufio.Scanner) []string {
	var lines []string
	for sc.Scan() {
		if sc.Text() != "" && sc.Text() != ": keepalive" {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

// TestAnOpenAIStreamQueuedBehindABusyTurnIsKeptAlive: a chat completion or
// a response streamed to a chat whose other turn runs is answered at once
// (200, its headers) and sends an SSE comment every http.keepalive until
// its turn starts, then its own answer. It got no byte, not even its
// status, until its turn started: clients' and proxies' read timeouts
// gave up on it, and the SDKs sent it again.
func TestAnOpenAIStreamQueuedBehindABusyTurnIsKeptAlive(t *testing.T) {
	for _, tc := range openAIQueued {
		t.Run(strings.TrimPrefix(tc.path, "/v1/"), func(t *testing.T) {
			d, chatID, release := busyChat(t, quickKeepalives)
			sc := openQueued(t, d, chatID, tc.path, tc.body)
			release()
			if lines := rest(sc); len(lines) < 2 || !slices.Contains(lines, tc.last) {
				t.Fatalf("%s: the queued stream went on with %q; want its own answer to its end (%s)", tc.path, lines, tc.last)
			}
		})
	}
}

// TestAnOpenAIStreamRefusedWhileQueuedEndsWithAnError: a queued stream
// whose message is refused before its turn starts (here, its chat
// deleted) ends with the error it would have been answered with, in the
// surface's stream shape, which the SDKs raise.
func TestAnOpenAIStreamRefusedWhileQueuedEndsWithAnError(t *testing.T) {
	for _, tc := range openAIQueued {
		t.Run(strings.TrimPrefix(tc.path, "/v1/"), func(t *testing.T) {
			d, chatID, _ := busyChat(t, quickKeepalives)
			sc := openQueued(t, d, chatID, tc.path, tc.body)
			if err := d.Client.DeleteChat(context.Background(), chatID); err != nil {
				t.Fatal(err)
			}
			// Chat Completions: a data line {"error": …}; Responses: an error event.
			want := map[string]string{"/v1/chat/completions": `data: {"error":{"message":"chat ` + chatID + `: not found"`,
				"/v1/responses": `data: {"code":null,"message":"chat ` + chatID + `: not found"`}[tc.path]
			if lines := rest(sc); len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], want) || slices.Contains(lines, tc.last) {
				t.Fatalf("%s: a queued stream whose chat was deleted ended with %q; want the error %s…", tc.path, lines, want)
			}
		})
	}
}

// countingTransport counts the requests an SDK makes, its retries
// included, and tells comments when the SDK reads three keepalive
// comments of a body.
type countingTransport struct {
	base     http.RoundTripper
	requests atomic.Int32
	comments chan struct{} // closed at the third comment read
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	resp, err := c.base.RoundTrip(r)
	if err == nil {
		resp.Body = &commentCounter{ReadCloser: resp.Body, seen: c.comments}
	}
	return resp, err
}

// commentCounter closes seen once what was read of its body holds three
// keepalive comments.
type commentCounter struct {
	io.ReadCloser
	seen chan struct{}
	n    int
	once sync.Once
}

func (c *commentCounter) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if c.n += strings.Count(string(p[:n]), ": keepalive\n"); c.n >= 3 {
		c.once.Do(func() { close(c.seen) })
	}
	return n, err
}

// TestTheOpenAISDKsQueuedStreamNeitherTimesOutNorRetries: openai-go,
// with its retries (two, the default) and a client that gives up on a
// request whose headers take 5 s, streams a chat completion to a chat
// whose other turn runs: its stream opens at once, its decoder reads the
// keepalive comments while the message waits and skips them, and once
// the turn before it ends the SDK gets the message's own answer, from the
// one request it made. The stream sent nothing while queued: the client
// gave up on it and the SDK sent it again, each time queued anew.
func TestTheOpenAISDKsQueuedStreamNeitherTimesOutNorRetries(t *testing.T) {
	d, chatID, release := busyChat(t, quickKeepalives)
	tr := &countingTransport{base: &http.Transport{ResponseHeaderTimeout: 5 * time.Second}, comments: make(chan struct{})}
	sdk := openai.NewClient(option.WithBaseURL(d.Server.URL+"/v1"), option.WithAPIKey("none"),
		option.WithHTTPClient(&http.Client{Transport: tr}), option.WithHeader(oai.ChatHeader, chatID))
	type answer struct {
		text string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		stream := sdk.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
			Model: "fake/m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("queued")}})
		defer stream.Close()
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		text := ""
		if len(acc.Choices) > 0 {
			text = acc.Choices[0].Message.Content
		}
		done <- answer{text, stream.Err()}
	}()
	select {
	case <-tr.comments:
	case a := <-done:
		t.Fatalf("the SDK's queued stream ended before its turn started, after %d requests: %v", tr.requests.Load(), a.err)
	case <-time.After(time.Minute): // a liveness bound, not a speed check
		t.Fatalf("the SDK read no keepalive of its queued stream, after %d requests", tr.requests.Load())
	}
	if n := turnsWaiting(t, d.Hub); n != 1 {
		t.Fatalf("%d turns waiting; want the SDK's message's", int(n))
	}
	release()
	a := <-done
	if a.err != nil || a.text != "answer to queued" {
		t.Fatalf("the SDK's queued stream: %q, %v; want the message's own answer", a.text, a.err)
	}
	if n := tr.requests.Load(); n != 1 {
		t.Fatalf("the SDK made %d requests; want one, neither timed out nor retried", n)
	}
}

// TestAJSONMessageBehindAPausedTurnIsRefusedAtOnce: a message sent for a
// JSON answer while the chat's turn waits for the application's tool
// results is refused at once, 409 paused, naming the calls and what to do
// (post the results first, or send it as SSE to wait its turn); nothing
// is stored or queued, and the paused turn is untouched. It got nothing,
// not even its status, until the results came, up to
// toolsets.results_wait (10 minutes): clients and proxies gave up on it.
func TestAJSONMessageBehindAPausedTurnIsRefusedAtOnce(t *testing.T) {
	d, _, c := startCRM(t, nil)
	ctx := context.Background()
	paused, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "How is Ada doing?"}, nil)
	if err != nil || paused.Status != "requires_action" {
		t.Fatalf("pause: %v %+v", err, paused)
	}
	req, _ := http.NewRequest(http.MethodPost, d.Server.URL+"/v1/chats/"+c.ID+"/messages", strings.NewReader(`{"content":"and a note"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp := answerOf(t, req, "a JSON message behind a paused turn got no answer while the turn waits for its tool results")
	var refused api.Error
	_ = json.NewDecoder(resp.Body).Decode(&refused)
	if resp.StatusCode != http.StatusConflict || refused.Kind != "paused" ||
		!strings.Contains(refused.Message, paused.ToolCalls[0].ID) || !strings.Contains(refused.Message, "tool-results") {
		t.Fatalf("a JSON message behind a paused turn: %s %+v; want 409 paused naming the call and the way on", resp.Status, refused)
	}
	if n := turnsWaiting(t, d.Hub); n != 0 {
		t.Fatalf("%d turns waiting; want none: the refused message is not queued", int(n))
	}
	// The paused turn goes on with its results.
	results := api.ToolResultsRequest{Results: []api.ToolResult{{CallID: paused.ToolCalls[0].ID, Output: "fine"}}}
	if res, err := d.Client.SendToolResults(ctx, c.ID, results, nil); err != nil || res.Status != "completed" {
		t.Fatalf("the paused turn's results: %v %+v", err, res)
	}
}

// answerOf sends req and returns its answer (its body closed when the test
// ends) once its status came; none within a minute fails the test, saying
// none.
func answerOf(t *testing.T, req *http.Request, none string) *http.Response {
	t.Helper()
	type answer struct {
		resp *http.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		answered <- answer{resp, err}
	}()
	var a answer
	select {
	case a = <-answered:
	case <-time.After(time.Minute): // a liveness bound, not a speed check
		t.Fatal(none)
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	t.Cleanup(func() { a.resp.Body.Close() })
	return a.resp
}
