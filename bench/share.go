package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/configs"
)

// ShareShape is the share part's run: one tenant's short turns, one every
// Pause, while another tenant's FlooderChats chats each send a message of
// FlooderBytes as soon as the last is answered (and, refused for its rate,
// as soon as the refusal says), for Length.
type ShareShape struct {
	Length       time.Duration
	Pause        time.Duration
	FlooderChats int
	FlooderBytes int
	OtherBytes   int
}

// DefaultShareShape is BENCHMARKS.md's run: four chats pasting 200 KB logs
// (limits.max_message_bytes is 256 KB), the other tenant asking 1 KB.
var DefaultShareShape = ShareShape{Length: 20 * time.Second, Pause: 50 * time.Millisecond, FlooderChats: 4, FlooderBytes: 200_000, OtherBytes: 1000}

// ShareResult is one share run: the other tenant's turns (from its message
// to its turn's end) with the flooder's running or not, under an ingest
// limit (limits.ingest_bytes_per_second; -1: none).
type ShareResult struct {
	IngestLimit    int64     `json:"ingest_bytes_per_second"`
	Flooding       bool      `json:"flooding"`
	Seconds        float64   `json:"seconds"`
	FlooderTurns   int64     `json:"flooder_turns"`
	FlooderRefused int64     `json:"flooder_refused"`
	OtherTurnMS    Quantiles `json:"other_turn_ms"`
}

// Share runs the share part's shape once on a daemon of its own, against
// the overhead fake (apart in self when set).
func Share(ctx context.Context, self string, sh ShareShape, ingestLimit int64, flooding bool) (*ShareResult, error) {
	url, stopFake, err := startOverheadFake(ctx, self, 32768, Profiles{})
	if err != nil {
		return nil, err
	}
	defer stopFake()
	dir, err := os.MkdirTemp("", "agentd-bench-share-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d, err := startDaemon(ctx, daemonOptions{dir: dir, fakeURL: url, window: 32768, daemonDefaults: true, ingestLimit: ingestLimit})
	if err != nil {
		return nil, err
	}
	defer d.close()
	rp := NewReplay(11, 200, "")
	res := &ShareResult{IngestLimit: ingestLimit, Flooding: flooding, Seconds: sh.Length.Seconds()}
	runCtx, stop := context.WithTimeout(ctx, sh.Length)
	defer stop()
	var wg sync.WaitGroup
	var turns, refused atomic.Int64
	errs := make([]error, sh.FlooderChats)
	for i := range sh.FlooderChats {
		if !flooding {
			break
		}
		id, err := d.newChatFor(ctx, "flooder")
		if err != nil {
			return nil, err
		}
		paste := pasted(rp, sh.FlooderBytes)
		wg.Go(func() {
			for n := 0; runCtx.Err() == nil; n++ {
				// Each paste differs from the last, as a person's would.
				_, err := d.sendOnce(runCtx, "flooder", id, fmt.Sprintf("log %d:\n%s", n, paste))
				var limited *hub.RateLimitedError
				switch {
				case err == nil:
					turns.Add(1)
				case errors.As(err, &limited):
					refused.Add(1)
					sleepCtx(runCtx, limited.Wait)
				case runCtx.Err() != nil:
				default:
					errs[i] = err
					return
				}
			}
		})
	}
	id, err := d.newChatFor(ctx, "other")
	if err != nil {
		stop()
		wg.Wait()
		return nil, err
	}
	var other []float64
	for n := 0; runCtx.Err() == nil; n++ {
		start := time.Now()
		if _, err := d.sendOnce(runCtx, "other", id, fmt.Sprintf("Question %d: %s", n, pasted(rp, sh.OtherBytes))); err != nil {
			if runCtx.Err() != nil {
				break
			}
			stop()
			wg.Wait()
			return nil, fmt.Errorf("the other tenant's turn %d: %w", n, err)
		}
		other = append(other, msOf(time.Since(start)))
		sleepCtx(runCtx, sh.Pause)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("the flooder: %w", err)
	}
	res.FlooderTurns, res.FlooderRefused, res.OtherTurnMS = turns.Load(), refused.Load(), quantiles(other)
	return res, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// shareRuns are the share part's runs: the other tenant alone, then
// flooded without the limit and with the default one.
var shareRuns = []struct {
	limit    int64
	flooding bool
}{{-1, false}, {-1, true}, {configs.DefaultIngestBytesPerSecond, true}}

func ingestLimitName(limit int64) string {
	if limit < 0 {
		return "none"
	}
	return fmt.Sprintf("%d B/s", limit)
}
