package persistence

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit/pgtest"
)

// BenchmarkAppendManyChats appends one synced message per op from many
// chats at once on disk: what group commit is for. ns/op is per durable
// message. 64 writers, and 4,096: the turns agentd-bench's scale part keeps
// in flight, so its turns/s on this disk is bounded by half the rate here.
func BenchmarkAppendManyChats(b *testing.B) {
	for _, writers := range []int{64, 4096} {
		b.Run(fmt.Sprintf("%dwriters", writers), func(b *testing.B) {
			benchEachBackend(b, func(b *testing.B, s store) { appendManyChats(b, s, writers) })
		})
	}
}

func appendManyChats(b *testing.B, s store, writers int) {
	var next atomic.Int64
	b.SetParallelism(max(1, writers/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprintf("chat-%d", next.Add(1))
		for pb.Next() {
			if _, err := s.Append(context.Background(), id, chat.Message{Role: chat.RoleUser, Content: "hello there"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAppendOneChat is one writer's synced append: one sync a message
// is the floor, so this is the disk's fsync time plus Badger's own.
func BenchmarkAppendOneChat(b *testing.B) {
	benchEachBackend(b, appendOneChat)
}

func appendOneChat(b *testing.B, s store) {
	for b.Loop() {
		if _, err := s.Append(context.Background(), "c", chat.Message{Role: chat.RoleUser, Content: "hello there"}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchEachBackend runs f on Badger on disk and, when AGENTD_TEST_PG_DSN is
// set, on Postgres in a fresh schema.
func benchEachBackend(b *testing.B, f func(*testing.B, store)) {
	b.Run("badger", func(b *testing.B) {
		s, err := Open(b.TempDir(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		f(b, s)
	})
	b.Run("postgres", func(b *testing.B) {
		s, _, err := OpenPostgres(context.Background(), pgtest.DSN(b), PostgresOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		f(b, s)
	})
}
