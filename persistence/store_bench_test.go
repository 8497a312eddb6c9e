package persistence

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/agentd/agentd/chat"
)

// BenchmarkAppendManyChats appends one synced message per op from 64 chats
// at once on disk: what group commit is for. ns/op is per durable message.
func BenchmarkAppendManyChats(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var next atomic.Int64
	b.SetParallelism(32) // 64 writers on 2 cores
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
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for b.Loop() {
		if _, err := s.Append(context.Background(), "c", chat.Message{Role: chat.RoleUser, Content: "hello there"}); err != nil {
			b.Fatal(err)
		}
	}
}
