package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

func statusOf(err error) int {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

func TestDeleteChatRemovesItEverywhereAndFreesItsSlot(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(testkit.Received) testkit.Reply { return testkit.Reply{Text: "hello back"} }})
	defer fake.Close()
	cfg := daemontest.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Limits.ChatsPerTenant = 1
	daemontest.EachStore(t, cfg, deleteChatRemovesIt)
}

func deleteChatRemovesIt(t *testing.T, cfg configs.Config) {
	cfg.DataDir = t.TempDir()
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "alice", "tok-b": "bob"})
	ctx := context.Background()
	alice := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	bob := &api.Client{BaseURL: d.Server.URL, Token: "tok-b"}
	c, err := alice.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Send(ctx, c.ID, api.SendMessageRequest{Content: "hello"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CreateChat(ctx, api.CreateChatRequest{}); statusOf(err) != http.StatusTooManyRequests {
		t.Fatalf("a second chat over the limit: %v", err)
	}

	if err := bob.DeleteChat(ctx, c.ID); statusOf(err) != http.StatusNotFound {
		t.Fatalf("bob deleting alice's chat: %v, want 404", err)
	}
	if msgs, err := alice.Transcript(ctx, c.ID); err != nil || len(msgs) != 2 {
		t.Fatalf("bob's attempt changed alice's chat: %d messages, %v", len(msgs), err)
	}

	if err := alice.DeleteChat(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"", "/transcript", "/context", "/events"} {
		if code, body := callAs(t, "GET", d.Server.URL+"/v1/chats/"+c.ID+path, "tok-a"); code != http.StatusNotFound {
			t.Errorf("GET %s after delete: %d %s", path, code, body)
		}
	}
	if _, err := alice.Send(ctx, c.ID, api.SendMessageRequest{Content: "again"}, nil); statusOf(err) != http.StatusNotFound {
		t.Errorf("a message to the deleted chat: %v, want 404", err)
	}
	if err := alice.DeleteChat(ctx, c.ID); statusOf(err) != http.StatusNotFound {
		t.Errorf("deleting twice: %v, want 404", err)
	}
	if code, body := callAs(t, "GET", d.Server.URL+"/v1/chats", "tok-a"); code != 200 || strings.Contains(body, c.ID) {
		t.Errorf("the list still shows the deleted chat: %d %s", code, body)
	}
	if msgs, _ := d.Hub.Store().Messages(ctx, c.ID, 0, 0); len(msgs) != 0 {
		t.Errorf("%d messages of the deleted chat are still stored", len(msgs))
	}
	if _, ok, _ := d.Hub.Store().LoadSnapshot(ctx, c.ID); ok {
		t.Error("the deleted chat's snapshot is still stored")
	}
	if _, err := alice.CreateChat(ctx, api.CreateChatRequest{}); err != nil {
		t.Fatalf("the deletion did not free the tenant's slot: %v", err)
	}
}

func TestDeleteChatCancelsItsRunningTurnAndEndsItsWatchers(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(testkit.Received) testkit.Reply { return testkit.Reply{Hang: true} }})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", d.Server.URL+"/v1/chats/"+c.ID+"/events", nil)
	watch, err := http.DefaultClient.Do(req)
	if err != nil || watch.StatusCode != 200 {
		t.Fatalf("watch: %v", err)
	}
	defer watch.Body.Close()

	started := make(chan struct{})
	type sent struct {
		res api.TurnResult
		err error
	}
	done := make(chan sent, 1)
	go func() {
		var once bool
		res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "think forever"}, func(ev api.Event) {
			if ev.Type == chat.EventTurnStarted && !once {
				once = true
				close(started)
			}
		})
		done <- sent{res, err}
	}()
	<-started
	if err := d.Client.DeleteChat(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || got.res.Problem == nil || got.res.Problem.Kind != chat.ProblemDeleted {
		t.Fatalf("the running turn did not end as deleted: %+v %v", got.res, got.err)
	}
	// The watcher's stream says so and ends (a read to EOF returns).
	var types []string
	sc := bufio.NewScanner(watch.Body)
	for sc.Scan() {
		if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			types = append(types, ev)
		}
	}
	if len(types) == 0 || types[len(types)-1] != api.EventChatDeleted {
		t.Fatalf("the watcher's last events: %v, want %s last", types, api.EventChatDeleted)
	}
	if msgs, _ := d.Hub.Store().Messages(ctx, c.ID, 0, 0); len(msgs) != 0 {
		t.Errorf("the cancelled turn left %d messages behind", len(msgs))
	}
}

