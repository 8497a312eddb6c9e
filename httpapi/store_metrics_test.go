package httpapi_test

import (
	"context"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit/daemontest"
)

// TestDurableWritesAreTimedOnMetrics: GET /metrics times the store's
// durable batches on each backend: a turn adds at least two (the person's
// message before the ack, the answer before its completion), and their
// time.
func TestDurableWritesAreTimedOnMetrics(t *testing.T) {
	fake := newFake(t, echoScript)
	daemontest.EachStore(t, baseConfig(t, fake.URL()), func(t *testing.T, cfg configs.Config) {
		d := daemontest.Start(t, cfg, nil)
		ctx := context.Background()
		c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		count, sum := metricValue(t, d, "agentd_store_durable_seconds_count"), metricValue(t, d, "agentd_store_durable_seconds_sum")
		res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "hello"}, nil)
		if err != nil || res.Problem != nil {
			t.Fatalf("turn: %v %+v", err, res.Problem)
		}
		count2, sum2 := metricValue(t, d, "agentd_store_durable_seconds_count"), metricValue(t, d, "agentd_store_durable_seconds_sum")
		if count2-count < 2 || sum2 <= sum {
			t.Fatalf("a turn moved the durable batches from %v (%vs) to %v (%vs); want two more at least, and their time", count, sum, count2, sum2)
		}
	})
}
