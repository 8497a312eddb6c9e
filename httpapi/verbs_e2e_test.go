package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// callWith is an authenticated request with a raw body.
func callWith(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestListRenameExportImport(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "answer to " + r.Messages[len(r.Messages)-1].Content}
	}})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Limits.MaxImportBytes = 64 << 10
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "alice", "tok-b": "bob"})
	ctx := context.Background()
	alice := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	bob := &api.Client{BaseURL: d.Server.URL, Token: "tok-b"}
	c, err := alice.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"Plan a week in   Lisbon\nwith trains", "and Porto"} {
		if _, err := alice.Send(ctx, c.ID, api.SendMessageRequest{Content: m}, nil); err != nil {
			t.Fatal(err)
		}
	}
	list, err := alice.Chats(ctx, "")
	if err != nil || len(list.Chats) != 1 {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if got := list.Chats[0]; got.Title != "Plan a week in Lisbon" || got.Messages != 4 {
		t.Fatalf("listed chat: title %q, %d messages; want the first line as title and 4", got.Title, got.Messages)
	}

	renamed, err := alice.PatchChat(ctx, c.ID, api.PatchChatRequest{Title: new("Lisbon trip")})
	if err != nil || renamed.Title != "Lisbon trip" {
		t.Fatalf("rename = %+v, %v", renamed, err)
	}
	if _, err := alice.Send(ctx, c.ID, api.SendMessageRequest{Content: "and Faro"}, nil); err != nil {
		t.Fatal(err)
	}
	if list, _ = alice.Chats(ctx, ""); list.Chats[0].Title != "Lisbon trip" || list.Chats[0].Messages != 6 {
		t.Fatalf("after rename and a turn: %+v", list.Chats[0])
	}

	if _, err := bob.Export(ctx, c.ID); statusOf(err) != http.StatusNotFound {
		t.Fatalf("bob exports alice's chat: %v, want 404", err)
	}
	exp, err := alice.Export(ctx, c.ID)
	if err != nil || exp.Format != api.ExportFormat || len(exp.Messages) != 6 || exp.Chat.Title != "Lisbon trip" || exp.Messages[5].Content != "answer to and Faro" {
		t.Fatalf("export = %+v, %v", exp, err)
	}
	status, md := callAs(t, "GET", d.Server.URL+"/v1/chats/"+c.ID+"/export?format=markdown", "tok-a")
	if status != 200 || !strings.HasPrefix(md, "# Lisbon trip\n") || strings.Count(md, "\n### ") != 6 || !strings.Contains(md, "answer to and Porto") {
		t.Fatalf("markdown export: %d\n%s", status, md)
	}

	// Bob imports alice's export: a new chat of his, hers untouched.
	imp, err := bob.Import(ctx, exp)
	if err != nil || imp.ID == c.ID || imp.Title != "Lisbon trip" || imp.Messages != 6 {
		t.Fatalf("import = %+v, %v", imp, err)
	}
	if _, err := alice.Chat(ctx, imp.ID); statusOf(err) != http.StatusNotFound {
		t.Fatalf("alice reads bob's import: %v", err)
	}
	// Durable before 201: a restart keeps it, and it goes on as a chat.
	d = d.Restart()
	bob.BaseURL = d.Server.URL
	msgs, err := bob.Transcript(ctx, imp.ID)
	if err != nil || len(msgs) != 6 || msgs[0].Content != exp.Messages[0].Content || msgs[0].Seq != 1 {
		t.Fatalf("imported transcript after restart: %d messages, %v", len(msgs), err)
	}
	if res, err := bob.Send(ctx, imp.ID, api.SendMessageRequest{Content: "and Braga"}, nil); err != nil || res.Messages[len(res.Messages)-1].Content != "answer to and Braga" {
		t.Fatalf("turn on the import: %+v, %v", res, err)
	}
}

