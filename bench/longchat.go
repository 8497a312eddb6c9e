package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
)

// SideResult is one side's long-chat replay on one window. Token figures
// are the fake's own count (testkit.CountTokens) of what each side sent.
type SideResult struct {
	Side   string `json:"side"` // agentd, langchain-summarization, langchain-trim
	Window int    `json:"window"`
	Turns  int    `json:"turns"`
	// Sawtooth holds [turn, input tokens] of every request made for a turn
	// (a tool turn makes two), in order.
	Sawtooth [][2]int `json:"sawtooth"`
	// Other holds [turn, input tokens] of summarising and learning
	// requests, each put on the last turn seen before it.
	Other              [][2]int       `json:"other_requests"`
	TotalInputTokens   int            `json:"total_input_tokens"`
	TurnInputTokens    int            `json:"turn_input_tokens"`
	SummaryInputTokens int            `json:"summary_input_tokens"`
	LearnInputTokens   int            `json:"learn_input_tokens,omitempty"`
	Requests           int            `json:"requests"`
	LearnRequests      int            `json:"learn_requests,omitempty"`
	SummaryRequests    int            `json:"summary_requests"`
	Folds              int            `json:"folds"`
	Heals              int            `json:"heals,omitempty"`
	LargestRequest     int            `json:"largest_request"`
	LargestWithAnswer  int            `json:"largest_request_with_answer_room"`
	OverWindow         int            `json:"requests_over_window"`
	RefusedTurns       int            `json:"turns_refused_for_length"`
	Problems           map[string]int `json:"problems,omitempty"`
	TurnMS             Quantiles      `json:"turn_ms"`
	OverheadMS         Quantiles      `json:"overhead_ms"`
	WallSeconds        float64        `json:"wall_seconds"`
	Fidelity           Fidelity       `json:"fidelity"`
	Cache              CacheFigures   `json:"cache"`
	Note               string         `json:"note,omitempty"`
	Error              string         `json:"error,omitempty"`
}

// Quantiles of a latency sample, in milliseconds.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
	N   int     `json:"n"`
}

// Fidelity counts planted facts still within the model's reach at the end.
type Fidelity struct {
	Identifiers  int `json:"identifiers_planted"`
	Instructions int `json:"instructions_planted"`
	// Carried: verbatim in the last turn's request (summary, digest,
	// memories and kept turns alike).
	IdentifiersCarried  int `json:"identifiers_carried"`
	InstructionsCarried int `json:"instructions_carried"`
	// Found: one conversation_search call per fact returns it (agentd only).
	IdentifiersFound  int `json:"identifiers_found_by_search,omitempty"`
	InstructionsFound int `json:"instructions_found_by_search,omitempty"`
}

