package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// Every goroutine has an owner that waits for it: after a daemon served
// turns (a model call, a tool, a watcher's stream) and closed, none of the
// goroutines it started is left (sessions, summariser, learner, tool index,
// the hub's own, Badger's, the HTTP server's).
func TestCloseLeavesNoGoroutineBehind(t *testing.T) {
	before := goleak.IgnoreCurrent()
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: calculatorScript})
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"hello", "please calculate six times seven"} {
		if _, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: text}, nil); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	fake.Close()
	http.DefaultClient.CloseIdleConnections()
	testkit.NoGoroutineLeft(t, before)
}
