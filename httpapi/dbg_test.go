package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

func TestDbgFoldWithToolCall(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 4096, Script: calculatorScript})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 4096)
	d := startDaemon(t, cfg, nil, nil)
	for i := range 40 {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		res, err := d.Client.Send(ctx, mustChat(t, d), api.SendMessageRequest{Content: fmt.Sprintf("please calculate 6*7 %d %s", i, strings.Repeat("pad ", 100))}, nil)
		cancel()
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		if res.Problem != nil {
			t.Logf("turn %d problem %+v", i, res.Problem)
		}
	}
}

var dbgChat string

func mustChat(t *testing.T, d *ownDaemon) string {
	if dbgChat == "" {
		c, err := d.Client.CreateChat(context.Background(), api.CreateChatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		dbgChat = c.ID
	}
	return dbgChat
}
