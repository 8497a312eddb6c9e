package toolsearch

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// benchDir is the tool-retrieval benchmark (testdata/bfcl/README.md: BFCL,
// Apache-2.0); TOOLSEARCH_DATA points elsewhere.
var benchDir = envOr("TOOLSEARCH_DATA", "testdata/bfcl")

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

type benchTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type benchQuery struct {
	ID       string   `json:"id"`
	Query    string   `json:"query"`
	Expected []string `json:"expected"`
	Category string   `json:"category"`
}

func readJSONL[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("benchmark data not available: %v", err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	return out
}

// schemaParams flattens a JSON schema's properties (nested and items too).
func schemaParams(raw json.RawMessage) []Param {
	var s map[string]any
	_ = json.Unmarshal(raw, &s)
	var out []Param
	var walk func(m map[string]any)
	walk = func(m map[string]any) {
		if props, ok := m["properties"].(map[string]any); ok {
			names := make([]string, 0, len(props))
			for n := range props {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				p, _ := props[n].(map[string]any)
				d, _ := p["description"].(string)
				out = append(out, Param{Name: n, Description: d})
				if p != nil {
					walk(p)
				}
			}
		}
		if it, ok := m["items"].(map[string]any); ok {
			if d, ok := it["description"].(string); ok {
				out = append(out, Param{Description: d})
			}
			walk(it)
		}
	}
	if s != nil {
		walk(s)
	}
	return out
}

func loadBenchDocs(t testing.TB) []Doc {
	tools := readJSONL[benchTool](t, filepath.Join(benchDir, "tools.jsonl"))
	docs := make([]Doc, len(tools))
	for i, bt := range tools {
		docs[i] = Doc{Name: bt.Name, Description: bt.Description, Params: schemaParams(bt.Parameters)}
	}
	return docs
}

// TestRecallOnBenchmark checks the acceptance bar (recall@5 >= 0.85 on the
// shared BFCL-derived benchmark) and prints per-category figures with -v.
func TestRecallOnBenchmark(t *testing.T) {
	docs := loadBenchDocs(t)
	queries := readJSONL[benchQuery](t, filepath.Join(benchDir, "queries.jsonl"))
	ix := NewIndex(docs)
	type agg struct{ n, r5 float64 }
	cats := map[string]*agg{"ALL": {}}
	var missLog []string
	for _, q := range queries {
		hits := ix.Search(q.Query, 10)
		top := map[string]bool{}
		for i, h := range hits {
			if i < 5 {
				top[h.Name] = true
			}
		}
		ok := 1.0
		for _, e := range q.Expected {
			if !top[e] {
				ok = 0
			}
		}
		if ok == 0 && len(missLog) < 400 {
			names := []string{}
			for _, h := range hits[:min(5, len(hits))] {
				names = append(names, h.Name)
			}
			missLog = append(missLog, fmt.Sprintf("%s %q want %v got %v", q.ID, q.Query, q.Expected, names))
		}
		for _, c := range []string{"ALL", q.Category} {
			if cats[c] == nil {
				cats[c] = &agg{}
			}
			cats[c].n++
			cats[c].r5 += ok
		}
	}
	keys := make([]string, 0, len(cats))
	for k := range cats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-20s n=%4.0f recall@5=%.3f", k, cats[k].n, cats[k].r5/cats[k].n)
	}
	if p := os.Getenv("TOOLSEARCH_MISSES"); p != "" {
		_ = os.WriteFile(p, []byte(fmt.Sprintln(missLog)), 0o644)
	}
	if r := cats["ALL"].r5 / cats["ALL"].n; r < 0.85 {
		t.Errorf("recall@5 = %.3f, want >= 0.85", r)
	}
}