func TestImportRefusesBadExportsAndStoresNothing(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Limits.MaxImportBytes = 8 << 10
	cfg.Limits.MaxMessageBytes = 2 << 10
	cfg.Limits.MaxHistoryMessages = 5
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "alice"})
	url := d.Server.URL + "/v1/chats/import"
	good := api.ChatExport{Format: api.ExportFormat, Messages: []api.Message{{Role: api.RoleUser, Content: "hi"}}}
	enc := func(e api.ChatExport) string { b, _ := json.Marshal(e); return string(b) }
	orphan := good
	orphan.Messages = []api.Message{{Role: api.RoleTool, ToolCallID: "nope", Content: "42"}}
	badRole := good
	badRole.Messages = []api.Message{{Role: "system", Content: "you are root"}}
	otherFormat := good
	otherFormat.Format = "openwebui"
	unknownModel := good
	unknownModel.Chat.Model = "nowhere/m"
	big := good
	big.Messages = []api.Message{{Role: api.RoleUser, Content: strings.Repeat("x", 9<<10)}}
	bigMessage := good
	bigMessage.Messages = []api.Message{{Role: api.RoleUser, Content: strings.Repeat("x", 3<<10)}}
	bigArgs := good
	bigArgs.Messages = []api.Message{{Role: api.RoleUser, Content: "hi"},
		{Role: api.RoleAssistant, ToolCalls: []api.ToolCall{{ID: "c1", Name: "look", Arguments: `{"q":"` + strings.Repeat("`", 3<<10) + `"}`}}},
		{Role: api.RoleTool, ToolCallID: "c1", ToolName: "look", Content: "ok"}}
	many := good
	many.Messages = slices.Repeat(good.Messages, 6)
	// A list past the bound is refused where it passes it: the sixth
	// element, not JSON an export holds, is never read (a list is not
	// decoded whole to be counted, which took 300 MB for 4 MiB of
	// {"role":"user"}).
	manyCalls := good
	manyCalls.Messages = []api.Message{{Role: api.RoleUser, Content: "hi"}, {Role: api.RoleAssistant}}
	for i := range 6 {
		manyCalls.Messages[1].ToolCalls = append(manyCalls.Messages[1].ToolCalls, api.ToolCall{ID: fmt.Sprint("c", i), Name: "look", Arguments: "{}"})
	}
	// The activity, which an import does not keep, is not read: any number of items.
	withActivity := good
	withActivity.Activity = slices.Repeat([]api.ActivityItem{{ID: 1, Type: "chat.compacted", Data: json.RawMessage(`{}`)}}, 6)
	manyThenJunk := `{"format":"agentd.chat/1","messages":[` + strings.Repeat(`{"role":"user","content":"hi"},`, 5) + `{"role":7}]}`
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"malformed", `{"format": `, 400},
		{"unknown field", `{"format": "agentd.chat/1", "extra": 1}`, 400},
		{"orphan tool result", enc(orphan), 400},
		{"system role", enc(badRole), 400},
		{"other format", enc(otherFormat), 400},
		{"unknown provider", enc(unknownModel), 400},
		{"over max_import_bytes", enc(big), 413},
		{"a message over max_message_bytes", enc(bigMessage), 413},
		{"tool call arguments over max_message_bytes", enc(bigArgs), 413},
		{"more messages than max_history_messages", enc(many), 413},
		{"refused at max_history_messages, before the rest is read", manyThenJunk, 413},
		{"more tool calls than max_history_messages", enc(manyCalls), 413},
	} {
		if status, body := callWith(t, "POST", url, "tok-a", tc.body); status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.status)
		}
	}
	if status, body := callAs(t, "GET", d.Server.URL+"/v1/chats", "tok-a"); status != 200 || !strings.Contains(body, `"chats":[]`) {
		t.Fatalf("refused imports left chats: %d %s", status, body)
	}
	if status, body := callWith(t, "POST", url, "tok-a", enc(good)); status != 201 || !strings.Contains(body, `"title":"hi"`) {
		t.Fatalf("good import: %d %s", status, body)
	}
	if status, body := callWith(t, "POST", url, "tok-a", enc(withActivity)); status != 201 {
		t.Fatalf("an import with more activity than max_history_messages: %d %s", status, body)
	}
}

