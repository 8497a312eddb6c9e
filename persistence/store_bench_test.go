package persistence

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

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

// BenchmarkToolRoundWrites is a tool round's writes on disk, as a session
// makes them one after the other at one chat: the model's tool calls and
// the tools' results unsynced (a fast tool runs between them), then the
// answer synced. ns/op is the round's wait for the store; the floor is one
// sync, the answer's.
func BenchmarkToolRoundWrites(b *testing.B) {
	benchEachBackend(b, toolRoundWrites)
}

func toolRoundWrites(b *testing.B, s store) {
	ctx := context.Background()
	calls := chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"id":"r-12"}`}}}
	results := chat.Message{Role: chat.RoleTool, ToolCallID: "call_1", ToolName: "lookup", Content: strings.Repeat("a line of the report\n", 40)}
	answer := chat.Message{Role: chat.RoleAssistant, Content: "The report says so."}
	unsynced := s.(interface {
		AppendUnsynced(ctx context.Context, chatID string, msgs ...chat.Message) ([]chat.Message, error)
	})
	for b.Loop() {
		if _, err := unsynced.AppendUnsynced(ctx, "c", calls); err != nil {
			b.Fatal(err)
		}
		if _, err := unsynced.AppendUnsynced(ctx, "c", results); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Append(ctx, "c", answer); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTurnWrites is the store's part of one plain turn, in memory (no
// sync, which is the disk's and not the store's CPU): the caller's
// ownership check, the person's message, and the answer with the snapshot
// it leaves (fifty requests logged, one of them by this turn, a summary,
// loaded tools). ns/op and allocs/op are the store's CPU per turn.
func BenchmarkTurnWrites(b *testing.B) {
	s, err := Open("", Options{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	c := Chat{ID: "c", Tenant: "t", Model: "m", CreatedAt: time.Now().UTC(),
		Instructions: strings.Repeat("Answer briefly and cite the source. ", 6), InstructionsVersion: 1}
	if err := s.CreateChat(ctx, c); err != nil {
		b.Fatal(err)
	}
	snap := turnSnapshot()
	if err := s.SaveSnapshot(ctx, "c", snap); err != nil { // the chat's last fold
		b.Fatal(err)
	}
	snap.Stored()
	user := chat.Message{Role: chat.RoleUser, Origin: chat.OriginPerson, Content: "What does the report say about <costs> & risks?"}
	answer := chat.Message{Role: chat.RoleAssistant, Model: "m", Content: strings.Repeat("The report says this, and \"that\".\n", 20)}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		if _, err := s.ChatTenant(ctx, "c"); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Append(ctx, "c", user); err != nil {
			b.Fatal(err)
		}
		snap.LogRequest(snap.Requests[0], 50)
		if _, err := appendWithSnapshot(ctx, s, "c", func(last int64) Snapshot {
			snap.LastSeqSent = last
			return snap
		}, nil, answer); err != nil {
			b.Fatal(err)
		}
		snap.Stored()
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's CPU time so far (every goroutine's, the store's
// writer and Badger's included): ns/op is wall time, most of it a turn's
// writes waiting for the writer goroutine.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// turnSnapshot is a snapshot as a long chat's turn saves it: fifty
// requests logged, the newest of them by this turn, a summary of some
// 1,500 tokens (6 KB), loaded tools. Its requests but the newest are
// saved; its summary is not.
func turnSnapshot() Snapshot {
	snap := Snapshot{Model: "m", Summary: strings.Repeat("What was said and decided so far. ", 180),
		FirstKeptSeq: 40, Factor: 1.05, LoadedTools: []string{"read_file", "search", "fetch"}}
	for i := range 50 {
		if i == 49 {
			snap.RequestsSaved = snap.RequestsLogged
		}
		snap.LogRequest(chat.RequestLog{At: time.Now().UTC(), Estimate: 12345, Reported: 12000, Budget: 30000, Window: 32768, Kind: "turn"}, 50)
	}
	return snap
}

// BenchmarkEncodeSnapshot is what encoding a turn's snapshot costs:
// encoding/json's json.Marshal and encode of the whole snapshot, its
// fifty requests inline (what a turn wrote before), and encodeSnapshot
// (the turn record and the one new request; the summary is the last
// fold's, stored already).
func BenchmarkEncodeSnapshot(b *testing.B) {
	snap := turnSnapshot()
	snap.held = snap.holding(summaryFP(&snap)) // saved by the last fold
	for _, enc := range []struct {
		name string
		f    func(Snapshot) ([]byte, error)
	}{
		{"json.Marshal", func(s Snapshot) ([]byte, error) { return json.Marshal(s) }},
		{"encode", func(s Snapshot) ([]byte, error) { return encode(s) }},
		{"encodeSnapshot", func(s Snapshot) ([]byte, error) {
			e, err := encodeSnapshot(s)
			return append(e.turn, e.reqs[0]...), err
		}},
	} {
		b.Run(enc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.f(snap); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendAmongChats is one append to each of 10,000 chats in turn,
// in memory, as agentd-bench's scale part spreads its turns: each append
// reads its chat's record (where the log ends) among every other chat's
// keys, and writes it back. ns/op and cpu-ns/op are per append.
func BenchmarkAppendAmongChats(b *testing.B) {
	s, ids := amongChats(b)
	ctx := context.Background()
	msg := chat.Message{Role: chat.RoleAssistant, Content: "general kenobi"}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	i := 0
	for b.Loop() {
		if _, err := s.Append(ctx, ids[i%len(ids)], msg); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkChatAmongChats is a read of one of 10,000 chats' records, as
// each session starting reads its chat's.
func BenchmarkChatAmongChats(b *testing.B) {
	s, ids := amongChats(b)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Chat(ctx, ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// amongChats is an in-memory store of 10,000 titled chats of one message
// each, closed when b ends.
func amongChats(b *testing.B) (*Store, []string) {
	s, err := Open("", Options{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("chat-%05d", i)
		if err := s.CreateChat(ctx, Chat{ID: ids[i], Tenant: "t", Model: "m", Title: "a titled chat", CreatedAt: time.Now().UTC()}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Append(ctx, ids[i], chat.Message{Role: chat.RoleUser, Content: "hello there"}); err != nil {
			b.Fatal(err)
		}
	}
	return s, ids
}
