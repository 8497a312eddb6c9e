package e2e

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestLoad runs many concurrent streaming chats through the fake against
// the agentd binary, sampling the daemon's resident memory every 10 s.
// It runs only with AGENTD_LOAD=1; AGENTD_LOAD_DURATION (default 5m),
// AGENTD_LOAD_CHATS (default 1000) and AGENTD_LOAD_WINDOW (tokens, default
// 16384; smaller windows fold more and load the summariser) size it.
//
//	AGENTD_LOAD=1 go test -run TestLoad -v -timeout 30m ./e2e/
func TestLoad(t *testing.T) {
	if os.Getenv("AGENTD_LOAD") != "1" {
		t.Skip("load run: set AGENTD_LOAD=1")
	}
	dur := 5 * time.Minute
	if s := os.Getenv("AGENTD_LOAD_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("AGENTD_LOAD_DURATION=%q: %v", s, err)
		}
		dur = d
	}
	chats := 1000
	if s := os.Getenv("AGENTD_LOAD_CHATS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("AGENTD_LOAD_CHATS=%q: %v", s, err)
		}
		chats = n
	}
	window := 16384
	if s := os.Getenv("AGENTD_LOAD_WINDOW"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("AGENTD_LOAD_WINDOW=%q: %v", s, err)
		}
		window = n
	}
	b := newBrain(3)
	b.MaxDelay, b.FoldDelay, b.Words = 100*time.Millisecond, 50*time.Millisecond, 80
	fake := openaifake.New(openaifake.Options{Window: window, Script: b.Script})
	defer fake.Close()
	d := newDaemon(t, daemonConfig{FakeURL: fake.URL(), Window: window, Limits: map[string]string{"requests_per_second": "1000000"}})
	d.start()

	ids := make([]string, chats)
	for i := range ids {
		ctx, cancel := withTimeout(30 * time.Second)
		c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
		cancel()
		if err != nil {
			t.Fatalf("create chat %d: %v", i, err)
		}
		ids[i] = c.ID
	}

	var turns, failures atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		if failures.Add(1) == 1 {
			firstErr.Store(err.Error())
		}
	}
	stopAt := time.Now().Add(dur)
	var wg sync.WaitGroup
	started := time.Now()
	for i, id := range ids {
		wg.Go(func() {
			for n := 0; time.Now().Before(stopAt); n++ {
				content := fmt.Sprintf("load chat %d message %d", i, n)
				if n%5 == 4 {
					content += ": calculate 6*7"
				}
				ctx, cancel := withTimeout(sendTimeout)
				res, err := d.Client.Send(ctx, id, api.SendMessageRequest{Content: content}, nil)
				cancel()
				switch {
				case err != nil:
					fail(fmt.Errorf("chat %d message %d: %w", i, n, err))
				case res.Problem != nil:
					fail(fmt.Errorf("chat %d message %d: problem %s: %s", i, n, res.Problem.Kind, res.Problem.Message))
				default:
					turns.Add(1)
				}
			}
		})
	}

	type sample struct {
		at  time.Duration
		rss int64
	}
	var samples []sample
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	take := func() {
		if kb, err := rssKB(d.pid()); err == nil {
			samples = append(samples, sample{time.Since(started).Round(time.Second), kb})
		}
	}
	take()
wait:
	for {
		select {
		case <-tick.C:
			take()
		case <-done:
			break wait
		}
	}
	take()
	elapsed := time.Since(started)

	var maxKB int64
	series := ""
	for _, s := range samples {
		maxKB = max(maxKB, s.rss)
		series += fmt.Sprintf("%s:%d ", s.at, s.rss/1024)
	}
	first, last := samples[0].rss, samples[len(samples)-1].rss
	// The first sample is before any turn; flatness is judged from the
	// sample after a minute (or the second), once every chat's actor is up.
	ref := samples[min(len(samples)-1, 6)].rss
	errText, _ := firstErr.Load().(string)
	fig := fmt.Sprintf(`## Load run (TestLoad)

Command: `+"`AGENTD_LOAD=1 AGENTD_LOAD_DURATION=%s AGENTD_LOAD_CHATS=%d AGENTD_LOAD_WINDOW=%d go test -run TestLoad -v -timeout 30m ./e2e/`"+` (%s on %s; the fake runs in the test process on the same cores, window %d tokens)

| figure | value |
| --- | --- |
| concurrent streaming chats | %d |
| duration | %s |
| turns completed | %d |
| turns per second | %.1f |
| errors (failed sends or turn problems) | %d |
| summarising requests | %d |
| daemon RSS first / at ~1 min / last / max (MiB) | %d / %d / %d / %d |

RSS samples (elapsed:MiB): %s
%s`, dur, chats, window, time.Now().UTC().Format("2006-01-02"), runtimeDesc(), window, chats, elapsed.Round(time.Second), turns.Load(),
		float64(turns.Load())/elapsed.Seconds(), failures.Load(), b.summaries.Load(), first/1024, ref/1024, last/1024, maxKB/1024, series,
		map[bool]string{true: "", false: "\nFirst error: " + errText}[errText == ""])
	t.Log("\n" + fig)
	if failures.Load() > 0 {
		t.Errorf("%d errors; first: %s", failures.Load(), errText)
	}
	if last > 2*ref {
		t.Errorf("memory grew: %d MiB at ~1 min, %d MiB at the end", ref/1024, last/1024)
	}
	if n, firstPanic := d.panics(); n > 0 {
		t.Errorf("%d panic lines in the daemon's log; first: %s", n, firstPanic)
	}
	if dur >= 5*time.Minute && chats >= 1000 && !t.Failed() {
		writeResults(t, "load", fig)
	}
}
