package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// realTurns is how many turns the long real chats run: 200, or
// AGENTD_REALMODEL_TURNS for a quicker look while working.
func realTurns(t *testing.T) int {
	if s := os.Getenv("AGENTD_REALMODEL_TURNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("AGENTD_REALMODEL_TURNS=%q: want a positive number", s)
		}
		return n
	}
	return 200
}

// pasted is what a person pastes in turn i: Go code, CSV, CJK prose or a
// plain question, a few hundred tokens each, different every turn.
func pasted(i int) string {
	switch i % 4 {
	case 0:
		var b strings.Builder
		fmt.Fprintf(&b, "Why does this fail? ```go\nfunc sum%d(xs []int) (total int) {\n", i)
		for j := range 12 {
			fmt.Fprintf(&b, "\tif len(xs) > %d && xs[%d]%%%d == 0 { total += xs[%d] * %d }\n", j, j, j+2, j, i+j)
		}
		b.WriteString("\treturn total\n}\n```")
		return b.String()
	case 1:
		var b strings.Builder
		b.WriteString("Here is the CSV, which row is off?\nid,city,temp_c,rain_mm,date\n")
		for j := range 16 {
			fmt.Fprintf(&b, "%d,city-%d,%.1f,%d,2026-%02d-%02d\n", i*100+j, (i+j)%37, float64((i*7+j*3)%40)-5.5, (i+j*j)%90, j%12+1, (i+j)%28+1)
		}
		return b.String()
	case 2:
		lines := []string{"会议记录：第%d次讨论了项目的进度和预算。", "东京的天气很好，我们在公园里散步了%d分钟。",
			"请把这段文字翻译成英文，并保留所有的数字%d。", "数据库迁移需要在周末完成，预计停机%d小时。"}
		var b strings.Builder
		for j := range 8 {
			fmt.Fprintf(&b, lines[(i+j)%len(lines)], i+j)
		}
		return b.String()
	default:
		return fmt.Sprintf("Question %d: what did we decide about the budget, and which city had the most rain?", i)
	}
}

// realTarget is one server and window a long chat runs on.
type realTarget struct {
	name, env, kind string
	window          int // configured for Ollama; llama-server's own -c otherwise
}

const (
	// maxFailedTurns ends a long chat early: the test wants none.
	maxFailedTurns = 3
	// laterTestsReserve is the time a long chat leaves the real-server tests
	// after it (about a minute on a quiet 2-core machine) before go test's
	// -timeout would end the binary with nothing but a goroutine dump: no
	// turn starts, or runs on, past it.
	laterTestsReserve = 3 * time.Minute
)

// TestRealLongChat runs a 200-turn chat of pasted code, CSV and CJK on a
// 2K and a 4K window of each real server, through the agentd binary. Every
// turn must end answered; no request may pass the window by the server's
// own count; no refusal may have needed healing; folds must happen; and the
// calibrated estimate must end close to the real tokenizer's counts.
func TestRealLongChat(t *testing.T) {
	targets := []realTarget{
		{"llama-2k", envLlama, "openai", 2048},
		{"llama-4k", envLlama4K, "openai", 4096},
		{"ollama-2k", envOllama, "ollama", 2048},
		{"ollama-4k", envOllama, "ollama", 4096},
	}
	var figures strings.Builder
	figures.WriteString("| server, window | turns | failed | folds | largest prompt (server count) | est. error, recent requests | agentd per turn | server per turn | prefill tokens | cached |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			url := realURL(t, tg.env)
			runLongChat(t, tg, url, &figures)
		})
	}
	writeResults(t, "real-long-chat", figures.String())
}

