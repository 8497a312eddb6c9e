package httpapi_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestAJSONAnswerToAClientThatReadsNothingEnds: a turn's JSON answer,
// larger than the sockets hold, to a client that never reads is cut at
// http.write_timeout: its handler ends and lets go of the answer, rather
// than wait on the client for as long as it keeps the connection.
func TestAJSONAnswerToAClientThatReadsNothingEnds(t *testing.T) {
	big := strings.Repeat("many words ", 1<<20) // 11 MiB: past what both sockets buffer
	fake := openaifake.New(openaifake.Options{Window: 1 << 17, Script: func(testkit.Received) testkit.Reply {
		return testkit.Reply{Text: big, ChunkRunes: 1 << 20}
	}})
	t.Cleanup(fake.Close)
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 1<<17)
	cfg.Limits.MaxAnswerBytes = 64 << 20
	cfg.HTTP.WriteTimeout.Duration = time.Second
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.Server.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	body := `{"content":"say a lot"}`
	fmt.Fprintf(conn, "POST /v1/chats/%s/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", c.ID, len(body), body)
	// The turn ends and is stored whatever its client does.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ms, err := d.Client.Transcript(ctx, c.ID); err == nil && len(ms) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn did not end")
		}
	}
	// Drain waits for every turn's handler: the one writing to the client
	// that reads nothing must end, long before this deadline.
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := d.Server.Config.Handler.(*httpapi.Server).Drain(wait); err != nil {
		t.Fatalf("the handler of a JSON answer still waits on a client that reads nothing: %v", err)
	}
}
