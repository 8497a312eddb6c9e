package memory

import (
	"context"
	"fmt"
	"testing"

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
