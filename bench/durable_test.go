package bench

import (
	"os"
	"path/filepath"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// histogram is a reading with bounds (seconds) and the cumulative count
// at or under each.
func histogram(bounds []float64, cum []uint64, total uint64) *dto.Histogram {
	h := &dto.Histogram{SampleCount: proto.Uint64(total)}
	for i, b := range bounds {
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(b), CumulativeCount: proto.Uint64(cum[i])})
	}
	return h
}

// TestDurableBetweenReadsTheBatchesBetweenTwoReadings: the quantiles are
// of the batches observed between the readings only, interpolated within
// a bucket as Prometheus's histogram_quantile does; a rank in the overflow
// is the last bound; no batch gives nothing.
func TestDurableBetweenReadsTheBatchesBetweenTwoReadings(t *testing.T) {
	bounds := []float64{0.001, 0.002, 0.004}
	before := histogram(bounds, []uint64{50, 50, 50}, 50) // 50 batches under 1 ms before the part
	cases := []struct {
		name  string
		after *dto.Histogram
		want  Quantiles
	}{
		// 100 more: 60 in (1, 2] ms, 40 in (2, 4] ms.
		{"two buckets", histogram(bounds, []uint64{50, 110, 150}, 150), Quantiles{P50: 1.833, P99: 3.95, Max: 4, N: 100}},
		// 100 more under 1 ms: the earlier 50 do not lower the p50.
		{"first bucket", histogram(bounds, []uint64{150, 150, 150}, 150), Quantiles{P50: 0.5, P99: 0.99, Max: 1, N: 100}},
		// 10 more, 2 of them past the last bound.
		{"overflow", histogram(bounds, []uint64{50, 50, 58}, 60), Quantiles{P50: 3.25, P99: 4, Max: 4, N: 10}},
		{"none", histogram(bounds, []uint64{50, 50, 50}, 50), Quantiles{}},
	}
	for _, c := range cases {
		if got := durableBetween(before, c.after); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestSyncedWritesTimeEachWriteAndLeaveNoFile: the probes behind fsync_ms
// and paced_sync_ms time every write, prefilled or not, and take their
// file away; a folder that is not there is an error, not a figure.
func TestSyncedWritesTimeEachWriteAndLeaveNoFile(t *testing.T) {
	for _, prefill := range []bool{false, true} {
		dir := t.TempDir()
		took, err := syncedWrites(dir, 7, 1536, 0, prefill)
		if err != nil {
			t.Fatalf("prefill %v: %v", prefill, err)
		}
		if len(took) != 7 {
			t.Fatalf("prefill %v: %d timings, want 7", prefill, len(took))
		}
		for i, ms := range took {
			if ms <= 0 {
				t.Fatalf("prefill %v: write %d took %v ms", prefill, i, ms)
			}
		}
		if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
			t.Fatalf("prefill %v: the folder holds %v (%v) after the probe", prefill, left, err)
		}
	}
	if _, err := syncedWrites(filepath.Join(t.TempDir(), "gone"), 3, 1536, 0, true); err == nil {
		t.Fatal("a probe in a missing folder gave no error")
	}
}
