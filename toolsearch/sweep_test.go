package toolsearch

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSweep is a tuning aid, run only with TOOLSEARCH_SWEEP="name=v1,v2;...".
func TestSweep(t *testing.T) {
	spec := os.Getenv("TOOLSEARCH_SWEEP")
	if spec == "" {
		t.Skip("set TOOLSEARCH_SWEEP to sweep ranking constants")
	}
	docs := loadBenchDocs(t)
	queries := readJSONL[benchQuery](t, filepath.Join(benchDir, "queries.jsonl"))
	vars := map[string]*float64{
		"k1": &k1, "syn": &synonymWeight, "addr": &addressWeight, "cov": &coverageBoost,
		"floor": &segmentFloor, "segw": &segmentWeight,
		"wn": &fieldWeight[0], "wd": &fieldWeight[1], "wp": &fieldWeight[2],
		"bn": &fieldB[0], "bd": &fieldB[1], "bp": &fieldB[2], "wph": &fieldWeight[3], "bph": &fieldB[3], "ph": &phraseWeight,
	}
	for _, part := range strings.Split(spec, ";") {
		name, vals, _ := strings.Cut(part, "=")
		ptr := vars[name]
		var idepth *int
		if name == "depth" {
			idepth = &segmentDepth
		} else if ptr == nil {
			t.Fatalf("unknown %s", name)
		}
		var orig float64
		if ptr != nil {
			orig = *ptr
		}
		origD := segmentDepth
		for _, v := range strings.Split(vals, ",") {
			f, _ := strconv.ParseFloat(v, 64)
			if idepth != nil {
				*idepth = int(f)
			} else {
				*ptr = f
			}
			ix := NewIndex(docs)
			cat := map[string][2]float64{}
			for _, q := range queries {
				hits := ix.Search(q.Query, 5)
				top := map[string]bool{}
				for _, h := range hits {
					top[h.Name] = true
				}
				ok := 1.0
				for _, e := range q.Expected {
					if !top[e] {
						ok = 0
					}
				}
				for _, c := range []string{"ALL", q.Category} {
					x := cat[c]
					cat[c] = [2]float64{x[0] + 1, x[1] + ok}
				}
			}
			r := func(c string) float64 { return cat[c][1] / cat[c][0] }
			t.Logf("%s=%s ALL=%.4f live=%.3f par=%.3f pm=%.3f mult=%.3f py=%.3f", name, v, r("ALL"), r("live_simple"), r("parallel"), r("parallel_multiple"), r("multiple"), r("simple_python"))
		}
		if ptr != nil {
			*ptr = orig
		}
		segmentDepth = origD
	}
}
