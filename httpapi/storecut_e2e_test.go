package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/pgtest"
)

// TestACutStoreConnectionIsA503AndLosesNothingAcknowledged: Postgres
// ending agentd's connections (what a restart does to them) fails the
// requests that meet a dead connection with 503 unavailable and
// Retry-After, never a 500; each message acknowledged is in its chat once,
// and one sent again under its Idempotency-Key until acknowledged is in
// it once too.
func TestACutStoreConnectionIsA503AndLosesNothingAcknowledged(t *testing.T) {
	dsn := pgtest.DSN(t)
	t.Setenv("AGENTD_PG_DSN", dsn)
	admin, err := pgx.Connect(context.Background(), os.Getenv(pgtest.Env))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	fake := newFake(t, echoScript)
	cfg := baseConfig(t, fake.URL())
	cfg.Store = configs.Store{Kind: configs.StorePostgres, DSNEnv: "AGENTD_PG_DSN"}
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	var chats []string
	for range 3 {
		c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		chats = append(chats, c.ID)
	}
	send := func(chatID, words string) (int, api.Error, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.Server.URL+"/v1/chats/"+chatID+"/messages", strings.NewReader(`{"content":"`+words+`"}`))
		req.Header.Set(httpapi.IdempotencyKeyHeader, words)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e api.Error
		if resp.StatusCode != http.StatusOK {
			_ = json.NewDecoder(resp.Body).Decode(&e)
		}
		return resp.StatusCode, e, resp.Header.Get("Retry-After")
	}
	failed := 0
	for round := range 5 {
		cutAgentdConnections(t, admin, dsn)
		for _, id := range chats {
			words := fmt.Sprintf("round-%d", round)
			for try := 0; ; try++ {
				status, e, retry := send(id, words)
				if status == http.StatusOK {
					break
				}
				failed++
				if status != http.StatusServiceUnavailable || e.Kind != "unavailable" || retry == "" || try > 20 {
					t.Fatalf("chat %s, %s, try %d: %d %q (%s), Retry-After %q; want 503 unavailable with Retry-After", id, words, try, status, e.Kind, e.Message, retry)
				}
			}
		}
	}
	if failed == 0 {
		t.Fatal("no request met a cut connection: the test proves nothing")
	}
	// The OpenAI surface says so in its own shape.
	failed = 0
	for round := range 3 {
		cutAgentdConnections(t, admin, dsn)
		for try := 0; ; try++ {
			resp, err := http.Post(d.Server.URL+"/v1/conversations", "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			failed++
			if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != "unavailable" || resp.Header.Get("Retry-After") == "" || try > 20 {
				t.Fatalf("a conversation, round %d, try %d: %d %q, Retry-After %q; want 503 unavailable with Retry-After", round, try, resp.StatusCode, e.Error.Code, resp.Header.Get("Retry-After"))
			}
		}
	}
	if failed == 0 {
		t.Fatal("no conversation met a cut connection: the test proves nothing of the OpenAI surface")
	}
	for _, id := range chats {
		msgs, err := d.Client.Transcript(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range msgs {
			if m.Role == "user" {
				got = append(got, m.Content)
			}
		}
		if want := "round-0 round-1 round-2 round-3 round-4"; strings.Join(got, " ") != want {
			t.Fatalf("chat %s holds the person's messages %q, want each acknowledged one once: %q", id, got, want)
		}
	}
}

// cutAgentdConnections ends every connection the daemon opened on dsn, as
// a restart of Postgres does, and waits until they are gone. Only those:
// other packages' tests share the server (pgtest names each test's
// connections after its schema).
func cutAgentdConnections(t *testing.T, admin *pgx.Conn, dsn string) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	app := cfg.RuntimeParams["application_name"]
	if app == "" {
		t.Fatal("the test's DSN names no application_name: cutting by it would cut every test's connections")
	}
	const others = `FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND application_name = $1 AND backend_type = 'client backend'`
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) `+others, app); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) `+others, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open a minute after their end", n)
		}
	}
}

