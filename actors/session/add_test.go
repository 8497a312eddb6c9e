package session

import (
	"context"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/persistence"
)

// TestManyTinyAddedMessagesAreStoredWhole: a history of 40,001 one-letter
// messages (a Chat Completions client's, re-sent) fits addBatchBytes many
// times over yet holds more entries than one Badger transaction takes;
// on the real store every message lands, in order, none left out.
func TestManyTinyAddedMessagesAreStoredWhole(t *testing.T) {
	var db *persistence.Store
	h := newHarnessWith(t, 128_000, nil, func(_ *harness, d *Deps) {
		var err error
		if db, err = persistence.Open("", persistence.Options{InMemory: true}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() }) // after the sessions stop (cleanups run last first)
		if err := db.CreateChat(context.Background(), persistence.Chat{ID: "c1", Tenant: "t1", Model: "fake/m"}); err != nil {
			t.Fatal(err)
		}
		d.Store = db
	})
	msgs := make([]chat.Message, 40_001)
	for i := range msgs {
		msgs[i] = chat.Message{Role: chat.RoleUser, Content: "u"}
		if i%2 == 1 {
			msgs[i] = chat.Message{Role: chat.RoleAssistant, Content: "a"}
		}
	}
	h.addMessages(msgs...) // fails the test unless all are answered stored, seqs 1..n
	// The log's last entries and the chat's LastSeq say all landed; reading
	// back every entry would only slow the test.
	n := int64(len(msgs))
	stored, err := db.Messages(context.Background(), "c1", n-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2 || stored[0].Seq != n-1 || stored[0].Content != "a" || stored[1].Seq != n || stored[1].Content != "u" {
		t.Fatalf("the log ends with %+v, want seqs %d (a) and %d (u)", stored, n-1, n)
	}
	c, err := db.Chat(context.Background(), "c1")
	if err != nil || c.LastSeq != n {
		t.Fatalf("the chat's last seq is %d (%v), want %d", c.LastSeq, err, n)
	}
}
