package persistence

import (
	"context"
	"errors"
	"testing"

	"github.com/agentd/agentd/chat"
)

// TestAnAppendTooBigForATransactionIsErrTooBigAndStoresNothing: more
// tiny messages than one transaction takes fail whole, named ErrTooBig
// (which the hub answers as a limit, not a 500), and leave neither a
// message nor a moved LastSeq behind.
func TestAnAppendTooBigForATransactionIsErrTooBigAndStoresNothing(t *testing.T) {
	s, err := Open("", Options{InMemory: true, memTable: 8 << 20}) // about 1.2 MB a transaction
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if err := s.CreateChat(ctx, Chat{ID: "c1", Tenant: "t1"}); err != nil {
		t.Fatal(err)
	}
	msgs := make([]chat.Message, 12_000)
	for i := range msgs {
		msgs[i] = chat.Message{Role: chat.RoleUser, Content: "u"}
	}
	if _, err := s.Append(ctx, "c1", msgs...); !errors.Is(err, ErrTooBig) {
		t.Fatalf("append of %d messages: %v, want ErrTooBig", len(msgs), err)
	}
	stored, err := s.Messages(ctx, "c1", 0, 0)
	if err != nil || len(stored) != 0 {
		t.Fatalf("%d messages stored (%v), want none", len(stored), err)
	}
	if c, err := s.Chat(ctx, "c1"); err != nil || c.LastSeq != 0 {
		t.Fatalf("last seq %d (%v), want 0", c.LastSeq, err)
	}
}
