package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// callAs makes an authenticated request and returns the status and body.
func callAs(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

func TestATenantCannotReachAnotherTenantsMemories(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		if r.Messages[len(r.Messages)-1].Role == chat.RoleTool {
			return testkit.Reply{Text: "Noted."}
		}
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "r", Name: "remember", Arguments: `{"text": "the door code is blue"}`}}}
	}})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "alice", "tok-b": "bob"})
	ctx := context.Background()
	alice := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	c, err := alice.CreateChat(ctx, api.CreateChatRequest{NoAutoRemember: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Send(ctx, c.ID, api.SendMessageRequest{Content: "remember the door code"}, nil); err != nil {
		t.Fatal(err)
	}
	status, body := callAs(t, "GET", d.Server.URL+"/v1/memories", "tok-a")
	var mine struct {
		Memories []struct {
			ID    string `json:"id"`
			RunID string `json:"run_id"`
			State string `json:"state"`
		}
	}
	if err := json.Unmarshal([]byte(body), &mine); err != nil || status != 200 || len(mine.Memories) != 1 || mine.Memories[0].State != "waiting" {
		t.Fatalf("alice's memories: %d %s", status, body)
	}
	id, run := mine.Memories[0].ID, mine.Memories[0].RunID

	if status, body := callAs(t, "GET", d.Server.URL+"/v1/memories", "tok-b"); status != 200 || strings.Contains(body, id) || strings.Contains(body, "door code") {
		t.Fatalf("bob sees alice's memories: %d %s", status, body)
	}
	if status, body := callAs(t, "GET", d.Server.URL+"/v1/memory-runs", "tok-b"); status != 200 || strings.Contains(body, run) {
		t.Fatalf("bob sees alice's runs: %d %s", status, body)
	}
	// Each answers as for an id no memory or run has, of the same shape.
	otherID, otherRun := id[:len(id)-4]+"0000", run[:len(run)-4]+"0000"
	for _, tc := range []struct{ method, path, unknown, body string }{
		{"POST", "/v1/memories/" + id + "/approve", "/v1/memories/" + otherID + "/approve", ""},
		{"PATCH", "/v1/memories/" + id, "/v1/memories/" + otherID, `{"text":"the door code is red"}`},
		{"DELETE", "/v1/memories/" + id, "/v1/memories/" + otherID, ""},
		{"POST", "/v1/memory-runs/" + run + "/undo", "/v1/memory-runs/" + otherRun + "/undo", ""},
	} {
		status, body := callWith(t, tc.method, d.Server.URL+tc.path, "tok-b", tc.body)
		if status != 404 {
			t.Fatalf("bob %s %s: %d %s, want 404", tc.method, tc.path, status, body)
		}
		_, none := callWith(t, tc.method, d.Server.URL+tc.unknown, "tok-b", tc.body)
		if strings.NewReplacer(otherID, "ID", otherRun, "ID").Replace(none) != strings.NewReplacer(id, "ID", run, "ID").Replace(body) {
			t.Fatalf("bob %s %s: %s, but an unknown id: %s", tc.method, tc.path, body, none)
		}
	}
	// Alice can: the waiting memory becomes active.
	if status, body := callAs(t, "POST", d.Server.URL+"/v1/memories/"+id+"/approve", "tok-a"); status != 200 || !strings.Contains(body, `"state":"active"`) {
		t.Fatalf("alice approves: %d %s", status, body)
	}
}