func runLongChat(t *testing.T, tg realTarget, url string, figures *strings.Builder) {
	tp := newTap(t, url)
	var prov realProvider
	if tg.kind == "ollama" {
		prov = ollamaProvider("real", tp.URL, realModelCfg{ID: realModel, Window: tg.window})
	} else {
		if n := llamaNCtx(t, url); n != tg.window {
			t.Fatalf("%s runs with n_ctx %d, want %d", url, n, tg.window)
		}
		prov = llamaProvider("real", tp.URL)
	}
	ref := "real/" + realModel
	d := startReal(t, daemonConfig{Providers: realYAML(ref, prov)})
	if m := d.waitModel(t, ref); m.Window != tg.window {
		t.Fatalf("agentd reads a window of %d (%s), want %d", m.Window, m.WindowSource, tg.window)
	}
	truncBefore := ollamaTruncations(t)
	id := d.newChat(t, ref)
	turns := realTurns(t)
	failed, folds, largest := 0, 0, 0
	var agentdTime, serverTime time.Duration
	prefill, cached := 0, 0
	kinds := map[string]int{}
	began := time.Now()
	for i := range turns {
		turnEnd := time.Now().Add(realSendTimeout)
		if dl, ok := t.Deadline(); ok {
			if time.Until(dl) < laterTestsReserve {
				t.Fatalf("%d of %d turns in %v (agentd %v, server %v): go test's -timeout ends in %v, stopping so the tests after this one run",
					i, turns, time.Since(began).Round(time.Second), agentdTime.Round(time.Millisecond), serverTime.Round(time.Millisecond), time.Until(dl).Round(time.Second))
			}
			if last := dl.Add(-laterTestsReserve); last.Before(turnEnd) {
				turnEnd = last
			}
		}
		ctx, cancel := context.WithDeadline(context.Background(), turnEnd)
		before := tp.count()
		start := time.Now()
		rt := d.sendCtx(ctx, t, id, pasted(i))
		cancel()
		wall := time.Since(start)
		calls := tp.since(before)
		if rt.res.Problem != nil {
			failed++
			t.Errorf("turn %d failed after %v: %+v", i, wall.Round(time.Millisecond), *rt.res.Problem)
			if failed == maxFailedTurns {
				// A server that stopped answering fails every turn at the
				// idle limit; more of them say nothing new.
				t.Fatalf("%d turns failed, stopping at turn %d of %d; %s", failed, i+1, turns, d.logTail(30))
			}
		}
		if len(rt.healed) > 0 {
			t.Errorf("turn %d needed healing (a request over the window reached the server): %+v", i, rt.healed)
		}
		folds += rt.compacted
		var server time.Duration
		for _, c := range calls {
			kinds[c.Kind]++
			if c.Status != 200 {
				t.Errorf("turn %d: the server answered %d: %s", i, c.Status, c.Body)
			}
			if c.Prompt+c.Output > tg.window {
				t.Errorf("turn %d: a request of %d+%d tokens by the server's count, over the window of %d", i, c.Prompt, c.Output, tg.window)
			}
			largest = max(largest, c.Prompt)
			prefill += c.Prompt - c.Cached
			cached += c.Cached
			server += c.Server
		}
		// Calls overlap nothing but folds run beside the turn; the server's
		// time is what it spent on this turn's requests.
		serverTime += server
		agentdTime += max(0, wall-server)
		if (i+1)%20 == 0 || i == 0 {
			t.Logf("turn %d: %v (server %v, %d requests)", i+1, wall.Round(time.Millisecond), server.Round(time.Millisecond), len(calls))
		}
	}
	if folds == 0 {
		t.Errorf("%d turns on a %d window and no fold", turns, tg.window)
	}
	// The summariser and the learner use the chat's own model here (a model
	// on this computer); their requests were checked above with the turns'.
	t.Logf("requests by kind: %v", kinds)
	if kinds["summary"] == 0 || kinds["learner"] == 0 {
		t.Errorf("the summariser and the learner must have run on the real server: requests by kind %v", kinds)
	}
	if n := ollamaTruncations(t) - truncBefore; tg.kind == "ollama" && n > 0 {
		t.Errorf("Ollama logged %d truncations of a prompt agentd sent", n)
	}
	if tg.kind == "ollama" {
		if got := ollamaLoaded(t, url, realModel); got != tg.window {
			t.Errorf("/api/ps reports context_length %d, agentd asked %d", got, tg.window)
		}
		for _, n := range tp.numCtx() {
			if n != tg.window {
				t.Errorf("agentd asked num_ctx %d, want %d on every request", n, tg.window)
				break
			}
		}
	}
	errPct := estimateError(t, d, id)
	fmt.Fprintf(figures, "| %s | %d | %d | %d | %d | %.1f%% | %v | %v | %d | %d |\n", tg.name, turns, failed, folds, largest, errPct,
		(agentdTime / time.Duration(turns)).Round(time.Millisecond), (serverTime / time.Duration(turns)).Round(time.Millisecond), prefill, cached)
}

// estimateError is the mean relative error of agentd's calibrated estimate
// against the server's count over the chat's last requests; it must end
// small: the estimate converged to the real tokenizer.
func estimateError(t *testing.T, d *daemon, chatID string) float64 {
	t.Helper()
	ctx, cancel := withTimeout(30 * time.Second)
	defer cancel()
	view, err := d.Client.Context(ctx, chatID)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	n := 0
	for _, r := range view.RecentRequests {
		if r.Kind != "turn" || r.Reported <= 0 {
			continue
		}
		sum += math.Abs(float64(r.Estimate-r.Reported)) / float64(r.Reported)
		n++
	}
	if n == 0 {
		t.Fatalf("no recent request with a reported count: %+v", view.RecentRequests)
	}
	mean := 100 * sum / float64(n)
	t.Logf("factor %.3f; estimate vs server count over %d requests: mean error %.1f%%", view.Factor, n, mean)
	if mean > 15 {
		t.Errorf("the estimate did not converge: mean error %.1f%% over the last %d requests (factor %.3f)", mean, n, view.Factor)
	}
	return mean
}

// ollamaTruncations counts Ollama's own "truncating input prompt" lines in
// its log (0 when the log is not known).
func ollamaTruncations(t *testing.T) int {
	p := os.Getenv(envOllamaLog)
	if p == "" {
		return 0
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Logf("read the Ollama log: %v", err)
		return 0
	}
	return strings.Count(string(b), "truncating input prompt")
}
