package ollama

import (
	"context"
	"testing"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/ollamafake"
)

// BenchmarkStream measures one streamed turn against the fake on loopback:
// a 60-token answer in 4-rune pieces, no latency.
func BenchmarkStream(b *testing.B) {
	fake := ollamafake.New(ollamafake.Options{Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "The sky is blue because air scatters short wavelengths of sunlight more than long ones, so blue light reaches the eye from every direction of the sky."}
	}})
	defer fake.Close()
	c, err := New(Config{BaseURL: fake.URL(), Windows: map[string]int{"m": 8192}})
	if err != nil {
		b.Fatal(err)
	}
	req := providers.Request{Model: "m", Messages: testkit.Ask("Why is the sky blue?")}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Stream(context.Background(), req, nil); err != nil {
			b.Fatal(err)
		}
	}
}