func quantiles(ms []float64) Quantiles {
	if len(ms) == 0 {
		return Quantiles{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	at := func(p float64) float64 { return s[min(len(s)-1, int(float64(len(s))*p))] }
	return Quantiles{P50: round3(at(0.5)), P99: round3(at(0.99)), Max: round3(s[len(s)-1]), N: len(s)}
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// analyse fills r's token figures and carried-fidelity from what the fake
// received, the same way for every side.
func analyse(r *SideResult, reqs []testkit.Received, rp *Replay, turns int) {
	var last *testkit.Received
	turnNow := 0
	c := &r.Cache
	c.Breaks, c.BreakUncached = map[string]int{}, map[string]int{}
	for i := range reqs {
		q := &reqs[i]
		r.Requests++
		r.TotalInputTokens += q.InputTokens
		r.LargestRequest = max(r.LargestRequest, q.InputTokens)
		r.LargestWithAnswer = max(r.LargestWithAnswer, q.InputTokens+q.MaxTokens)
		if q.InputTokens > r.Window {
			r.OverWindow++
		}
		if IsSummaryRequest(*q) || IsLearnRequest(*q) {
			r.Other = append(r.Other, [2]int{turnNow, q.InputTokens})
		}
		if IsSummaryRequest(*q) {
			r.SummaryRequests++
			r.SummaryInputTokens += q.InputTokens
			c.SummaryInput += q.InputTokens
			c.SummaryCached += q.CachedTokens
			continue
		}
		if IsLearnRequest(*q) {
			r.LearnRequests++
			r.LearnInputTokens += q.InputTokens
			c.LearnInput += q.InputTokens
			c.LearnCached += q.CachedTokens
			continue
		}
		r.TurnInputTokens += q.InputTokens
		c.ChatInput += q.InputTokens
		c.ChatCached += q.CachedTokens
		c.PerRequest = append(c.PerRequest, [2]int{q.CachedTokens, q.InputTokens - q.CachedTokens})
		if last != nil {
			if why := breakReason(last, q); why != "" {
				c.Breaks[why]++
				c.BreakUncached[why] += q.InputTokens - q.CachedTokens
			}
		}
		turn := -1
		for j := len(q.Messages) - 1; j >= 0 && turn < 0; j-- {
			if q.Messages[j].Role == chat.RoleUser {
				turn = TurnOf(q.Messages[j].Content)
			}
		}
		r.Sawtooth = append(r.Sawtooth, [2]int{turn, q.InputTokens})
		turnNow = max(turnNow, turn)
		last = q
	}
	r.Fidelity = carried(rp, turns, last)
}

// inputBefore is the total input of r's requests made for turns before n
// (summarising and learning ones included), to compare runs of different
// lengths over the same turns.
func inputBefore(r *SideResult, n int) int {
	t := 0
	for _, set := range [][][2]int{r.Sawtooth, r.Other} {
		for _, p := range set {
			if p[0] < n {
				t += p[1]
			}
		}
	}
	return t
}

// planted returns the plants of the first turns turns.
func planted(rp *Replay, turns int) []Plant {
	var out []Plant
	for _, p := range rp.Plants {
		if p.Turn < turns {
			out = append(out, p)
		}
	}
	return out
}

func carried(rp *Replay, turns int, last *testkit.Received) Fidelity {
	var b strings.Builder
	if last != nil {
		b.WriteString(last.System + "\n")
		for _, m := range last.Messages {
			b.WriteString(m.Content + "\n")
			for _, c := range m.ToolCalls {
				b.WriteString(c.Arguments + "\n")
			}
		}
	}
	return carriedIn(rp, turns, b.String())
}

// carriedIn counts the plants of the first turns found verbatim in text
// (instructions case-insensitively).
func carriedIn(rp *Replay, turns int, text string) Fidelity {
	var f Fidelity
	lower := strings.ToLower(text)
	for _, p := range planted(rp, turns) {
		if p.Kind == "instruction" {
			f.Instructions++
			if strings.Contains(lower, strings.ToLower(p.Text)) {
				f.InstructionsCarried++
			}
			continue
		}
		f.Identifiers++
		if strings.Contains(text, p.Text) {
			f.IdentifiersCarried++
		}
	}
	return f
}

// ReplayAgentd replays the first turns of rp through a real agentd against
// the fake with the given window.
// prof, when it names files, profiles the turn loop alone (not the setup
// or the fidelity searches after it).
func ReplayAgentd(ctx context.Context, rp *Replay, window, turns int, prof Profiles) (*SideResult, error) {
	turns = min(turns, len(rp.Turns))
	res := &SideResult{Side: "agentd", Window: window, Turns: turns, Problems: map[string]int{}}
	fake, d, stopDaemon, err := replayDaemon(ctx, rp, window)
	if err != nil {
		return nil, err
	}
	defer stopDaemon()
	chatID, err := d.newChat(ctx, "")
	if err != nil {
		return nil, err
	}
	stopProfile, err := prof.start()
	if err != nil {
		return nil, err
	}
	err = d.replayTurns(ctx, chatID, rp, turns, res, nil)
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return nil, fmt.Errorf("agentd window %d: %w", window, err)
	}
	analyse(res, fake.Requests(), rp, turns)
	if err := searchFidelity(ctx, d, chatID, rp, turns, &res.Fidelity); err != nil {
		res.Error = err.Error()
	}
	return res, nil
}

// replayDaemon starts the fake scripted by rp on window and an in-memory
// agentd on it, with rp's tool results; stop ends both.
func replayDaemon(ctx context.Context, rp *Replay, window int) (*openaifake.Server, *daemon, func(), error) {
	fake := openaifake.New(openaifake.Options{Window: window, Script: Script(rp)})
	dir, err := os.MkdirTemp("", "agentd-bench-replay-")
	if err != nil {
		fake.Close()
		return nil, nil, nil, err
	}
	// The replay measures the daemon's default working size.
	d, err := startDaemon(ctx, daemonOptions{dir: dir, fakeURL: fake.URL(), window: window, inMemory: true, results: toolResults(rp),
		daemonDefaults: true})
	if err != nil {
		fake.Close()
		_ = os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	return fake, d, func() {
		_ = d.close()
		fake.Close()
		_ = os.RemoveAll(dir)
	}, nil
}

func toolResults(rp *Replay) map[string]string {
	m := map[string]string{}
	for _, t := range rp.Turns {
		if t.Report != "" {
			m[t.Report] = t.Result
		}
	}
	return m
}

// searchFidelity asks conversation_search once per planted fact, through
// the hub's tool registry as the chat's own call, and counts the facts the
// answer shows.
func searchFidelity(ctx context.Context, d *daemon, chatID string, rp *Replay, turns int, f *Fidelity) error {
	for _, p := range planted(rp, turns) {
		text, err := d.callTool(ctx, chatID, "conversation_search", map[string]any{"query": p.Text})
		if err != nil {
			return fmt.Errorf("conversation_search %q: %w", p.Text, err)
		}
		found := strings.Contains(strings.ToLower(text), strings.ToLower(p.Text))
		switch {
		case found && p.Kind == "instruction":
			f.InstructionsFound++
		case found:
			f.IdentifiersFound++
		}
	}
	return nil
}

// replayTurns sends the first turns of rp to a chat, one at a time, and
// fills res with what every side reports: turn and overhead times,
// problems, refusals, folds and heals. each, when set, sees every turn.
func (d *daemon) replayTurns(ctx context.Context, chatID string, rp *Replay, turns int, res *SideResult, each func(i int, out turnOutcome)) error {
	drv := d.drive(chatID)
	defer drv.close()
	start := time.Now()
	var wall, over []float64
	for i := range turns {
		before := d.model.total()
		out, err := drv.send(ctx, rp.Turns[i].User)
		if err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
		wall = append(wall, msOf(out.wall))
		over = append(over, msOf(out.wall-(d.model.total()-before)))
		if each != nil {
			each(i, out)
		}
		if p := out.result.Problem; p != nil {
			res.Problems[p.Kind]++
			if p.Kind == chat.ProblemTooLong {
				res.RefusedTurns++
			}
		}
	}
	res.WallSeconds = round3(time.Since(start).Seconds())
	drv.close()
	res.Folds, res.Heals = int(drv.folds.Load()), int(drv.heals.Load())
	res.TurnMS, res.OverheadMS = quantiles(wall), quantiles(over)
	return nil
}
