package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/actors/toolindex"
)

// FindToolsResult is find_tools' search latency at one registry size: the
// round trip of a Search to the real tool-index actor, the call find_tools
// makes. FloorMS is the same round trip for a request with no words, which
// the index answers without a lookup: what the actor itself costs. AddOneMS
// is the round trip of a Register of one more tool into the full index,
// repeated addOneTimes.
type FindToolsResult struct {
	Tools     int       `json:"tools"`
	Queries   int       `json:"queries"`
	BuildMS   float64   `json:"build_ms"`
	LatencyMS Quantiles `json:"latency_ms"`
	FloorMS   Quantiles `json:"floor_ms"`
	AddOneMS  Quantiles `json:"add_one_ms"`
}

// addOneTimes is how many single tools the bench registers after the
// searches.
const addOneTimes = 50

type registryLine struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Query       string          `json:"query"`
}

func readLines(path string) ([]registryLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	var out []registryLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l registryLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// padTools grows tools to n with renamed copies: look-alikes are harder on
// an index than n unrelated tools.
func padTools(tools []toolindex.Tool, n int) []toolindex.Tool {
	out := append([]toolindex.Tool(nil), tools...)
	for round := 0; len(out) < n && len(tools) > 0; round++ {
		for _, t := range tools {
			if len(out) == n {
				break
			}
			t.Name = fmt.Sprintf("%s_v%d", t.Name, round+2)
			t.Description = fmt.Sprintf("%s (variant %d)", t.Description, round+2)
			out = append(out, t)
		}
	}
	return out
}

// FindTools loads toolsPath (and pads it to each size) into a tool-index
// actor and times one Search per query.
func FindTools(ctx context.Context, toolsPath, queriesPath string, sizes []int) ([]FindToolsResult, error) {
	lines, err := readLines(toolsPath)
	if err != nil {
		return nil, err
	}
	qs, err := readLines(queriesPath)
	if err != nil {
		return nil, err
	}
	base := make([]toolindex.Tool, len(lines))
	for i, l := range lines {
		base[i] = toolindex.Tool{Name: l.Name, Description: l.Description, Parameters: l.Parameters}
	}
	sys := actors.NewSystem(zerolog.Nop())
	defer sys.Shutdown()
	var out []FindToolsResult
	for _, n := range sizes {
		if n <= 0 {
			n = len(base)
		}
		pid := sys.Root.Spawn(toolindex.Props(toolindex.Config{}))
		// The build is timed from the Register: making up the padded
		// registry is the bench's work, not the index's.
		tools := padTools(base, n)
		t0 := time.Now()
		if _, err := sys.Root.RequestFuture(pid, &toolindex.Register{ReqID: "bench", Tools: tools}, 5*time.Minute).Result(); err != nil {
			return nil, fmt.Errorf("register %d tools: %w", n, err)
		}
		if _, err := sys.Root.RequestFuture(pid, &toolindex.Search{ReqID: "warm", Query: "warm up", K: 5}, time.Minute).Result(); err != nil {
			return nil, fmt.Errorf("first search: %w", err)
		}
		r := FindToolsResult{Tools: n, Queries: len(qs), BuildMS: round3(msOf(time.Since(t0)))}
		words := make([]string, len(qs))
		for i, q := range qs {
			words[i] = q.Query
		}
		if r.LatencyMS, err = searchLatency(ctx, sys.Root, pid, words); err != nil {
			return nil, err
		}
		if r.FloorMS, err = searchLatency(ctx, sys.Root, pid, make([]string, len(qs))); err != nil {
			return nil, err
		}
		if r.AddOneMS, err = addOne(sys.Root, pid, base[0]); err != nil {
			return nil, err
		}
		out = append(out, r)
		_ = sys.Root.StopFuture(pid).Wait()
	}
	return out, nil
}

// searchLatency times one Search (K=5, as find_tools asks) per query.
func searchLatency(ctx context.Context, root *actor.RootContext, pid *actor.PID, queries []string) (Quantiles, error) {
	lat := make([]float64, 0, len(queries))
	for _, q := range queries {
		if ctx.Err() != nil {
			return Quantiles{}, ctx.Err()
		}
		t := time.Now()
		res, err := root.RequestFuture(pid, &toolindex.Search{ReqID: "q", Query: q, K: 5}, time.Minute).Result()
		if err != nil {
			return Quantiles{}, fmt.Errorf("search: %w", err)
		}
		if _, ok := res.(*toolindex.SearchResult); !ok {
			return Quantiles{}, fmt.Errorf("search: unexpected answer %T", res)
		}
		lat = append(lat, msOf(time.Since(t)))
	}
	return quantiles(lat), nil
}

// addOne times registering one new tool (a renamed copy of t) at a time.
func addOne(root *actor.RootContext, pid *actor.PID, t toolindex.Tool) (Quantiles, error) {
	lat := make([]float64, 0, addOneTimes)
	name := t.Name
	for i := range addOneTimes {
		t.Name = fmt.Sprintf("%s_added%d", name, i)
		start := time.Now()
		if _, err := root.RequestFuture(pid, &toolindex.Register{ReqID: t.Name, Tools: []toolindex.Tool{t}}, time.Minute).Result(); err != nil {
			return Quantiles{}, fmt.Errorf("register one tool: %w", err)
		}
		lat = append(lat, msOf(time.Since(start)))
	}
	return quantiles(lat), nil
}