// TestAReadHeldAtShutdownIsAnsweredThatAgentdStops: a request whose read
// Postgres holds (here behind a lock; a frozen server holds it the same)
// when the daemon stops: the store's Close gives up at store.close_wait
// and cuts the read, and the request was answered as the store's own
// failure — 500 internal (a pool closed under it) or 503 "send again
// shortly". It is the daemon stopping: 503 unavailable, saying so, in the
// API's error body.
func TestAReadHeldAtShutdownIsAnsweredThatAgentdStops(t *testing.T) {
	dsn := pgtest.DSN(t)
	t.Setenv("AGENTD_PG_DSN", dsn)
	ctx := context.Background()
	cfg := baseConfig(t, newFake(t, echoScript).URL())
	cfg.Store = configs.Store{Kind: configs.StorePostgres, DSNEnv: "AGENTD_PG_DSN", CloseWait: configs.Duration{Duration: time.Second}}
	h, err := hub.New(ctx, cfg, zerolog.Nop(), hub.Options{RefreshEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(h, cfg, nil, zerolog.Nop()))
	defer srv.Close()
	admin := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(ctx) })
		return c
	}
	locker, watcher := admin(), admin()
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE chats IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status int
		e      api.Error
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/v1/chats")
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var e api.Error
		err = json.NewDecoder(resp.Body).Decode(&e)
		answered <- answer{resp.StatusCode, e, err}
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		var waiting bool
		if err := watcher.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = 'chats'::regclass AND NOT granted)`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the request's read of the chats did not wait for the lock within a minute")
		}
	}
	_ = h.Close(ctx) // the store gives up: its error is TestCloseGivesUpOnAFrozenServerWhenItsBoundEnds's
	select {
	case a := <-answered:
		if a.err != nil || a.status != http.StatusServiceUnavailable || a.e.Kind != "unavailable" || !strings.Contains(a.e.Message, "shutting down") {
			t.Fatalf("a read cut as the daemon stopped: %d %q (%s), %v; want 503 unavailable saying agentd is shutting down", a.status, a.e.Kind, a.e.Message, a.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no answer a minute after the hub closed")
	}
}

// TestAKeyedMessageWhoseCommitWasCutIsStoredOnce: on real Postgres, the
// answer to a person's message's COMMIT is cut in its middle, so the
// message is stored but the daemon does not know it: the send is 503, to
// send again. Sent again under its Idempotency-Key, it is answered as a
// send never cut is (the same messages, at the same seqs), and the chat
// holds it once. (The store's part is TestAWriteWhoseConnectionIsLostIsUnavailable,
// the session's TestAKeyedMessageWhoseWriteLandedUnseenIsStoredOnce, on
// a test store.)
func TestAKeyedMessageWhoseCommitWasCutIsStoredOnce(t *testing.T) {
	cut, via, _ := pgtest.Silenced(t)
	t.Setenv("AGENTD_PG_DSN", via.String())
	cfg := baseConfig(t, newFake(t, echoScript).URL())
	cfg.Store = configs.Store{Kind: configs.StorePostgres, DSNEnv: "AGENTD_PG_DSN"}
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	send := func(chatID string) (int, api.TurnResult, api.Error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.Server.URL+"/v1/chats/"+chatID+"/messages", strings.NewReader(`{"content":"hello"}`))
		req.Header.Set(httpapi.IdempotencyKeyHeader, "key-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res api.TurnResult
		var e api.Error
		if resp.StatusCode == http.StatusOK {
			err = json.NewDecoder(resp.Body).Decode(&res)
		} else {
			err = json.NewDecoder(resp.Body).Decode(&e)
		}
		if err != nil {
			t.Fatalf("chat %s: the answer's %d body: %v", chatID, resp.StatusCode, err)
		}
		return resp.StatusCode, res, e
	}
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The COMMIT of the write that stores the key: not a write of the
	// tenant's memory map, say, committing first.
	cuts := cut.CutAnswersAfter(1, "key-1", "COMMIT\x00")
	status, _, e := send(c.ID)
	if cuts() != 1 {
		t.Fatalf("no COMMIT's answer was cut (the send: %d %q): the test proves nothing", status, e.Kind)
	}
	if status != http.StatusServiceUnavailable || e.Kind != "unavailable" {
		t.Fatalf("a message whose COMMIT's answer was cut: %d %q (%s); want 503 unavailable, to send again", status, e.Kind, e.Message)
	}
	status, again, e := send(c.ID)
	if status != http.StatusOK {
		t.Fatalf("sent again under its key: %d %q (%s)", status, e.Kind, e.Message)
	}
	// A send never cut, in a chat of its own, is what the first would have
	// been answered.
	other, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	status, want, e := send(other.ID)
	if status != http.StatusOK || len(want.Messages) != 2 {
		t.Fatalf("a send never cut: %d %+v %q", status, want, e.Kind)
	}
	if !sameMessages(again.Messages, want.Messages) || again.Replayed != want.Replayed {
		t.Fatalf("sent again under its key: %+v; want it answered as a send never cut is: %+v", again, want)
	}
	msgs, err := d.Client.Transcript(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, string(m.Role)+": "+m.Content)
	}
	if strings.Join(got, "|") != "user: hello|assistant: You said: hello" {
		t.Fatalf("the chat holds %q; want the message once, answered once", got)
	}
}
