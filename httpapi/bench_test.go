package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// BenchmarkTurnWithLearner measures a turn's latency on a chat that folds
// often (so the learner is fired often), with the learner's model answering
// at once or after 500 ms. Learning runs alongside the turn, so the two
// figures should match.
func BenchmarkTurnWithLearner(b *testing.B) {
	for _, learnerDelay := range []time.Duration{0, 500 * time.Millisecond} {
		b.Run(fmt.Sprintf("learner=%v", learnerDelay), func(b *testing.B) {
			fake := openaifake.New(openaifake.Options{Window: 4096, Script: func(r testkit.Received) testkit.Reply {
				switch r.System {
				case learner.Instructions:
					time.Sleep(learnerDelay)
					return testkit.Reply{Text: `["likes tea"]`}
				case summarizer.Instructions:
					return testkit.Reply{Text: "What the person wants: to talk."}
				}
				return testkit.Reply{Text: "ok"}
			}})
			defer fake.Close()
			d := daemontest.Start(b, daemontest.Config(b.TempDir(), fake.URL(), 4096), nil)
			ctx := context.Background()
			c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
			msg := strings.Repeat("I like tea and long walks. ", 40)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: msg}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTurnOverhead is everything agentd does for a turn besides
// waiting for the model: the fake answers at once, over loopback.
func BenchmarkTurnOverhead(b *testing.B) {
	fake := openaifake.New(openaifake.Options{Window: 128000})
	defer fake.Close()
	d := daemontest.Start(b, daemontest.Config(b.TempDir(), fake.URL(), 128000), nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "hello"}, nil); err != nil {
			b.Fatal(err)
		}
	}
}
