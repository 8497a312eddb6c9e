// Package bench measures agentd as it runs: the real hub and actors, in
// process, against the zero-latency protocol fakes. It replays a long
// deterministic chat on several windows (the request sawtooth, tokens,
// folds, fidelity of planted facts), runs the same replay through a
// LangChain.js peer (bench/peer), and measures per-turn overhead, many
// chats at once, waking a passivated chat and find_tools latency. Token
// counts always come from the fake (testkit.CountTokens), one neutral count
// for every side. `agentd-bench` (cmd/agentd-bench) is its command.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/agentd/agentd/prompts"
)

// Parts of a run, for Options.Only.
const (
	PartReplay    = "replay"
	PartPeer      = "peer"
	PartOverhead  = "overhead"
	PartScale     = "scale"
	PartFindTools = "find_tools"
	// PartShare measures one tenant's turns while another pastes the
	// largest messages it may, without and with the ingest limit.
	PartShare = "share"
	// PartChatCompletions replays through POST /v1/chat/completions, the
	// client re-sending the whole history each turn.
	PartChatCompletions = "chat_completions"
)

// Options choose what a run measures.
type Options struct {
	Turns   int   // replay length (default 2000)
	Windows []int // default 8K, 32K, 128K, 1M
	// BigWindowTurns caps the replay on windows of 1M and more, whose
	// unfolded requests make the peer's run quadratic (default 500).
	BigWindowTurns int
	// TrimTurns caps the trimMessages peer's replay: trimMessages recounts
	// the whole history once per message it drops, so its cost per turn
	// grows with the square of the chat (default 400).
	TrimTurns      int
	Only           string // parts joined by commas, or "" for all
	Seed           uint64
	PeerDir        string // bench/peer, installed
	ToolsPath      string // toolsearch/testdata/bfcl/tools.jsonl
	QueriesPath    string // toolsearch/testdata/bfcl/queries.jsonl
	PlotDir        string // where sawtooth PNGs go ("" : none)
	ScaleChats     []int  // default 1,000 and 10,000
	OverheadStored int    // default 10,000
	OverheadTurns  int    // default 500
	OverheadWindow int    // default 32K
	// OverheadMessageBytes, when set, makes each measured turn's message
	// this long (a pasted log), not a short question.
	OverheadMessageBytes int
	// Self is the bench's own binary: the overhead and scale parts run
	// their fake in a child process of it, so the CPU (and scale's heap)
	// they report is agentd's alone (empty: the fake runs in this process,
	// and its CPU counts too).
	Self string `json:"-"`
	// Real, with ConfigPath, replays against a configured real provider
	// ("provider/model") instead of the fake; nothing else runs.
	Real       string
	ConfigPath string
	// Profile writes CPU and heap profiles of agentd's replay and scale turn loops.
	Profile Profiles
}

func (o *Options) defaults() {
	if o.Turns <= 0 {
		o.Turns = 2000
	}
	if len(o.Windows) == 0 {
		o.Windows = []int{8_000, 32_000, 128_000, 1_000_000}
	}
	if o.BigWindowTurns <= 0 {
		o.BigWindowTurns = 500
	}
	if o.TrimTurns <= 0 {
		o.TrimTurns = 400
	}
	if o.Seed == 0 {
		o.Seed = 2026
	}
	if len(o.ScaleChats) == 0 {
		o.ScaleChats = []int{1_000, 10_000}
	}
	if o.OverheadStored <= 0 {
		o.OverheadStored = 10_000
	}
	if o.OverheadTurns <= 0 {
		o.OverheadTurns = 500
	}
	if o.OverheadWindow <= 0 {
		o.OverheadWindow = 32_000
	}
}

// Report is everything one run measured; it is written as JSON.
type Report struct {
	Machine   Machine           `json:"machine"`
	Started   time.Time         `json:"started"`
	Seconds   float64           `json:"seconds"`
	Options   Options           `json:"options"`
	Replays   []*SideResult     `json:"replays,omitempty"`
	Ratios    []Ratio           `json:"ratios,omitempty"`
	Overhead  *OverheadResult   `json:"overhead,omitempty"`
	Scale     []*ScaleResult    `json:"scale,omitempty"`
	FindTools []FindToolsResult `json:"find_tools,omitempty"`
	Share     []*ShareResult    `json:"share,omitempty"`
	Real      *SideResult       `json:"real,omitempty"`
	// ChatCompletions is the replay through Chat Completions (8K window).
	ChatCompletions *ChatCompletionsResult `json:"chat_completions,omitempty"`
	Errors          []string               `json:"errors,omitempty"`
}

