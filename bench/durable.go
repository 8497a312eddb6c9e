package bench

import (
	"fmt"

	dto "github.com/prometheus/client_model/go"
)

// durableReading is a reading of the daemon's histogram of the store's
// durable batches (agentd_store_durable_seconds): what every write that
// waits to be durable waits for, the disk's sync included.
func (d *daemon) durableReading() (*dto.Histogram, error) {
	h, err := d.hub.Metrics().StoreDurable()
	if err != nil {
		return nil, fmt.Errorf("read the store's durable batches: %w", err)
	}
	return h, nil
}

// durableBetween is the p50 and p99, in ms, of the batches observed
// between two readings of one histogram, read off its buckets as
// Prometheus's histogram_quantile reads them: linearly within the bucket
// that holds the rank, so each is within that bucket's width (the
// bounds are at most 1.5 apart). Max is the upper bound of the highest bucket
// reached (the last finite bound when it is the overflow).
func durableBetween(before, after *dto.Histogram) Quantiles {
	bs, was := after.GetBucket(), before.GetBucket()
	n := after.GetSampleCount() - before.GetSampleCount()
	if n == 0 || len(bs) == 0 || len(was) != len(bs) {
		return Quantiles{}
	}
	cum := make([]uint64, len(bs)) // per bucket, the batches between the readings at or under its bound
	for i, b := range bs {
		cum[i] = b.GetCumulativeCount() - was[i].GetCumulativeCount()
	}
	top := bs[len(bs)-1].GetUpperBound()
	at := func(q float64) float64 {
		rank := q * float64(n)
		lower, below := 0.0, uint64(0)
		for i, b := range bs {
			if float64(cum[i]) >= rank {
				inside := float64(cum[i] - below)
				return lower + (b.GetUpperBound()-lower)*(rank-float64(below))/inside
			}
			lower, below = b.GetUpperBound(), cum[i]
		}
		return top // in the overflow: at least the last bound
	}
	maxBound := top
	for i, b := range bs {
		if cum[i] == n {
			maxBound = b.GetUpperBound()
			break
		}
	}
	ms := func(s float64) float64 { return round3(s * 1000) }
	return Quantiles{P50: ms(at(0.5)), P99: ms(at(0.99)), Max: ms(maxBound), N: int(n)}
}

// durableLine tells the durable batches of a part in the bench's output.
func durableLine(q Quantiles) string {
	return fmt.Sprintf("the store's durable batches (commit and sync; %d) p50 %.3f ms p99 %.3f ms, the largest at most %.3f ms (agentd_store_durable_seconds, within a bucket's width)",
		q.N, q.P50, q.P99, q.Max)
}
