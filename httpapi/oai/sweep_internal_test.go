package oai

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/configs"
)

// recordsHub keeps one tenant's records in memory and counts the reads.
type recordsHub struct {
	Hub
	recs  map[string][]byte
	reads int
}

func (r *recordsHub) TenantRecords(_ context.Context, _, kind string, fn func(string, func(any) error) error) error {
	for _, id := range slices.Sorted(maps.Keys(r.recs)) {
		r.reads++
		if err := fn(id, func(v any) error { return json.Unmarshal(r.recs[id], v) }); err != nil {
			return err
		}
	}
	return nil
}

func (r *recordsHub) PutTenantRecord(_ context.Context, _, _, id string, v any) error {
	b, err := json.Marshal(v)
	r.recs[id] = b
	return err
}

func (r *recordsHub) DeleteTenantRecord(_ context.Context, _, _, id string) error {
	delete(r.recs, id)
	return nil
}

// TestASweepReadsABoundedShareOfTheIndex: a sweep of a tenant's pause index
// reads at most sweepRecords records, keeps the entries of pauses that may
// still wait, and a start sweeps again until nothing ended is left.
func TestASweepReadsABoundedShareOfTheIndex(t *testing.T) {
	var cfg configs.Config
	cfg.ApplyDefaults()
	hub := &recordsHub{recs: map[string][]byte{}}
	h := New(hub, cfg, zerolog.Nop())
	ctx, now := context.Background(), time.Now()
	for i := range 2*sweepRecords + 10 {
		at := now.Add(-2 * h.pauseLife()) // ended
		if i%10 == 0 {
			at = now // may still wait
		}
		if err := hub.PutTenantRecord(ctx, "a", kindPause, fmt.Sprintf("call_%03d", i), pauseIndex{Entries: []pauseEntry{{ChatID: "c", At: at}}}); err != nil {
			t.Fatal(err)
		}
	}
	dropped, full, err := h.sweepPauses(ctx, "a")
	if err != nil || !dropped || !full || hub.reads > sweepRecords+1 {
		t.Fatalf("one sweep: dropped %v, full %v, %v, %d records read; want some dropped of at most %d read", dropped, full, err, hub.reads, sweepRecords)
	}
	h.SweepPauses(ctx, []string{"a"})
	if n := len(hub.recs); n != (2*sweepRecords+10+9)/10 {
		t.Fatalf("%d records left, want the %d whose pauses may still wait", n, (2*sweepRecords+10+9)/10)
	}
}
