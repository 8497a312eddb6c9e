package httpapi_test

import (
	"context"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestANegativeUsageWedgesNothing: a provider that reports a negative
// token count (or more cached tokens than input) is read as reporting
// none: the turn's usage is sane, and the chat goes on. The counts went
// into the metrics' counters, which panic when asked to go down: the
// session panicked closing every turn after, and the chat answered
// nothing again.
func TestANegativeUsageWedgesNothing(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "hello", Usage: &chat.Usage{InputTokens: 20, OutputTokens: -5, CachedTokens: 64}}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx, c := context.Background(), newChat(t, d, "")
	for _, text := range []string{"hi", "again"} {
		res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: text}, nil)
		if err != nil || res.Status != "completed" {
			t.Fatalf("send %q: %+v, %v", text, res, err)
		}
		if u := res.Usage; u.InputTokens != 20 || u.OutputTokens != 0 || u.CachedTokens != 20 {
			t.Fatalf("send %q: usage %+v, want 20 in, 0 out, 20 cached", text, u)
		}
	}
	if msgs, err := d.Client.Transcript(ctx, c.ID); err != nil || len(msgs) != 4 {
		t.Fatalf("transcript: %d messages, %v", len(msgs), err)
	}
}
