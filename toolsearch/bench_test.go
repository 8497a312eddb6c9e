package toolsearch

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// variantWords rename copies of the real registry into a larger synthetic
// one: same vocabulary and lengths, 24 look-alikes per tool, which is harder
// on posting lists than a registry of distinct tools would be.
var variantWords = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
	"india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
	"sierra", "tango", "uniform", "victor", "whiskey", "xray"}

// SyntheticRegistry returns n tools derived deterministically from real:
// the real ones first, then renamed variants (name_word, with the word added
// to the description) until n are reached.
func syntheticRegistry(real []Doc, n int) []Doc {
	out := slices.Clone(real)
	for v := 0; len(out) < n; v++ {
		w := variantWords[v%len(variantWords)]
		round := v / len(variantWords)
		for _, d := range real {
			if len(out) == n {
				break
			}
			c := d
			c.Name = fmt.Sprintf("%s_%s%d", d.Name, w, round)
			c.Description = d.Description + " (" + w + " edition)"
			out = append(out, c)
		}
	}
	return out[:n]
}

func benchSearch(b *testing.B, n int) {
	docs := loadBenchDocs(b)
	queries := readJSONL[benchQuery](b, filepath.Join(benchDir, "queries.jsonl"))
	if n > 0 {
		docs = syntheticRegistry(docs, n)
	}
	ix := NewIndex(docs)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := queries[i%len(queries)].Query
		t0 := time.Now()
		ix.Search(q, 10)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// BenchmarkSearch2102 runs the benchmark's queries over its real registry.
func BenchmarkSearch2102(b *testing.B) { benchSearch(b, 0) }

// BenchmarkSearch50000 runs them over a 50,000-tool synthetic registry.
func BenchmarkSearch50000(b *testing.B) { benchSearch(b, 50000) }

// BenchmarkBuild50000 measures building (or rebuilding after a batch
// register) a 50,000-tool index.
func BenchmarkBuild50000(b *testing.B) {
	docs := syntheticRegistry(loadBenchDocs(b), 50000)
	for b.Loop() {
		NewIndex(docs)
	}
}

func TestSyntheticRegistry(t *testing.T) {
	real := []Doc{{Name: "a"}, {Name: "b"}}
	got := syntheticRegistry(real, 5)
	names := []string{}
	for _, d := range got {
		names = append(names, d.Name)
	}
	want := []string{"a", "b", "a_alpha0", "b_alpha0", "a_bravo0"}
	if !slices.Equal(names, want) {
		t.Errorf("names = %v, want %v", names, want)
	}
}
