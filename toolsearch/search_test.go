package toolsearch

import (
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
