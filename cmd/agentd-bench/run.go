package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentd/agentd/bench"
)

// init makes a bare `agentd-bench` run every measurement of package bench.
func init() {
	f := rootCmd.Flags()
	f.Int("turns", 2000, "turns of the long-chat replay")
	f.IntSlice("windows", []int{8_000, 32_000, 128_000, 1_000_000}, "context windows to replay on")
	f.Int("big-window-turns", 500, "turns on windows of 1M and more (the peer's unfolded requests make those runs quadratic)")
	f.Int("trim-turns", 400, "turns of the trimMessages peer (its cost per turn grows with the square of the chat)")
	f.String("out", "", "write the report as JSON to this file")
	f.String("only", "", "run some parts, joined by commas: replay, peer, chat_completions, overhead, scale, find_tools, share")
	f.String("peer", "bench/peer", "folder of the LangChain.js peer (installed with bench/peer/run.sh)")
	f.String("tools", "toolsearch/testdata/bfcl/tools.jsonl", "tool registry for find_tools (JSONL)")
	f.String("queries", "toolsearch/testdata/bfcl/queries.jsonl", "queries for find_tools (JSONL)")
	f.String("plots", "", "folder for the sawtooth PNGs (empty: none; BENCHMARKS.md's run uses docs)")
	f.IntSlice("scale-chats", []int{1_000, 10_000}, "chats driven at once")
	f.String("real", "", "replay against this configured real provider/model instead of the fake (needs --config)")
	f.String("replot", "", "only redraw the plots (into --plots) from a report written with --out")
	f.String("config", "", "agentd yaml naming the provider for --real")
	f.String("cpuprofile", "", "write a CPU profile of agentd's replay turn loop to this file (.8K, .32K, … appended with several windows; the overhead part's into .overhead, the scale runs' into .scale1000, .scale10000; the fake apart's beside each, .fake appended)")
	f.String("memprofile", "", "write a heap profile at the end of agentd's replay turn loop to this file (named as --cpuprofile; a scale run's once its chats are idle)")
	f.String("trace", "", "write a runtime execution trace of agentd's turn loop to this file (named as --cpuprofile; `go tool trace` reads it)")
	f.Int("overhead-turns", 500, "turns of the overhead part")
	f.Int("overhead-window", 32_000, "context window of the overhead part")
	f.Int("overhead-message-bytes", 0, "make each turn's message of the overhead part this long (a pasted log; 0: a short question)")
	rootCmd.RunE = func(cmd *cobra.Command, _ []string) error {
		f := cmd.Flags()
		var o bench.Options
		o.Turns, _ = f.GetInt("turns")
		o.Windows, _ = f.GetIntSlice("windows")
		o.BigWindowTurns, _ = f.GetInt("big-window-turns")
		o.TrimTurns, _ = f.GetInt("trim-turns")
		o.Only, _ = f.GetString("only")
		o.PeerDir, _ = f.GetString("peer")
		o.ToolsPath, _ = f.GetString("tools")
		o.QueriesPath, _ = f.GetString("queries")
		o.PlotDir, _ = f.GetString("plots")
		o.ScaleChats, _ = f.GetIntSlice("scale-chats")
		o.Real, _ = f.GetString("real")
		o.ConfigPath, _ = f.GetString("config")
		o.Profile.CPU, _ = f.GetString("cpuprofile")
		o.Profile.Heap, _ = f.GetString("memprofile")
		o.Profile.Trace, _ = f.GetString("trace")
		o.OverheadTurns, _ = f.GetInt("overhead-turns")
		o.OverheadWindow, _ = f.GetInt("overhead-window")
		o.OverheadMessageBytes, _ = f.GetInt("overhead-message-bytes")
		if self, err := os.Executable(); err == nil {
			o.Self = self
		}
		out, _ := f.GetString("out")
		if replot, _ := f.GetString("replot"); replot != "" {
			if o.PlotDir == "" {
				return fmt.Errorf("--replot needs --plots DIR, the folder to draw into")
			}
			rep, err := bench.ReadJSON(replot)
			if err != nil {
				return err
			}
			return bench.PlotReport(o.PlotDir, rep)
		}
		for _, part := range strings.Split(o.Only, ",") {
			switch part {
			case "", bench.PartReplay, bench.PartPeer, bench.PartChatCompletions, bench.PartOverhead, bench.PartScale, bench.PartFindTools, bench.PartShare:
			default:
				return fmt.Errorf("--only %q: use replay, peer, chat_completions, overhead, scale, find_tools or share, or several joined by commas", o.Only)
			}
		}
		if abs, err := filepath.Abs(o.PeerDir); err == nil {
			o.PeerDir = abs
		}
		rep, err := bench.Run(cmd.Context(), o, cmd.OutOrStdout())
		if out != "" && rep != nil {
			if werr := bench.WriteJSON(out, rep); werr != nil {
				return werr
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report written to %s\n", out)
		}
		if err != nil {
			return err
		}
		if len(rep.Errors) > 0 {
			fmt.Fprintf(os.Stderr, "%d part(s) failed; see above\n", len(rep.Errors))
		}
		return nil
	}
}
