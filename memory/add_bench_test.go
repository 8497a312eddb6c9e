package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentd/agentd/persistence"
)

// BenchmarkAddFiveFacts is a learning run of five new facts that raises
// the chat's mark, on a Badger store on disk: what a fold's learning
// costs the writer, syncs included (each run its own tenant's first, so
// the scan for duplicates does not grow with b.N).
func BenchmarkAddFiveFacts(b *testing.B) {
	db, err := persistence.Open(b.TempDir(), persistence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	s := New(db, Options{})
	ctx := context.Background()
	n := 0
	for b.Loop() {
		n++
		texts := make([]string, 5)
		for i := range texts {
			texts[i] = fmt.Sprintf("fact number %d about the person", i)
		}
		in := AddInput{Tenant: fmt.Sprint("t", n), ChatID: fmt.Sprint("c", n), Source: SourceFold, FromSeq: 1, ToSeq: 9, Texts: texts, ReadTo: 9}
		if _, _, err := s.Add(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildMap renders the memory map of a tenant with 16,000
// memories of about a hundred bytes, as a day's first turn builds it: now
// (a running length) and before (the kept lines joined again for each
// count, buildMapBefore).
func BenchmarkBuildMap(b *testing.B) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mems := make([]Memory, 16000)
	for i := range mems {
		mems[i] = Memory{ID: fmt.Sprintf("m_%016x00000000", i), State: StateActive, CreatedAt: base.Add(time.Duration(i) * time.Second),
			Text: fmt.Sprintf("fact %d: the person keeps bees in a garden north of Oslo and plays chess on Sundays", i)}
	}
	for _, bc := range []struct {
		name  string
		build func([]Memory) string
	}{{"now", BuildMap}, {"before", buildMapBefore}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if bc.build(mems) == "" {
					b.Fatal("no map")
				}
			}
		})
	}
}