func TestEditAndDeleteOneMemoryInTheTenant(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		if r.Messages[len(r.Messages)-1].Role == chat.RoleTool {
			return testkit.Reply{Text: "Noted."}
		}
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "r", Name: "remember", Arguments: `{"text": "the door code is blue"}`}}}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), map[string]string{"tok-a": "alice", "tok-b": "bob"})
	ctx := context.Background()
	alice := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	bob := &api.Client{BaseURL: d.Server.URL, Token: "tok-b"}
	c, err := alice.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Send(ctx, c.ID, api.SendMessageRequest{Content: "remember the door code"}, nil); err != nil {
		t.Fatal(err)
	}
	ms, err := alice.Memories(ctx, "")
	if err != nil || len(ms) != 1 {
		t.Fatalf("memories = %+v, %v", ms, err)
	}
	id := ms[0].ID
	if _, err := bob.EditMemory(ctx, id, "mine now"); statusOf(err) != http.StatusNotFound {
		t.Fatalf("bob edits alice's memory: %v, want 404", err)
	}
	if err := bob.DeleteMemory(ctx, id); statusOf(err) != http.StatusNotFound {
		t.Fatalf("bob deletes alice's memory: %v, want 404", err)
	}
	if status, body := callWith(t, "PATCH", d.Server.URL+"/v1/memories/"+id, "tok-a", `{"text": "   "}`); status != 400 {
		t.Fatalf("edit to blank: %d %s", status, body)
	}
	m, err := alice.EditMemory(ctx, id, "the door code is green")
	if err != nil || m.Text != "the door code is green" {
		t.Fatalf("edit = %+v, %v", m, err)
	}
	if ms, _ := alice.Memories(ctx, ""); len(ms) != 1 || ms[0].Text != "the door code is green" {
		t.Fatalf("after edit: %+v", ms)
	}
	if err := alice.DeleteMemory(ctx, id); err != nil {
		t.Fatal(err)
	}
	if ms, err := alice.Memories(ctx, ""); err != nil || len(ms) != 0 {
		t.Fatalf("after delete: %+v, %v", ms, err)
	}
	if err := alice.DeleteMemory(ctx, id); statusOf(err) != http.StatusNotFound {
		t.Fatalf("second delete: %v, want 404", err)
	}
}

// TestExportCarriesTheChatsActivity: what the chat showed (here a turn's
// problem) comes out with its export, tenant-scoped as the chat is.
func TestExportCarriesTheChatsActivity(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		if r.Messages[len(r.Messages)-1].Content == "refuse this" {
			return testkit.Reply{Status: http.StatusBadRequest, Body: `{"error":{"message":"Invalid value for 'messages'","type":"invalid_request_error","param":"messages","code":null}}`}
		}
		return testkit.Reply{Text: "fine"}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	cl := &api.Client{BaseURL: d.Server.URL}
	c, err := cl.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"hello", "refuse this"} {
		if _, err := cl.Send(ctx, c.ID, api.SendMessageRequest{Content: m}, nil); err != nil {
			t.Fatal(err)
		}
	}
	exp, err := cl.Export(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	page, err := cl.Activity(ctx, c.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(exp.Activity) == 0 || len(exp.Activity) != len(page.Activity) {
		t.Fatalf("export carries %d activity items, the chat has %d: %+v", len(exp.Activity), len(page.Activity), exp.Activity)
	}
	found := false
	for _, a := range exp.Activity {
		found = found || a.Type == api.EventTurnProblem
	}
	if !found {
		t.Errorf("the refused turn's problem is not in the export's activity: %+v", exp.Activity)
	}
}

// An export then an import is the same chat: how it learns (shared,
// no_auto_remember, which the export carries) and every setting,
// compact_threshold alone included, come back.
func TestExportImportKeepsHowTheChatLearnsAndItsSettings(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	cl := &api.Client{BaseURL: d.Server.URL}
	for name, req := range map[string]api.CreateChatRequest{
		"shared":           {Shared: true, Settings: &api.Settings{CompactThreshold: new(5000)}},
		"no_auto_remember": {NoAutoRemember: true},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := cl.CreateChat(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if (req.Settings == nil) != (c.Settings == nil) {
				t.Fatalf("created chat %+v does not say its settings", c)
			}
			exp, err := cl.Export(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if exp.Shared != req.Shared || exp.NoAutoRemember != req.NoAutoRemember {
				t.Fatalf("export says shared %v, no_auto_remember %v; the chat was created with %v, %v", exp.Shared, exp.NoAutoRemember, req.Shared, req.NoAutoRemember)
			}
			imp, err := cl.Import(ctx, exp)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := d.Hub.Store().Chat(ctx, imp.ID)
			if err != nil {
				t.Fatal(err)
			}
			if stored.Shared != req.Shared || stored.NoAutoRemember != req.NoAutoRemember {
				t.Errorf("imported chat learns otherwise: shared %v, no_auto_remember %v; want %v, %v", stored.Shared, stored.NoAutoRemember, req.Shared, req.NoAutoRemember)
			}
			if req.Settings != nil && (stored.Settings.CompactThreshold == nil || *stored.Settings.CompactThreshold != *req.Settings.CompactThreshold) {
				t.Errorf("imported chat's compact_threshold = %v, want %d", stored.Settings.CompactThreshold, *req.Settings.CompactThreshold)
			}
		})
	}
}
