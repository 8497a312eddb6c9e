package persistence

import (
	"context"
	"testing"
	"time"

	"github.com/agentd/agentd/testkit/pgtest"
)

// TestAWriteWhoseConnectionIsLostIsUnavailable: the writer's connection is
// cut in the middle of the server's answer (a blip) to a batch's BEGIN,
// to one of its statements, or to its COMMIT. pgx returns a statement's
// cut end of stream bare (BEGIN's and COMMIT's say conn closed), and the
// write failed with it as it was, which Unavailable did not tell from any
// other fault: the request was answered 500, where it is a 503, to send
// again. The write is not tried again (its COMMIT may
// have landed, as here): the record is stored once, or not at all when the
// cut came before the commit.
func TestAWriteWhoseConnectionIsLostIsUnavailable(t *testing.T) {
	for name, c := range map[string]struct {
		answer string // the command tag whose answer is cut
		landed bool
	}{
		"begin":     {answer: "BEGIN\x00"},
		"statement": {answer: "INSERT 0 1\x00"},
		"commit":    {answer: "COMMIT\x00", landed: true},
	} {
		t.Run(name, func(t *testing.T) {
			p, u, _ := pgtest.Silenced(t)
			s := openPooled(t, u.String(), 2, PostgresOptions{PingEvery: time.Hour})
			ctx := context.Background()
			cuts := p.CutAnswersWith(1, c.answer)
			err := s.PutRecord(ctx, "k", "r", "v")
			if cuts() != 1 {
				t.Fatalf("no answer was cut (the write: %v): the test proves nothing", err)
			}
			if err == nil || !Unavailable(err) {
				t.Fatalf("a write whose connection was cut mid-answer: %v; want it Unavailable", err)
			}
			var ids []string
			if err := s.Records(ctx, "k", func(id string, _ func(any) error) error {
				ids = append(ids, id)
				return nil
			}); err != nil {
				t.Fatalf("a read after the cut: %v", err)
			}
			if want := map[bool]int{true: 1, false: 0}[c.landed]; len(ids) != want {
				t.Fatalf("after the cut the store holds %d records; want %d (the write tried once)", len(ids), want)
			}
		})
	}
}