// Ratio compares agentd with a peer on one window.
type Ratio struct {
	Window int    `json:"window"`
	Peer   string `json:"peer"`
	// Turns compared: the shorter of the two runs.
	Turns int `json:"turns"`
	// TotalInput is agentd's total input tokens over the peer's, over the
	// same turns.
	TotalInput float64 `json:"total_input_agentd_over_peer"`
	Largest    float64 `json:"largest_request_agentd_over_peer"`
	Overhead   float64 `json:"overhead_p50_agentd_over_peer"`
	Carried    string  `json:"facts_carried_agentd_vs_peer"`
}

// Machine is where a run ran.
type Machine struct {
	CPUs   int    `json:"cpus"`
	CPU    string `json:"cpu"`
	Memory string `json:"memory"`
	Go     string `json:"go"`
	OS     string `json:"os"`
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if l, _, ok := strings.Cut(string(b), "\n"); ok {
			m.Memory = strings.Join(strings.Fields(l)[1:], " ")
		}
	}
	return m
}

// chatCompletionsWindow is the window of the Chat Completions replay: the
// smallest the long-chat replay runs on, where re-sending costs the most.
const chatCompletionsWindow = 8_000

func (o *Options) want(part string) bool {
	return o.Only == "" || slices.Contains(strings.Split(o.Only, ","), part)
}

