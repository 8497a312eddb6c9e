package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit/daemontest"
)

// TestDrainWaitsForEveryAnswerNotOnlyTurns: on shutdown, serve closes the
// connections once Drain returns, so Drain waits for every handler still
// answering, not only turns': a read the store's close cut answers that
// agentd is stopping, and that answer must reach its client before its
// connection closes. A request that creates a chat stands for them here,
// held inside its handler by a body that has not all come.
func TestDrainWaitsForEveryAnswerNotOnlyTurns(t *testing.T) {
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), "http://127.0.0.1:1", 1<<15), nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.Server.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"title":"drained"}`
	// net/http answers 100 Continue when the handler first reads the
	// body: then the handler is running.
	fmt.Fprintf(conn, "POST /v1/chats HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", len(body))
	rd := bufio.NewReader(conn)
	res, err := http.ReadResponse(rd, nil)
	if err != nil || res.StatusCode != http.StatusContinue {
		t.Fatalf("before the body: %v %v; want 100 Continue", res, err)
	}
	srv := d.Server.Config.Handler.(*httpapi.Server)
	held, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := srv.Drain(held); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain with a handler still answering: %v; want it to wait for it", err)
	}

	if _, err := io.WriteString(conn, body); err != nil {
		t.Fatal(err)
	}
	res, err = http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
		t.Fatalf("the chat's answer: %d", res.StatusCode)
	}
	done, stop := context.WithTimeout(context.Background(), liveness)
	defer stop()
	if err := srv.Drain(done); err != nil {
		t.Fatalf("Drain once the answer is written: %v", err)
	}
}
