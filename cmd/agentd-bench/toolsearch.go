package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/actors/toolindex"
)

// benchToolsearchCmd measures the real tool-index actor on a registry and
// queries in the format of toolsearch/testdata/bfcl (BFCL-derived).
var benchToolsearchCmd = &cobra.Command{
	Use:   "toolsearch",
	Short: "Rank every query's tools through the tool-index actor and write a run file",
	Long: `Loads a registry (JSONL of {name, description, parameters}) into the tool-index
actor, sends each query ({id, query[, expected]}) as a Search with K=10, and writes a
run file of {"id","ranked","latency_ms"} lines, scorable with
python3 toolsearch/testdata/bfcl/baseline.py --score-run RUN. Latency is the round trip
of the actor request. --synthetic N pads the registry to N tools with renamed
copies (name_<word><round>) to measure large registries.`,
	RunE: func(cmd *cobra.Command, _ []string) error {
		f := cmd.Flags()
		toolsPath, _ := f.GetString("tools")
		queriesPath, _ := f.GetString("queries")
		out, _ := f.GetString("out")
		synthetic, _ := f.GetInt("synthetic")
		k, _ := f.GetInt("k")
		if toolsPath == "" || queriesPath == "" || out == "" {
			return fmt.Errorf("--tools, --queries and --out are required")
		}
		return runToolsearchBench(cmd.OutOrStdout(), toolsPath, queriesPath, out, synthetic, k)
	},
}

func init() {
	benchToolsearchCmd.Flags().String("tools", "", "JSONL registry, one {name, description, parameters} per line")
	benchToolsearchCmd.Flags().String("queries", "", "JSONL queries, one {id, query[, expected]} per line")
	benchToolsearchCmd.Flags().String("out", "", "run file to write")
	benchToolsearchCmd.Flags().Int("synthetic", 0, "pad the registry to this many tools with renamed copies (0: as is)")
	benchToolsearchCmd.Flags().Int("k", 10, "tools ranked per query")
	rootCmd.AddCommand(benchToolsearchCmd)
}

type benchToolLine struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type benchQueryLine struct {
	ID       string   `json:"id"`
	Query    string   `json:"query"`
	Expected []string `json:"expected"`
}

type runLine struct {
	ID        string   `json:"id"`
	Ranked    []string `json:"ranked"`
	LatencyMS float64  `json:"latency_ms"`
}

// benchAskTimeout bounds one actor request; a search never comes near it.
const benchAskTimeout = 30 * time.Second

func runToolsearchBench(w io.Writer, toolsPath, queriesPath, out string, synthetic, k int) error {
	lines, err := readJSONLFile[benchToolLine](toolsPath)
	if err != nil {
		return err
	}
	queries, err := readJSONLFile[benchQueryLine](queriesPath)
	if err != nil {
		return err
	}
	tools := make([]toolindex.Tool, len(lines))
	for i, l := range lines {
		tools[i] = toolindex.Tool{Name: l.Name, Description: l.Description, Parameters: l.Parameters}
	}
	tools = padRegistry(tools, synthetic)

	sys := actors.NewSystem(zerolog.Nop())
	pid := sys.Root.Spawn(toolindex.Props(toolindex.Config{}))
	defer func() { _ = sys.Root.StopFuture(pid).Wait() }()

	t0 := time.Now()
	res, err := sys.Root.RequestFuture(pid, &toolindex.Register{ReqID: "bench", Tools: tools}, benchAskTimeout).Result()
	if err != nil {
		return fmt.Errorf("register %d tools: %w", len(tools), err)
	}
	reg, _ := res.(*toolindex.Registered)
	// A search forces the batched rebuild, so the build time is measured here.
	if _, err := sys.Root.RequestFuture(pid, &toolindex.Search{ReqID: "warm", Query: "warm up", K: 1}, benchAskTimeout).Result(); err != nil {
		return fmt.Errorf("first search: %w", err)
	}
	fmt.Fprintf(w, "registered %d tools (%d invalid) and built the index in %s\n", reg.Total, len(reg.Invalid), time.Since(t0).Round(time.Millisecond))

	runs := make([]runLine, 0, len(queries))
	lat := make([]float64, 0, len(queries))
	var scored, hit1, hit5 int
	for _, q := range queries {
		start := time.Now()
		res, err := sys.Root.RequestFuture(pid, &toolindex.Search{ReqID: q.ID, Query: q.Query, K: k}, benchAskTimeout).Result()
		ms := float64(time.Since(start).Microseconds()) / 1000
		if err != nil {
			return fmt.Errorf("search %s: %w", q.ID, err)
		}
		sr, ok := res.(*toolindex.SearchResult)
		if !ok || sr.ReqID != q.ID {
			return fmt.Errorf("search %s: unexpected answer %T", q.ID, res)
		}
		ranked := make([]string, len(sr.Hits))
		for i, h := range sr.Hits {
			ranked[i] = h.Name
		}
		runs = append(runs, runLine{ID: q.ID, Ranked: ranked, LatencyMS: ms})
		lat = append(lat, ms)
		if len(q.Expected) > 0 {
			scored++
			if len(ranked) > 0 && slices.Contains(q.Expected, ranked[0]) {
				hit1++
			}
			if allIn(q.Expected, ranked[:min(5, len(ranked))]) {
				hit5++
			}
		}
	}
	if err := writeRun(out, runs); err != nil {
		return err
	}
	slices.Sort(lat)
	fmt.Fprintf(w, "%d queries over %d tools: latency p50 %.3f ms, p99 %.3f ms, max %.3f ms (actor round trip)\n",
		len(lat), reg.Total, percentile(lat, 0.50), percentile(lat, 0.99), percentile(lat, 1))
	if scored > 0 {
		fmt.Fprintf(w, "recall@1 %.3f, recall@5 %.3f over %d queries with expected tools\n",
			float64(hit1)/float64(scored), float64(hit5)/float64(scored), scored)
	}
	fmt.Fprintf(w, "run written to %s\n", out)
	return nil
}

func allIn(want, got []string) bool {
	for _, x := range want {
		if !slices.Contains(got, x) {
			return false
		}
	}
	return true
}

// percentile of sorted xs by nearest rank; p=1 is the maximum.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[min(len(xs)-1, int(float64(len(xs))*p))]
}

// padWords name the synthetic copies of a registry.
var padWords = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
	"india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
	"sierra", "tango", "uniform", "victor", "whiskey", "xray"}

// padRegistry returns tools followed by renamed copies until there are n:
// the same vocabulary and lengths, many look-alikes per tool, which is harder
// on the index than n distinct tools. n <= len(tools) returns tools as is.
func padRegistry(tools []toolindex.Tool, n int) []toolindex.Tool {
	if n <= len(tools) || len(tools) == 0 {
		return tools
	}
	out := slices.Clone(tools)
	for v := 0; len(out) < n; v++ {
		word := padWords[v%len(padWords)]
		round := v / len(padWords)
		for _, t := range tools {
			if len(out) == n {
				break
			}
			t.Name = fmt.Sprintf("%s_%s%d", t.Name, word, round)
			t.Description += " (" + word + " edition)"
			out = append(out, t)
		}
	}
	return out
}

func readJSONLFile[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

func writeRun(path string, runs []runLine) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create run file: %w", err)
	}
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for _, r := range runs {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return fmt.Errorf("write run file: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write run file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close run file: %w", err)
	}
	return nil
}