// Run measures what o asks, printing as it goes to w.
func Run(ctx context.Context, o Options, w io.Writer) (*Report, error) {
	o.defaults()
	rep := &Report{Machine: machine(), Started: time.Now().UTC(), Options: o}
	start := time.Now()
	defer func() { rep.Seconds = round3(time.Since(start).Seconds()) }()
	fail := func(part string, err error) {
		rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", part, err))
		fmt.Fprintf(w, "%s: FAILED: %v\n", part, err)
	}
	fmt.Fprintf(w, "machine: %d CPUs, %s, %s, %s\n", rep.Machine.CPUs, rep.Machine.CPU, rep.Machine.Memory, rep.Machine.Go)
	// The peer is handed agentd's own full system prompt.
	rp := NewReplay(o.Seed, o.Turns, (&prompts.Builder{}).System(tenant, false))

	if o.Real != "" {
		res, err := ReplayReal(ctx, o.ConfigPath, o.Real, rp, o.Turns)
		if err != nil {
			return rep, err
		}
		rep.Real = res
		printSide(w, res)
		return rep, nil
	}
	if o.want(PartReplay) || o.want(PartPeer) {
		for _, win := range o.Windows {
			turns := o.Turns
			if win >= 1_000_000 {
				turns = min(turns, o.BigWindowTurns)
			}
			var sides []*SideResult
			if o.want(PartReplay) {
				res, err := ReplayAgentd(ctx, rp, win, turns, o.Profile.forWindow(win, len(o.Windows) > 1))
				if err != nil {
					fail(fmt.Sprintf("replay agentd %d", win), err)
				} else {
					sides = append(sides, res)
					printSide(w, res)
				}
			}
			if o.want(PartPeer) {
				for _, side := range []string{PeerSummarization, PeerTrim} {
					n := turns
					if side == PeerTrim {
						n = min(n, o.TrimTurns)
					}
					res, err := ReplayPeer(ctx, o.PeerDir, side, rp, win, n)
					if err != nil {
						fail(fmt.Sprintf("replay %s %d", side, win), err)
						continue
					}
					sides = append(sides, res)
					printSide(w, res)
				}
			}
			rep.Replays = append(rep.Replays, sides...)
			rep.Ratios = append(rep.Ratios, ratios(sides)...)
			if o.PlotDir != "" && len(sides) > 0 {
				if err := plotWindow(o.PlotDir, win, sides); err != nil {
					fail("plot", err)
				}
			}
		}
		for _, r := range rep.Ratios {
			fmt.Fprintf(w, "ratio agentd/%s on %s over %d turns: total input %.3f, largest request %.3f, overhead p50 %.3f, facts carried %s\n",
				r.Peer, shortTokens(r.Window), r.Turns, r.TotalInput, r.Largest, r.Overhead, r.Carried)
		}
	}
	if o.want(PartChatCompletions) {
		res, err := ChatCompletions(ctx, rp, chatCompletionsWindow, o.Turns)
		if err != nil {
			fail("chat_completions", err)
		} else {
			rep.ChatCompletions = res
			fmt.Fprintf(w, "chat completions on %s, %d turns, the client re-sending its history: the client sent %d tokens (largest request %d), the provider received %d (%d for the turns, largest %d, %d over the window) in %d requests; %d chat(s), %d messages stored; %.1f s\n",
				shortTokens(res.Window), res.Turns, res.ClientTokens, res.ClientLargest, res.ProviderTokens, res.ProviderTurnTokens, res.ProviderLargest, res.OverWindow,
				res.ProviderRequests, res.Chats, res.Stored, res.WallSeconds)
		}
	}
	if o.want(PartOverhead) {
		res, err := Overhead(ctx, o.Self, OverheadShape{Stored: o.OverheadStored, Turns: o.OverheadTurns, Window: o.OverheadWindow, MessageBytes: o.OverheadMessageBytes}, o.Profile.suffixed("overhead"))
		if err != nil {
			fail("overhead", err)
		} else {
			rep.Overhead = res
			fmt.Fprintf(w, "overhead: %d stored messages on %s, %d turns%s: turn p50 %.3f ms p99 %.3f ms; without model time p50 %.3f ms p99 %.3f ms; first (waking, folding) turn %.1f ms\n",
				res.StoredMessages, shortTokens(res.Window), res.Turns, messageShape(res.MessageBytes), res.TurnMS.P50, res.TurnMS.P99, res.OverheadMS.P50, res.OverheadMS.P99, res.FirstTurnMS)
			fmt.Fprintf(w, "overhead: CPU per turn p50 %.3f ms p99 %.3f ms (fake apart: %v); plain turns (%d) p50 %.3f ms p99 %.3f ms, CPU p50 %.3f; fold turns (%d) p50 %.3f ms p99 %.3f ms, CPU p50 %.3f; fsync of 4 KB %.3f ms before, %.3f ms after\n",
				res.CPUMS.P50, res.CPUMS.P99, res.FakeApart, res.PlainOverheadMS.N, res.PlainOverheadMS.P50, res.PlainOverheadMS.P99, res.PlainCPUMS.P50,
				res.FoldOverheadMS.N, res.FoldOverheadMS.P50, res.FoldOverheadMS.P99, res.FoldCPUMS.P50, res.FsyncMS[0], res.FsyncMS[1])
			fmt.Fprintf(w, "overhead: %s; the disk alone at a turn's pace (1,000 synced 1.5 KB appends, one a millisecond) p50 %.3f ms p99 %.3f ms\n",
				durableLine(res.StoreDurableMS), res.PacedSyncMS.P50, res.PacedSyncMS.P99)
		}
	}
	if o.want(PartScale) {
		for _, n := range o.ScaleChats {
			wake := 0
			if n == o.ScaleChats[0] {
				wake = 200
			}
			res, err := Scale(ctx, o.Self, n, 2, wake, o.Profile.forScale(n))
			if err != nil {
				fail(fmt.Sprintf("scale %d", n), err)
				continue
			}
			rep.Scale = append(rep.Scale, res)
			fmt.Fprintf(w, "scale: %d chats x %d turns at once (durable, synced Badger; %d provider connections): %.0f turns/s, %d failed; heap per active chat %.1f KB, per idle chat %.1f KB (RSS %.1f / %.1f KB)\n",
				res.Chats, res.TurnsPerChat, res.MaxConns, res.TurnsPerSec, res.Failed, res.ActiveHeapPerChatKB, res.IdleHeapPerChatKB, res.ActiveRSSPerChatKB, res.IdleRSSPerChatKB)
			fmt.Fprintf(w, "scale: the hub created chats at %.0f/s (the first 1,000; the rest are written to the store directly)\n", res.CreatePerSec)
			fmt.Fprintf(w, "scale: CPU per turn %.3f ms (fake apart: %v), the fake's %.3f ms; %d cores bound the two to %.0f turns/s; fsync of 4 KB %.3f ms before, %.3f ms after\n",
				res.CPUPerTurnMS, res.FakeApart, res.FakeCPUPerTurnMS, runtime.NumCPU(), float64(runtime.NumCPU())*1000/max(res.CPUPerTurnMS+res.FakeCPUPerTurnMS, 0.001),
				res.FsyncMS[0], res.FsyncMS[1])
			fmt.Fprintf(w, "scale: %s\n", durableLine(res.StoreDurableMS))
			if res.WakeMS != nil {
				fmt.Fprintf(w, "wake: %d of %d chats passivated; waking one (context read) p50 %.3f ms p99 %.3f ms, a live one p50 %.3f ms p99 %.3f ms\n",
					res.Passived, res.Chats, res.WakeMS.P50, res.WakeMS.P99, res.WarmMS.P50, res.WarmMS.P99)
			}
		}
	}
	if o.want(PartShare) {
		for _, run := range shareRuns {
			res, err := Share(ctx, o.Self, DefaultShareShape, run.limit, run.flooding)
			if err != nil {
				fail("share", err)
				break
			}
			rep.Share = append(rep.Share, res)
			sh, flood := DefaultShareShape, "alone"
			if res.Flooding {
				flood = fmt.Sprintf("while another's %d chats paste %d KB each (%d turns, %d refused for their rate)", sh.FlooderChats, sh.FlooderBytes/1000, res.FlooderTurns, res.FlooderRefused)
			}
			fmt.Fprintf(w, "share: ingest limit %s: a tenant's %d-byte turns, one every %s, %s: p50 %.1f ms p99 %.1f ms (%d turns in %.0f s)\n",
				ingestLimitName(res.IngestLimit), sh.OtherBytes, sh.Pause, flood, res.OtherTurnMS.P50, res.OtherTurnMS.P99, res.OtherTurnMS.N, res.Seconds)
		}
	}
	if o.want(PartFindTools) {
		res, err := FindTools(ctx, o.ToolsPath, o.QueriesPath, []int{0, 50_000})
		if err != nil {
			fail("find_tools", err)
		} else {
			rep.FindTools = res
			for _, r := range res {
				fmt.Fprintf(w, "find_tools: %d tools (index built in %.0f ms): search p50 %.3f ms p99 %.3f ms over %d queries (the actor alone: p50 %.3f ms); one more tool registered in p50 %.3f ms\n",
					r.Tools, r.BuildMS, r.LatencyMS.P50, r.LatencyMS.P99, r.Queries, r.FloorMS.P50, r.AddOneMS.P50)
			}
		}
	}
	return rep, nil
}

