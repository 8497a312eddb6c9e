package window

import (
	"testing"

	"pgregory.net/rapid"
)

func TestCalibration(t *testing.T) {
	type obs struct{ sent, reported int }
	tests := map[string]struct {
		observe    []obs
		raw        int
		want       int
		wantFactor float64
	}{
		// No report yet: 1000 * 1.2 headroom.
		"no-report": {nil, 1000, 1200, 0},
		// Reported 1100 for an estimate of 1000: factor 1.1; a request of 1200
		// is 1100 + 200*1.1 = 1320.
		"anchored": {[]obs{{1000, 1100}}, 1200, 1320, 1.1},
		// A report under the estimate leaves the factor at 1 but anchors:
		// 900 + 200 = 1100.
		"over-estimate": {[]obs{{1000, 900}}, 1200, 1100, 1},
		// Factor never falls: 1.1 stays after a lower report; anchor moves to
		// (1200 → 1000): 1000 + 100*1.1 = 1110.
		"factor-only-rises": {[]obs{{1000, 1100}, {1200, 1000}}, 1300, 1110, 1.1},
		// Under half the estimate (Ollama counting only uncached tokens) is
		// ignored: still no report, so headroom.
		"partial-report-ignored": {[]obs{{1000, 300}}, 1000, 1200, 0},
		// After a fold the request shrank: min(last report 1100, 500*1.1 = 550).
		"shrunk": {[]obs{{1000, 1100}}, 500, 550, 1.1},
		// One absurd report is capped at MaxFactor.
		"capped": {[]obs{{100, 1000}}, 100, 1000, MaxFactor},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var c Calibration
			for _, o := range tc.observe {
				c.Observe(o.sent, o.reported)
			}
			if got := c.Estimate(tc.raw); got != tc.want {
				t.Errorf("Estimate(%d) = %d, want %d (%+v)", tc.raw, got, tc.want, c)
			}
			if c.Factor != tc.wantFactor {
				t.Errorf("Factor = %v, want %v", c.Factor, tc.wantFactor)
			}
		})
	}
}

func TestCalibrationProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var c Calibration
		n := rapid.IntRange(0, 10).Draw(t, "reports")
		prev := c.factor()
		for i := range n {
			sent := rapid.IntRange(1, 1_000_000).Draw(t, "sent")
			rep := rapid.IntRange(1, 2_000_000).Draw(t, "reported")
			c.Observe(sent, rep)
			if c.factor() < prev {
				t.Fatalf("report %d lowered the factor %v → %v", i, prev, c.factor())
			}
			prev = c.factor()
		}
		a := rapid.IntRange(0, 2_000_000).Draw(t, "a")
		b := rapid.IntRange(a, 2_000_000).Draw(t, "b")
		if c.Estimate(a) > c.Estimate(b) {
			t.Fatalf("not monotone: Estimate(%d)=%d > Estimate(%d)=%d (%+v)", a, c.Estimate(a), b, c.Estimate(b), c)
		}
	})
}
