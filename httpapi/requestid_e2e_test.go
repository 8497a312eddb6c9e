package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// logLines returns the JSON log lines written so far.
func logLines(t *testing.T, logs *testkit.LogBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// withHeader sends every request with one header set.
type withHeader struct{ key, value string }

func (h withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// The session's lines about a turn carry the id of the request that sent
// its message, as the HTTP layer's lines do.
func TestTheSessionLogsATurnUnderItsRequestID(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: calculatorScript})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	var logs testkit.LogBuffer
	log := zerolog.New(&logs).Level(zerolog.DebugLevel)
	h, err := hub.New(context.Background(), cfg, log, hub.Options{InMemory: true, RefreshEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(h, cfg, nil, log))
	defer srv.Close()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	client := &api.Client{BaseURL: srv.URL, HTTP: &http.Client{Transport: withHeader{httpapi.RequestIDHeader, "req-turn-7"}}}
	ctx := context.Background()
	c, err := client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Send(ctx, c.ID, api.SendMessageRequest{Content: "please calculate six times seven"}, nil)
	if err != nil || res.Problem != nil {
		t.Fatal(err, res.Problem)
	}
	// The turn's last line is written as it closes, maybe after the answer.
	deadline := time.Now().Add(time.Minute)
	for {
		var turnLines []map[string]any
		ended := false
		for _, l := range logLines(t, &logs) {
			if l["turn_id"] != res.TurnID {
				continue
			}
			turnLines = append(turnLines, l)
			if l["request_id"] != "req-turn-7" {
				t.Fatalf("a line of the turn lacks its request id: %v", l)
			}
			ended = ended || (l["component"] == "session" && l["message"] == "turn ended")
		}
		if ended {
			if len(turnLines) < 2 {
				t.Fatalf("the session logged %d lines of the turn, want its start and its end", len(turnLines))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no \"turn ended\" line of the session within a minute; the turn's lines: %v", turnLines)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