func printSide(w io.Writer, r *SideResult) {
	f := r.Fidelity
	fmt.Fprintf(w, "replay %-24s window %-5s turns %d: input %d tokens (%d summarising, %d requests), largest %d (+answer room %d) of %d, over window %d, folds %d, refused %d; turn p50 %.2f ms, overhead p50 %.2f p99 %.2f ms; carried %d/%d ids %d/%d instructions",
		r.Side, shortTokens(r.Window), r.Turns, r.TotalInputTokens, r.SummaryRequests, r.Requests, r.LargestRequest, r.LargestWithAnswer, r.Window,
		r.OverWindow, r.Folds, r.RefusedTurns, r.TurnMS.P50, r.OverheadMS.P50, r.OverheadMS.P99,
		f.IdentifiersCarried, f.Identifiers, f.InstructionsCarried, f.Instructions)
	if r.Side == "agentd" {
		fmt.Fprintf(w, "; search finds %d/%d ids %d/%d instructions", f.IdentifiersFound, f.Identifiers, f.InstructionsFound, f.Instructions)
	}
	fmt.Fprintf(w, " (%.1f s)\n", r.WallSeconds)
	c := r.Cache
	fmt.Fprintf(w, "cache %-24s window %-5s: chat input %d, cached %d (%.1f%%); summarising+learning input %d, cached %d (%.1f%%); prefix breaks %v, their uncached tokens %v\n",
		r.Side, shortTokens(r.Window), c.ChatInput, c.ChatCached, 100*c.ChatShare(), c.SummaryInput+c.LearnInput, c.SummaryCached+c.LearnCached, 100*c.BackgroundShare(), c.Breaks, c.BreakUncached)
}