func TestDeleteChatDropsTheOwnershipOfFilesNoOtherChatWasSent(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(testkit.Received) testkit.Reply { return testkit.Reply{Text: "ok"} }})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	shared := upload(t, d.Server.URL, "shared.txt", []byte("in both chats\n"))
	only := upload(t, d.Server.URL, "only.txt", []byte("only in the deleted chat\n"))
	unsent := upload(t, d.Server.URL, "unsent.txt", []byte("never sent\n"))
	gone, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	kept, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	send := func(chatID string, ids ...string) error {
		_, err := d.Client.Send(ctx, chatID, api.SendMessageRequest{Content: "see", AttachmentIDs: ids}, nil)
		return err
	}
	if err := send(gone.ID, shared.ID, only.ID); err != nil {
		t.Fatal(err)
	}
	if err := send(kept.ID, shared.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.Client.DeleteChat(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	if err := send(kept.ID, only.ID); statusOf(err) != http.StatusNotFound {
		t.Errorf("the file only the deleted chat was sent is still the tenant's: %v", err)
	}
	if err := send(kept.ID, shared.ID, unsent.ID); err != nil {
		t.Errorf("a file another chat was sent, or one never sent, was lost with the chat: %v", err)
	}
}

// TestACompactWaitingForItsFoldIsToldWhenTheChatIsDeleted: a /compact
// whose summary is still being written when its chat is deleted answers
// 404 at once, not when the hub gives up asking (minutes later).
func TestACompactWaitingForItsFoldIsToldWhenTheChatIsDeleted(t *testing.T) {
	summarising := make(chan struct{}, 1)
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleUser && (last.Content == "one" || last.Content == "two") {
			return testkit.Reply{Text: "noted"}
		}
		select {
		case summarising <- struct{}{}:
		default:
		}
		return testkit.Reply{Hang: true}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"one", "two"} {
		if _, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: text}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Bounded so that, broken, the test fails instead of waiting out the
	// hub's own limit.
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(cctx, http.MethodPost, d.Server.URL+"/v1/chats/"+c.ID+"/compact", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		res.Body.Close()
		answered <- res.StatusCode
	}()
	<-summarising
	if err := d.Client.DeleteChat(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if st := <-answered; st != http.StatusNotFound {
		t.Fatalf("the /compact of a chat deleted during its fold answered %d, want 404", st)
	}
}

// TestDeleteChatEndsItsPausedTurnBeforeTheChat: a turn paused for the
// application's tool results ends, for a watcher that saw it pause, with
// turn.completed of problem deleted before chat.deleted; it ended on
// chat.deleted alone, so a client waiting for the turn's end never heard it.
func TestDeleteChatEndsItsPausedTurnBeforeTheChat(t *testing.T) {
	d, _, c := startCRM(t, nil)
	ctx := context.Background()
	req, _ := http.NewRequest("GET", d.Server.URL+"/v1/chats/"+c.ID+"/events", nil)
	watch, err := http.DefaultClient.Do(req)
	if err != nil || watch.StatusCode != 200 {
		t.Fatalf("watch: %v", err)
	}
	defer watch.Body.Close()
	paused, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "How is Ada doing?"}, nil)
	if err != nil || paused.Status != "requires_action" {
		t.Fatalf("send: %v %+v", err, paused)
	}
	if err := d.Client.DeleteChat(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	seen, ended := untilDeleted(t, watch.Body, paused.TurnID)
	if ended == nil || ended.Problem == nil || ended.Problem.Kind != api.ProblemDeleted {
		t.Fatalf("the paused turn did not end as deleted for its watcher: %+v, events %v", ended, seen)
	}
	if seen[len(seen)-1] != api.EventChatDeleted {
		t.Fatalf("the watcher's events: %v, want %s last, after turn.completed", seen, api.EventChatDeleted)
	}
}

// TestDeleteChatEndsATurnARestartLeftPaused: after a restart, a turn
// paused for the application's tool results waits in its snapshot, its
// session not running; deleting the chat ends it for a watcher with
// turn.completed of problem deleted before chat.deleted, as before the
// restart. Its session was not woken, and the watcher heard only
// chat.deleted.
func TestDeleteChatEndsATurnARestartLeftPaused(t *testing.T) {
	d, _, c := startCRM(t, nil)
	ctx := context.Background()
	paused, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "How is Ada doing?"}, nil)
	if err != nil || paused.Status != "requires_action" {
		t.Fatalf("send: %v %+v", err, paused)
	}
	d = d.Restart()
	req, _ := http.NewRequest("GET", d.Server.URL+"/v1/chats/"+c.ID+"/events", nil)
	watch, err := http.DefaultClient.Do(req)
	if err != nil || watch.StatusCode != 200 {
		t.Fatalf("watch: %v", err)
	}
	defer watch.Body.Close()
	if err := d.Client.DeleteChat(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	seen, ended := untilDeleted(t, watch.Body, paused.TurnID)
	if ended == nil || ended.Problem == nil || ended.Problem.Kind != api.ProblemDeleted {
		t.Fatalf("the paused turn did not end as deleted for its watcher: %+v, events %v", ended, seen)
	}
}

// untilDeleted reads a chat's events until chat.deleted: their types, and
// the result turn.completed gave the turn turnID (nil if none did).
func untilDeleted(t *testing.T, events io.Reader, turnID string) (seen []string, ended *api.TurnResult) {
	t.Helper()
	err := api.ReadSSE(events, func(ev api.Event) bool {
		seen = append(seen, ev.Type)
		if ev.Type == api.EventTurnCompleted && ev.TurnID == turnID {
			var res api.TurnResult
			if err := json.Unmarshal(ev.Data, &res); err != nil {
				t.Errorf("turn.completed: %v", err)
			}
			ended = &res
		}
		return ev.Type != api.EventChatDeleted
	})
	if err != nil {
		t.Fatal(err)
	}
	return seen, ended
}
