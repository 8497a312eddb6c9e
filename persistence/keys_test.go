package persistence

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
)

// TestAKeyIsFoundInTheWholeLogAfterAReopen: a message stored with an
// idempotency key, by any of the writes that store messages (an append,
// an answer with its snapshot, an import), is found by its key inside its
// own chat, however far back in the log, after the store is reopened; an
// unknown key, or another chat's, is not.
func TestAKeyIsFoundInTheWholeLogAfterAReopen(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		for _, id := range []string{"a", "b"} {
			if err := s.CreateChat(ctx, Chat{ID: id, Tenant: "t1", CreatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		user := func(text, key string) chat.Message {
			return chat.Message{Role: chat.RoleUser, Content: text, IdempotencyKey: key}
		}
		// A NUL in a keyed message: Postgres's json operators would refuse it.
		if _, err := s.Append(ctx, "b", user("with a \x00 NUL", "knul")); err != nil {
			t.Fatal(err)
		}
		// An add of two under a key: its length comes back with its key.
		added := user("first", "k1")
		added.KeyedCount = 2
		if _, err := s.Append(ctx, "a", added, chat.Message{Role: chat.RoleAssistant, Content: "one"}); err != nil {
			t.Fatal(err)
		}
		for i := range 50 { // a long log after it: the key is far back
			if _, err := s.Append(ctx, "a", user("filler", ""), chat.Message{Role: chat.RoleAssistant, Content: strings.Repeat("x", i)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := appendWithSnapshot(ctx, s, "a", func(last int64) Snapshot { return Snapshot{FirstKeptSeq: last} }, nil, user("last", "k2")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, "b", user("other chat", "kb")); err != nil {
			t.Fatal(err)
		}
		if err := s.ImportChat(ctx, Chat{ID: "c", Tenant: "t1", CreatedAt: time.Now()}, Snapshot{FirstKeptSeq: 3},
			[]chat.Message{user("imported", "kc"), {Role: chat.RoleAssistant, Content: "its answer"}, user("next", "")}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(t)
		defer s.Close()
		for _, tc := range []struct {
			chat, key string
			seq       int64
			content   string
		}{
			{"a", "k1", 1, "first"},
			{"a", "k2", 103, "last"},
			{"b", "knul", 1, "with a \x00 NUL"},
			{"b", "kb", 2, "other chat"},
			{"c", "kc", 1, "imported"},
			{"a", "kb", 0, ""},      // another chat's key
			{"b", "k1", 0, ""},      // likewise
			{"a", "nokey", 0, ""},   // never sent
			{"nochat", "k1", 0, ""}, // no such chat
		} {
			m, ok, err := s.KeyedMessage(ctx, tc.chat, tc.key)
			if err != nil {
				t.Fatalf("%s/%s: %v", tc.chat, tc.key, err)
			}
			if ok != (tc.seq != 0) || ok && (m.Seq != tc.seq || m.Content != tc.content || m.IdempotencyKey != tc.key) {
				t.Fatalf("%s/%s: found %v, %+v; want seq %d %q", tc.chat, tc.key, ok, m, tc.seq, tc.content)
			}
			if want := map[string]int{"k1": 2}[tc.key]; ok && m.KeyedCount != want {
				t.Fatalf("%s/%s: found an add of %d; want %d", tc.chat, tc.key, m.KeyedCount, want)
			}
		}
		if ms, err := s.Messages(ctx, "a", 1, 1); err != nil || len(ms) != 1 || ms[0].KeyedCount != 2 {
			t.Fatalf("the log's first message: %+v, %v; want the add's length, 2", ms, err)
		}
		if pg, ok := s.(*Postgres); ok {
			// The index answers, not a scan of the chat's log.
			conn, err := pg.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
				t.Fatal(err)
			}
			var plan strings.Builder
			rows, err := conn.Query(ctx, `EXPLAIN SELECT seq, data FROM messages
				WHERE chat_id = $1 AND idempotency_key = $2 ORDER BY seq DESC LIMIT 1`, "a", "k1")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan.WriteString(line + "\n")
			}
			if !strings.Contains(plan.String(), "messages_by_key") {
				t.Fatalf("the key's look-up does not use messages_by_key:\n%s", plan.String())
			}
			if _, err := conn.Exec(ctx, `RESET enable_seqscan`); err != nil {
				t.Fatal(err)
			}
		}
	})
}
