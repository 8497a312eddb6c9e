package hub

import (
	"errors"
	"testing"

	"github.com/agentd/agentd/chat"
)

// TestIngestLimitsChargeEachTenantAlone: at one byte a second (a burst of
// eight) a tenant's bucket refills too slowly for this test to see, so
// every refusal here is the limit's: a refused request charges nothing, a
// request past the burst takes a full bucket whole, and each tenant has
// its own.
func TestIngestLimitsChargeEachTenantAlone(t *testing.T) {
	l := newIngestLimits(1)
	if err := l.take("a", 8); err != nil {
		t.Fatalf("the burst: %v", err)
	}
	first := refused(t, l, "a", 4)
	if first.Wait <= 0 || first.Seconds() < 1 {
		t.Fatalf("wait %v (%d s): want a positive wait, at least a second", first.Wait, first.Seconds())
	}
	// Charged, the first refusal would have pushed the second's wait past it.
	if again := refused(t, l, "a", 4); again.Wait > first.Wait {
		t.Fatalf("the second refusal waits %v, the first %v: the refused bytes were charged", again.Wait, first.Wait)
	}
	if err := l.take("b", 8); err != nil {
		t.Fatalf("tenant b refused by a's bytes: %v", err)
	}
	// Past the burst: the whole of a full bucket, then nothing.
	if err := l.take("c", 1000); err != nil {
		t.Fatalf("1,000 bytes on a full bucket of 8: %v", err)
	}
	refused(t, l, "c", 1)
	for _, off := range []int64{0, -1} {
		if err := newIngestLimits(off).take("a", 1<<30); err != nil {
			t.Fatalf("limit %d: %v, want none", off, err)
		}
	}
}

func refused(t *testing.T, l *ingestLimits, tenant string, n int) *RateLimitedError {
	t.Helper()
	err := l.take(tenant, n)
	var rl *RateLimitedError
	if !errors.As(err, &rl) || !errors.Is(err, ErrRateLimited) {
		t.Fatalf("%d bytes of %s: %v, want *RateLimitedError", n, tenant, err)
	}
	return rl
}

func TestMessageBytesCountsWhatAChatReads(t *testing.T) {
	msgs := []chat.Message{
		{Content: "héllo"}, // 6 bytes
		{Thinking: "hmm", ToolCalls: []chat.ToolCall{{Name: "get", Arguments: `{"a":1}`}}},
		{},
	}
	if got, want := messageBytes(msgs...), 6+3+3+7; got != want {
		t.Fatalf("messageBytes = %d, want %d", got, want)
	}
}
