package oai_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestAStreamedRetryOfResultsQueuedBehindATurnIsKeptAlive: tool results
// whose resumed turn failed are sent again (the SDKs retry a 5xx), twice:
// the first retry's turn answers them, and the second, streamed, waits
// behind that turn (hub.SubmitContinue). Its stream starts at once and
// sends keepalive comments while it waits, as a queued message's does,
// then ends with an answer or an error event the SDK raises. It got no
// byte until the turn before it ended: clients' and proxies' read
// timeouts gave up on it.
func TestAStreamedRetryOfResultsQueuedBehindATurnIsKeptAlive(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	var held atomic.Int32
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleTool {
			if down.Load() {
				return serverError
			}
			held.Add(1)
			<-gate
		}
		return talker(r)
	}})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.HTTP.Keepalive.Duration = 10 * time.Millisecond
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "a"})
	t.Cleanup(open) // before the daemon stops: a failed test lets its turns end

	_, _, chatID, results := resumeFailed(t, d)
	down.Store(false)
	first := make(chan ccReply, 1)
	go func() { first <- postCC(t, d, "tok-a", chatID, results) }()
	deadline := time.Now().Add(time.Minute)
	for held.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first retry's turn never called the model")
		}
		time.Sleep(5 * time.Millisecond)
	}

	b, _ := json.Marshal(map[string]any{"model": "fake/m", "stream": true, "messages": results, "tools": weatherTool})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, d.Server.URL+"/v1/chat/completions", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer tok-a")
	req.Header.Set(oai.ChatHeader, chatID)
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
	defer resp.Body.Close()
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
	open()
	if r := <-first; r.status != http.StatusOK || r.body.Choices[0].Message.Content != "The tool said 12°C." {
		t.Fatalf("the first retry: %d %+v", r.status, r.body)
	}
	var last string
	for sc.Scan() {
		if line := sc.Text(); line != "" && line != ": keepalive" {
			last = line
		}
	}
	// The results are answered by then: the waiting turn finds nothing to
	// answer and says so in the stream's shape, which the SDK raises.
	if !strings.HasPrefix(last, "data: ") || !strings.Contains(last, `"error"`) {
		t.Fatalf("the queued stream ended with %q; want its error event", last)
	}
}
