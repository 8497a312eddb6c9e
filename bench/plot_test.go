package bench

import "testing"

func TestAxisLabels(t *testing.T) {
	steps := map[int]int{9: 2, 8400: 2000, 10794: 2000, 130000: 50000, 2000: 500, 1: 1}
	for n, want := range steps {
		if got := niceStep(n); got != want || n/got > 5 {
			t.Errorf("niceStep(%d) = %d, want %d", n, got, want)
		}
	}
	names := map[int]string{8000: "8K", 2500: "2.5K", 128000: "128K", 1_000_000: "1M", 999: "999", 6772: "6.8K"}
	for n, want := range names {
		if got := shortTokens(n); got != want {
			t.Errorf("shortTokens(%d) = %q, want %q", n, got, want)
		}
	}
}
