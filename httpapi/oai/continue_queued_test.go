package oai_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// heldResumes is a daemon whose provider fails a turn's tool results while
// down, and once up holds each turn that answers them until open: the
// set-up of a retry of results that waits behind the retry before it.
type heldResumes struct {
	d    *daemontest.Daemon
	down atomic.Bool
	held chan struct{} // closed when a turn answering results is held
	open func()
}

func startHeldResumes(t *testing.T) *heldResumes {
	t.Helper()
	h := &heldResumes{held: make(chan struct{})}
	h.down.Store(true)
	gate := make(chan struct{})
	h.open = sync.OnceFunc(func() { close(gate) })
	holding := sync.OnceFunc(func() { close(h.held) })
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleTool {
			if h.down.Load() {
				return serverError
			}
			holding()
			<-gate
		}
		return talker(r)
	}})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.HTTP.Keepalive.Duration = 10 * time.Millisecond
	h.d = daemontest.Start(t, cfg, map[string]string{"tok-a": "a"})
	t.Cleanup(h.open) // before the daemon stops: a failed test lets its turns end
	return h
}

// awaitHeld waits until a turn answering results called the model.
func (h *heldResumes) awaitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-h.held:
	case <-time.After(time.Minute):
		t.Fatal("the first retry's turn never called the model")
	}
}

// postQueued posts a streamed request to path on chatID that waits behind
// the held turn: it must get its status at once and keepalive comments
// alone while it waits. It returns the stream's lines to read on.
func (h *heldResumes) postQueued(t *testing.T, path, chatID string, body map[string]any) *bufio.Scanner {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, h.d.Server.URL+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer tok-a")
	if chatID != "" {
		req.Header.Set(oai.ChatHeader, chatID)
	}
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		got <- answer{resp, err}
	}()
	var resp *http.Response
	select {
	case a := <-got:
		if a.err != nil {
			t.Fatal(a.err)
		}
		resp = a.resp
	case <-time.After(time.Minute):
		t.Fatal("the second retry got no status while it waited behind the first's turn")
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the second retry: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for comments := 0; comments < 3; {
		if !sc.Scan() {
			t.Fatalf("the stream ended while its turn waits: %v", sc.Err())
		}
		if sc.Text() == ": keepalive" {
			comments++
		} else if sc.Text() != "" {
			t.Fatalf("%q before its turn started; want keepalive comments alone", sc.Text())
		}
	}
	return sc
}

// lastLine reads the stream to its end and returns its last line that is
// neither blank nor a keepalive.
func lastLine(sc *bufio.Scanner) string {
	var last string
	for sc.Scan() {
		if line := sc.Text(); line != "" && line != ": keepalive" {
			last = line
		}
	}
	return last
}

// TestAStreamedRetryOfResultsQueuedBehindATurnIsKeptAlive: tool results
// whose resumed turn failed are sent again (the SDKs retry a 5xx), twice:
// the first retry's turn answers them, and the second, streamed, waits
// behind that turn (hub.SubmitContinue). Its stream starts at once and
// sends keepalive comments while it waits, as a queued message's does,
// then ends with an answer or an error event the SDK raises. It got no
// byte until the turn before it ended: clients' and proxies' read
// timeouts gave up on it.
func TestAStreamedRetryOfResultsQueuedBehindATurnIsKeptAlive(t *testing.T) {
	h := startHeldResumes(t)
	_, _, chatID, results := resumeFailed(t, h.d)
	h.down.Store(false)
	first := make(chan ccReply, 1)
	go func() { first <- postCC(t, h.d, "tok-a", chatID, results) }()
	h.awaitHeld(t)

	sc := h.postQueued(t, "/v1/chat/completions", chatID, map[string]any{"model": "fake/m", "stream": true, "messages": results, "tools": weatherTool})
	h.open()
	if r := <-first; r.status != http.StatusOK || r.body.Choices[0].Message.Content != "The tool said 12°C." {
		t.Fatalf("the first retry: %d %+v", r.status, r.body)
	}
	// The results are answered by then: the waiting turn finds nothing to
	// answer and says so in the stream's shape, which the SDK raises.
	if last := lastLine(sc); !strings.HasPrefix(last, "data: ") || !strings.Contains(last, `"error"`) {
		t.Fatalf("the queued stream ended with %q; want its error event", last)
	}
}

// TestAStreamedRetryOfOutputsQueuedBehindAResponseIsKeptAlive: the same on
// the Responses surface: function_call_output items whose response failed
// are sent again on the same previous_response_id, twice; the second,
// streamed, waits behind the first's turn with keepalive comments alone,
// then ends with an error event (its outputs are answered by then), not
// response.created for a turn that never ran.
func TestAStreamedRetryOfOutputsQueuedBehindAResponseIsKeptAlive(t *testing.T) {
	h := startHeldResumes(t)
	sdk := sdkFor(h.d, "tok-a")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, tool := askWeather(ctx, t, sdk)
	var callID string
	for _, it := range first.Output {
		if it.Type == "function_call" {
			callID = it.CallID
		}
	}
	if first.Status != responses.ResponseStatusCompleted || callID == "" {
		t.Fatalf("the question: %+v; want a function call", first)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput("12°C")
	out.OfFunctionCallOutput.CallID = openai.String(callID)
	params := responses.ResponseNewParams{Model: "fake/m", PreviousResponseID: openai.String(first.ID),
		Tools: []responses.ToolUnionParam{tool}, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}}
	if failed, err := sdk.Responses.New(ctx, params); err == nil && failed.Status != responses.ResponseStatusFailed {
		t.Fatalf("the outputs at a failing provider: %+v", failed)
	}
	h.down.Store(false)
	type reply struct {
		resp *responses.Response
		err  error
	}
	answered := make(chan reply, 1)
	go func() {
		r, err := sdk.Responses.New(ctx, params)
		answered <- reply{r, err}
	}()
	h.awaitHeld(t)

	sc := h.postQueued(t, "/v1/responses", "", map[string]any{"model": "fake/m", "stream": true, "previous_response_id": first.ID,
		"tools": []any{map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}},
		"input": []any{map[string]any{"type": "function_call_output", "call_id": callID, "output": "12°C"}}})
	h.open()
	if r := <-answered; r.err != nil || r.resp.OutputText() != "The tool said 12°C." {
		t.Fatalf("the first retry: %v %+v", r.err, r.resp)
	}
	if last := lastLine(sc); !strings.HasPrefix(last, "data: ") || !strings.Contains(last, `"error"`) {
		t.Fatalf("the queued stream ended with %q; want its error event", last)
	}
}