func ratios(sides []*SideResult) []Ratio {
	var a *SideResult
	for _, s := range sides {
		if s.Side == "agentd" {
			a = s
		}
	}
	if a == nil {
		return nil
	}
	div := func(x, y float64) float64 {
		if y == 0 {
			return 0
		}
		return round3(x / y)
	}
	var out []Ratio
	for _, p := range sides {
		if p == a {
			continue
		}
		n := min(a.Turns, p.Turns)
		out = append(out, Ratio{Window: a.Window, Peer: p.Side, Turns: n,
			TotalInput: div(float64(inputBefore(a, n)), float64(inputBefore(p, n))),
			Largest:    div(float64(a.LargestRequest), float64(p.LargestRequest)),
			Overhead:   div(a.OverheadMS.P50, p.OverheadMS.P50),
			Carried: fmt.Sprintf("%d/%d vs %d/%d", a.Fidelity.IdentifiersCarried+a.Fidelity.InstructionsCarried, a.Fidelity.Identifiers+a.Fidelity.Instructions,
				p.Fidelity.IdentifiersCarried+p.Fidelity.InstructionsCarried, p.Fidelity.Identifiers+p.Fidelity.Instructions)})
	}
	return out
}

func plotWindow(dir string, window int, sides []*SideResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	colors := map[string]Series{"agentd": {Color: colorAgentd}, PeerSummarization: {Color: colorSummarize}, PeerTrim: {Color: colorTrim}}
	var series []Series
	for _, s := range sides {
		c := colors[s.Side]
		series = append(series, Series{Name: s.Side, Color: c.Color, Points: s.Sawtooth})
	}
	// agentd drawn last, on top.
	slices.SortStableFunc(series, func(a, b Series) int {
		if a.Name == "agentd" {
			return 1
		}
		if b.Name == "agentd" {
			return -1
		}
		return 0
	})
	base := filepath.Join(dir, "sawtooth-"+strings.ToLower(shortTokens(window)))
	title := fmt.Sprintf("Request tokens per turn, window %s (fake's count)", shortTokens(window))
	if err := PlotSawtooth(base+".png", title, window, series); err != nil {
		return err
	}
	// The first turns again, wide enough to see each tooth.
	const first = 300
	zoom := make([]Series, len(series))
	long := false
	for i, s := range series {
		zoom[i] = s
		zoom[i].Points = slices.DeleteFunc(slices.Clone(s.Points), func(p [2]int) bool { return p[0] >= first })
		long = long || len(zoom[i].Points) < len(s.Points)
	}
	if !long {
		return nil
	}
	return PlotSawtooth(fmt.Sprintf("%s-first%d.png", base, first), fmt.Sprintf("%s, first %d turns", title, first), window, zoom)
}

// PlotReport draws the sawtooth plots of a report written earlier.
func PlotReport(dir string, rep *Report) error {
	byWindow := map[int][]*SideResult{}
	var windows []int
	for _, s := range rep.Replays {
		if _, ok := byWindow[s.Window]; !ok {
			windows = append(windows, s.Window)
		}
		byWindow[s.Window] = append(byWindow[s.Window], s)
	}
	for _, w := range windows {
		if err := plotWindow(dir, w, byWindow[w]); err != nil {
			return err
		}
	}
	return nil
}

// ReadJSON reads a report written by WriteJSON.
func ReadJSON(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// WriteJSON writes a report to path.
func WriteJSON(path string, rep *Report) error {
	b, err := json.MarshalIndent(rep, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// messageShape names the overhead part's messages when they are not the
// short question.
func messageShape(bytes int) string {
	if bytes <= 0 {
		return ""
	}
	return fmt.Sprintf(" of %d-byte messages", bytes)
}
