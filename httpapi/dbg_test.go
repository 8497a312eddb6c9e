package httpapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit/daemontest"
)

func TestDbgBusy(t *testing.T) {
	fake := newFake(t, hangScript)
	cfg := baseConfig(t, fake.URL())
	cfg.Limits.ModelIdleTimeout.Duration = 8 * time.Second
	d := daemontest.Start(t, cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	url := d.Server.URL + "/v1/chats/" + c.ID + "/messages"
	started := make(chan struct{})
	go func() { waitStarted(t, d, c.ID, 1); close(started) }()
	post(t, ctx, url, "", "hang 0")
	<-started
	var answers []<-chan answer
	for i := 1; i <= 5; i++ {
		answers = append(answers, post(t, ctx, url, "", fmt.Sprintf("hang %d", i)))
	}
	m := merge(answers...)
	to := time.After(5 * time.Second)
	for {
		select {
		case a := <-m:
			t.Logf("%v %d %s", time.Now().Format("05.000"), a.status, a.body)
		case <-to:
			return
		}
	}
}
