package toolsearch

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestKthLargest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		xs := rapid.SliceOfN(rapid.SampledFrom([]float64{0.5, 1, 1, 2, 3, 3, 3, 7.25, 9}), 1, 200).Draw(t, "xs")
		k := rapid.IntRange(1, len(xs)).Draw(t, "k")
		want := slices.Clone(xs)
		slices.Sort(want)
		if got := kthLargest(slices.Clone(xs), k); got != want[len(want)-k] {
			t.Fatalf("kthLargest(%v, %d) = %v, want %v", xs, k, got, want[len(want)-k])
		}
	})
}

// namedDocs is an index of n docs with names only, which is all ordering
// candidates reads.
func namedDocs(n int) *Index {
	ix := &Index{docs: make([]doc, n)}
	for i := range ix.docs {
		ix.docs[i].name = fmt.Sprintf("tool%03d", i)
	}
	return ix
}

// TestBestIsSortedPrefix: best leaves the same m leaders, in the same order,
// as a full sort would, and keeps every candidate.
func TestBestIsSortedPrefix(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 120).Draw(t, "docs")
		ix := namedDocs(n)
		perm := rapid.Permutation(slices.Collect(func(yield func(int32) bool) {
			for i := range int32(n) {
				if !yield(i) {
					return
				}
			}
		})).Draw(t, "order")
		cs := make([]cand, rapid.IntRange(0, n).Draw(t, "cands"))
		for i := range cs {
			// Few distinct scores, so ties (cut by name) are common.
			cs[i] = cand{perm[i], rapid.SampledFrom([]float64{0.5, 1, 2, 3, 7.25}).Draw(t, "score")}
		}
		m := rapid.IntRange(0, len(cs)+2).Draw(t, "m")
		want := slices.Clone(cs)
		slices.SortFunc(want, ix.order)
		got := slices.Clone(cs)
		ix.best(got, m)
		if p := min(m, len(cs)); !slices.Equal(got[:p], want[:p]) {
			t.Fatalf("best(%v, %d) = %v, want the prefix %v", cs, m, got[:p], want[:p])
		}
		slices.SortFunc(got, ix.order)
		if !slices.Equal(got, want) {
			t.Fatalf("best(%v, %d) lost or duplicated candidates: %v", cs, m, got)
		}
	})
}

// TestTopKIsTheBest: topK returns the k best touched docs by score, a tie at
// the k-th score cut by name, whatever the spread of the scores.
func TestTopKIsTheBest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 400).Draw(t, "docs")
		ix := namedDocs(n)
		// Many equal scores, and a few far above the rest, which crowd
		// most docs into the lowest buckets.
		values := []float64{0.001, 0.5, 1, 1, 2, 3, 3, 7.25, 40, 1e6}
		s := &scratch{scores: make([]float64, n)}
		var all []cand
		for d := range int32(n) {
			if rapid.Bool().Draw(t, "touched") {
				v := rapid.SampledFrom(values).Draw(t, "score") * rapid.Float64Range(1, 1.001).Draw(t, "jitter")
				s.scores[d] = v
				s.hi = max(s.hi, v)
				s.touched = append(s.touched, d)
				all = append(all, cand{d, v})
			}
		}
		k := rapid.IntRange(0, len(all)+2).Draw(t, "k")
		got := ix.topK(s, k)
		slices.SortFunc(got, ix.order)
		slices.SortFunc(all, ix.order)
		if want := all[:min(k, len(all))]; !slices.Equal(got, want) {
			t.Fatalf("topK(%d) = %v, want %v", k, got, want)
		}
	})
}
