package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
	"github.com/agentd/agentd/tools"
)

// One test per auth and limit rule of issue 10, each driving a whole
// in-process daemon over HTTP.

// answer is one raw HTTP exchange.
type answer struct {
	status int
	header http.Header
	err    api.Error
	body   string
}

// call sends a request with an optional bearer token and reads the answer.
func call(t *testing.T, ctx context.Context, method, url, token, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(b, &a.err); err != nil {
			t.Fatalf("%s %s: status %d with a body that is not the error shape: %q", method, url, resp.StatusCode, b)
		}
	}
	return a
}

func (a answer) want(t *testing.T, status int, kind string) {
	t.Helper()
	if a.status != status || a.err.Kind != kind {
		t.Fatalf("status %d kind %q (%s); want %d %q", a.status, a.err.Kind, a.err.Message, status, kind)
	}
}

// echoScript answers every request with the person's last words.
func echoScript(r testkit.Received) testkit.Reply {
	return testkit.Reply{Text: "You said: " + r.Messages[len(r.Messages)-1].Content}
}

func newFake(t *testing.T, script testkit.Script) *openaifake.Server {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: script})
	t.Cleanup(fake.Close)
	return fake
}

func baseConfig(t *testing.T, url string) configs.Config {
	cfg := daemontest.Config(t.TempDir(), url, 32000)
	cfg.Limits.RequestsPerSecond = 1e6
	return cfg
}

func TestAuthTokens(t *testing.T) {
	fake := newFake(t, echoScript)
	d := daemontest.Start(t, baseConfig(t, fake.URL()), map[string]string{"tok-a": "a", "tok-b": "b"})
	ctx := context.Background()
	cases := map[string]struct {
		token, query string
		status       int
		kind         string
	}{
		"no token":              {"", "", 401, "unauthorized"},
		"wrong token":           {"tok-c", "", 401, "unauthorized"},
		"prefix of a token":     {"tok-", "", 401, "unauthorized"},
		"token in the query":    {"", "?access_token=tok-a", 401, "unauthorized"}, // only event streams take it
		"right token":           {"tok-a", "", 200, ""},
		"other tenant's token":  {"tok-b", "", 200, ""},
		"token with extra text": {"tok-a tok-b", "", 401, "unauthorized"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := call(t, ctx, http.MethodGet, d.Server.URL+"/v1/chats"+tc.query, tc.token, "")
			a.want(t, tc.status, tc.kind)
			if tc.status == 401 && !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer WWW-Authenticate challenge: %q", a.header.Get("WWW-Authenticate"))
			}
		})
	}
	// The event stream, which a browser's EventSource opens without
	// headers, is the one route that takes the token in the query.
	c, err := (&api.Client{BaseURL: d.Server.URL, Token: "tok-a"}).CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	events := d.Server.URL + "/v1/chats/" + c.ID + "/events"
	streams := map[string]struct {
		token, query string
		status       int
	}{
		"token in the query":   {"", "?access_token=tok-a", 200},
		"wrong token in query": {"", "?access_token=nope", 401},
		"header beats query":   {"nope", "?access_token=tok-a", 401},
	}
	for name, tc := range streams {
		t.Run("events/"+name, func(t *testing.T) {
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			req, _ := http.NewRequestWithContext(sctx, http.MethodGet, events+tc.query, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
	// A refused request creates nothing.
	call(t, ctx, http.MethodPost, d.Server.URL+"/v1/chats", "tok-c", `{}`).want(t, 401, "unauthorized")
	if cs, _ := d.Hub.Chats(ctx, "a"); len(cs) != 1 {
		t.Fatalf("tenant a has %d chats after refused requests, want its one", len(cs))
	}
}

func TestTenantCannotReachAnotherTenantsChat(t *testing.T) {
	fake := newFake(t, echoScript)
	d := daemontest.Start(t, baseConfig(t, fake.URL()), map[string]string{"tok-a": "a", "tok-b": "b"})
	ctx := context.Background()
	a := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	c, err := a.CreateChat(ctx, api.CreateChatRequest{Title: "a's secret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, c.ID, api.SendMessageRequest{Content: "my secret plan"}, nil); err != nil {
		t.Fatal(err)
	}
	before, _ := a.Transcript(ctx, c.ID)
	base := d.Server.URL + "/v1/chats/" + c.ID
	cases := map[string]struct{ method, url, body string }{
		"chat":       {http.MethodGet, base, ""},
		"transcript": {http.MethodGet, base + "/transcript", ""},
		"context":    {http.MethodGet, base + "/context", ""},
		"events":     {http.MethodGet, base + "/events", ""},
		"post":       {http.MethodPost, base + "/messages", `{"content":"let me in"}`},
		"patch":      {http.MethodPatch, base, `{"title":"mine now"}`},
		"compact":    {http.MethodPost, base + "/compact", `{}`},
		"delete":     {http.MethodDelete, base, ""},
		"export":     {http.MethodGet, base + "/export", ""},
		"activity":   {http.MethodGet, base + "/activity", ""},
		"results":    {http.MethodPost, base + "/tool-results", `{"results":[{"call_id":"c","output":"x"}]}`},
	}
	// An id no chat has, of the same shape: the foreign one answers as it does.
	unknown := hub.NewID()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// A short deadline: a 200 on events would stream forever.
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			got := call(t, cctx, tc.method, tc.url, "tok-b", tc.body)
			got.want(t, 404, "not_found")
			if strings.Contains(got.body, "secret") {
				t.Fatalf("the 404 leaks the chat: %s", got.body)
			}
			none := call(t, cctx, tc.method, strings.Replace(tc.url, c.ID, unknown, 1), "tok-b", tc.body)
			if strings.ReplaceAll(none.body, unknown, "ID") != strings.ReplaceAll(got.body, c.ID, "ID") {
				t.Fatalf("another tenant's chat answers %s, an unknown one %s", got.body, none.body)
			}
		})
	}
	var list struct{ Chats []api.Chat }
	b := &api.Client{BaseURL: d.Server.URL, Token: "tok-b"}
	resp := call(t, ctx, http.MethodGet, d.Server.URL+"/v1/chats", "tok-b", "")
	if err := json.Unmarshal([]byte(resp.body), &list); err != nil || len(list.Chats) != 0 {
		t.Fatalf("tenant b lists %d chats (%v): %s", len(list.Chats), err, resp.body)
	}
	if _, err := b.Transcript(ctx, c.ID); err == nil {
		t.Fatal("the Go client read another tenant's transcript")
	}
	after, _ := a.Transcript(ctx, c.ID)
	got, _ := d.Hub.Chat(ctx, "a", c.ID)
	if len(after) != len(before) || got.Title != "a's secret" {
		t.Fatalf("tenant b's requests changed a's chat: %d → %d messages, title %q", len(before), len(after), got.Title)
	}
}

func TestChatsPerTenantLimit(t *testing.T) {
	fake := newFake(t, echoScript)
	cfg := baseConfig(t, fake.URL())
	cfg.Limits.ChatsPerTenant = 2
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "a", "tok-b": "b"})
	ctx := context.Background()
	for range 2 {
		call(t, ctx, http.MethodPost, d.Server.URL+"/v1/chats", "tok-a", `{}`).want(t, 201, "")
	}
	call(t, ctx, http.MethodPost, d.Server.URL+"/v1/chats", "tok-a", `{}`).want(t, 429, "limit")
	// The limit is the tenant's own: another tenant still creates.
	call(t, ctx, http.MethodPost, d.Server.URL+"/v1/chats", "tok-b", `{}`).want(t, 201, "")
	if cs, _ := d.Hub.Chats(ctx, "a"); len(cs) != 2 {
		t.Fatalf("tenant a has %d chats, want 2", len(cs))
	}
}

// hangScript never answers a message containing "hang" and echoes others.
func hangScript(r testkit.Received) testkit.Reply {
	last := r.Messages[len(r.Messages)-1].Content
	if strings.Contains(last, "hang") {
		return testkit.Reply{Hang: true}
	}
	return echoScript(r)
}

// post sends a message without waiting for its turn; its answer arrives on
// the returned channel (never, while its turn hangs).
func post(t *testing.T, ctx context.Context, url, token, content string) <-chan answer {
	out := make(chan answer, 1)
	body, _ := json.Marshal(api.SendMessageRequest{Content: content})
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- answer{status: -1, body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		a := answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
		_ = json.Unmarshal(b, &a.err)
		out <- a
	}()
	return out
}

// watchStarted subscribes to chatID's events now, before the test sends
// anything, and returns a wait (for the test's own goroutine) until a turn
// of the chat has started. Subscribing inside the wait would miss a turn
// that started first.
func watchStarted(t *testing.T, h *hub.Hub, chatID string) (wait func()) {
	t.Helper()
	sub := h.Bus().Subscribe(chatID, 64)
	t.Cleanup(sub.Close)
	return func() {
		t.Helper()
		defer sub.Close()
		deadline := time.After(liveness)
		for {
			select {
			case ev, ok := <-sub.C:
				if !ok {
					t.Fatalf("the watch of chat %s was dropped before its turn started: %+v", chatID, sub.Dropped())
				}
				if ev.Type == chat.EventTurnStarted {
					return
				}
			case <-deadline:
				t.Fatalf("no turn.started in chat %s", chatID)
			}
		}
	}
}

func TestTurnsPerChatLimit(t *testing.T) {
	fake := newFake(t, hangScript)
	d := startDaemon(t, baseConfig(t, fake.URL()), nil, nil) // turns_per_chat: 4
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	url := d.URL + "/v1/chats/" + c.ID + "/messages"
	started := watchStarted(t, d.Hub, c.ID)
	running := post(t, ctx, url, "", "hang 0")
	started()
	// One turn runs. Of five more sent at once, three can wait and two
	// must be refused: the session decides one at a time.
	var answers []<-chan answer
	for i := 1; i <= 5; i++ {
		answers = append(answers, post(t, ctx, url, "", fmt.Sprintf("hang %d", i)))
	}
	refused, answered := 0, merge(answers...)
	deadline := time.After(liveness)
	for refused < 2 {
		select {
		case a := <-answered:
			a.want(t, 429, "busy")
			if s, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || s < 1 {
				t.Fatalf("429 busy with Retry-After %q", a.header.Get("Retry-After"))
			}
			refused++
		case <-deadline:
			t.Fatalf("%d of 5 sends were refused while 1 ran; want 2", refused)
		}
	}
	select {
	case a := <-running:
		t.Fatalf("the hung turn answered: %d %s", a.status, a.body)
	case a := <-answered:
		t.Fatalf("a third of the five answered while the queue was full: %d %s", a.status, a.body)
	default:
	}
	msgs, _ := d.Hub.Transcript(ctx, "default", c.ID, 0, 0)
	if len(msgs) != 1 {
		t.Fatalf("%d messages stored; only the running turn's should be: %s", len(msgs), contents(msgs))
	}
}

// merge returns a channel fed by every channel in cs.
func merge(cs ...<-chan answer) <-chan answer {
	out := make(chan answer, len(cs))
	for _, c := range cs {
		go func() {
			if a, ok := <-c; ok {
				out <- a
			}
		}()
	}
	return out
}

func contents(msgs []api.Message) string {
	var s []string
	for _, m := range msgs {
		s = append(s, fmt.Sprintf("%d:%s:%q", m.Seq, m.Role, m.Content))
	}
	return strings.Join(s, " ")
}

func TestTurnsPerTenantLimit(t *testing.T) {
	fake := newFake(t, hangScript)
	cfg := baseConfig(t, fake.URL())
	cfg.Limits.TurnsPerTenant = 2
	d := startDaemon(t, cfg, map[string]string{"tok-a": "a", "tok-b": "b"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &api.Client{BaseURL: d.URL, Token: "tok-a"}
	var ids []string
	for range 3 {
		c, err := a.CreateChat(ctx, api.CreateChatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	for _, id := range ids[:2] {
		started := watchStarted(t, d.Hub, id)
		post(t, ctx, d.URL+"/v1/chats/"+id+"/messages", "tok-a", "hang")
		started()
	}
	got := call(t, ctx, http.MethodPost, d.URL+"/v1/chats/"+ids[2]+"/messages", "tok-a", `{"content":"one more"}`)
	got.want(t, 429, "busy")
	if got.header.Get("Retry-After") == "" {
		t.Error("429 busy without Retry-After")
	}
	if msgs, _ := d.Hub.Transcript(ctx, "a", ids[2], 0, 0); len(msgs) != 0 {
		t.Fatalf("the refused message was stored: %s", contents(msgs))
	}
	// Another tenant's turns are not counted against a's.
	b := &api.Client{BaseURL: d.URL, Token: "tok-b"}
	cb, _ := b.CreateChat(ctx, api.CreateChatRequest{})
	if _, err := b.Send(ctx, cb.ID, api.SendMessageRequest{Content: "hello"}, nil); err != nil {
		t.Fatalf("tenant b blocked by a's turns: %v", err)
	}
}

func TestRequestsPerSecondLimit(t *testing.T) {
	fake := newFake(t, echoScript)
	cfg := baseConfig(t, fake.URL())
	cfg.Limits.RequestsPerSecond = 1 // burst 2
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "a", "tok-b": "b"})
	ctx := context.Background()
	// Ten requests need at least eight seconds at one a second: however slow
	// this machine, some are refused.
	var limited []answer
	for range 10 {
		if a := call(t, ctx, http.MethodGet, d.Server.URL+"/v1/chats", "tok-a", ""); a.status == 429 {
			limited = append(limited, a)
		} else if a.status != 200 {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
	}
	if len(limited) == 0 {
		t.Fatal("no request was refused at 1 request a second")
	}
	for _, a := range limited {
		a.want(t, 429, "rate_limited")
		if s, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("Retry-After %q: want whole seconds ≥ 1", a.header.Get("Retry-After"))
		}
	}
	// Each tenant has its own bucket.
	call(t, ctx, http.MethodGet, d.Server.URL+"/v1/chats", "tok-b", "").want(t, 200, "")
}

// TestIngestBytesPerSecondLimit: at one byte a second (a burst of eight
// seconds' worth), a tenant's bucket refills too slowly for this test to
// see. Past it, a message and an import are 429 rate_limited with a
// Retry-After, and nothing of them is stored; the other tenant's bucket is
// its own.
func TestIngestBytesPerSecondLimit(t *testing.T) {
	fake := newFake(t, echoScript)
	cfg := baseConfig(t, fake.URL())
	cfg.Limits.IngestBytesPerSecond = 1
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "a", "tok-b": "b"})
	ctx := context.Background()
	a := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	c, err := a.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	send := func(token, chatID, content string) answer {
		return call(t, ctx, http.MethodPost, d.Server.URL+"/v1/chats/"+chatID+"/messages", token, `{"content":"`+content+`"}`)
	}
	send("tok-a", c.ID, "12345678").want(t, 200, "")
	limited := []answer{send("tok-a", c.ID, "abcdefgh")}
	exp, err := a.Export(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(exp)
	limited = append(limited, call(t, ctx, http.MethodPost, d.Server.URL+"/v1/chats/import", "tok-a", string(body)))
	for _, ans := range limited {
		ans.want(t, 429, "rate_limited")
		if s, err := strconv.Atoi(ans.header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("Retry-After %q: want whole seconds ≥ 1", ans.header.Get("Retry-After"))
		}
	}
	if msgs, _ := d.Hub.Transcript(ctx, "a", c.ID, 0, 0); len(msgs) != 2 || msgs[0].Content != "12345678" {
		t.Fatalf("the transcript after a refused message: %s, want the first message and its answer", contents(msgs))
	}
	if cs, _ := d.Hub.Chats(ctx, "a"); len(cs) != 1 {
		t.Fatalf("tenant a has %d chats after a refused import, want 1", len(cs))
	}
	b := &api.Client{BaseURL: d.Server.URL, Token: "tok-b"}
	cb, _ := b.CreateChat(ctx, api.CreateChatRequest{})
	send("tok-b", cb.ID, "12345678").want(t, 200, "")
}

func TestSizeLimits(t *testing.T) {
	fake := newFake(t, echoScript)
	cfg := baseConfig(t, fake.URL())
	cfg.Limits.MaxMessageBytes = 1000
	cfg.Limits.MaxBodyBytes = 8000
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	url := d.Server.URL + "/v1/chats/" + c.ID + "/messages"
	cases := map[string]struct {
		body   string
		status int
		kind   string
	}{
		"message at the limit":    {`{"content":"` + strings.Repeat("a", 1000) + `"}`, 200, ""},
		"message over the limit":  {`{"content":"` + strings.Repeat("a", 1001) + `"}`, 413, "too_large"},
		"multibyte over by bytes": {`{"content":"` + strings.Repeat("é", 501) + `"}`, 413, "too_large"},
		"body over the limit":     {`{"content":"hi","paths":["` + strings.Repeat("p", 8000) + `"]}`, 413, "too_large"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before, _ := d.Hub.Store().LastSeq(ctx, c.ID)
			a := call(t, ctx, http.MethodPost, url, "", tc.body)
			a.want(t, tc.status, tc.kind)
			after, _ := d.Hub.Store().LastSeq(ctx, c.ID)
			if tc.status != 200 && after != before {
				t.Fatalf("a refused message was stored (seq %d → %d)", before, after)
			}
			if tc.status == 413 && !strings.Contains(a.err.Message, "limit") {
				t.Fatalf("413 does not name the limit: %q", a.err.Message)
			}
		})
	}
	// Other routes share the body limit.
	call(t, ctx, http.MethodPost, d.Server.URL+"/v1/chats", "", `{"title":"`+strings.Repeat("t", 9000)+`"}`).want(t, 413, "too_large")
	call(t, ctx, http.MethodPatch, d.Server.URL+"/v1/chats/"+c.ID, "", `{"title":"`+strings.Repeat("t", 9000)+`"}`).want(t, 413, "too_large")
}

// ownDaemon is a daemon started by startDaemon.
type ownDaemon struct {
	Hub     *hub.Hub
	Handler http.Handler
	URL     string
	Client  *api.Client
}

// startDaemon runs a daemon like daemontest.Start, with extra tools
// registered through hub.Options (which daemontest does not pass on), and
// stops it hub first: a message waiting in a chat's queue holds its
// handler (hub.Submit does not watch the request's context), so closing the
// HTTP server first would wait for the queue to drain.
func startDaemon(t testing.TB, cfg configs.Config, tokens map[string]string, register func(*tools.Registry) error) *ownDaemon {
	t.Helper()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	if _, fuzzing := t.(*testing.F); fuzzing {
		// A fuzz worker's daemon outlives each input's T; its goroutines
		// must not log into the testing framework.
		log = zerolog.Nop()
	}
	h, err := hub.New(context.Background(), cfg, log, hub.Options{Tools: register})
	if err != nil {
		t.Fatal(err)
	}
	handler := httpapi.New(h, cfg, tokens, log)
	srv := httptest.NewServer(handler)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close hub: %v", err)
		}
		srv.CloseClientConnections()
		srv.Close()
	})
	return &ownDaemon{Hub: h, Handler: handler, URL: srv.URL, Client: &api.Client{BaseURL: srv.URL}}
}

// toolScript calls the tool named by the person's message, then reports
// its result's length.
func toolScript(r testkit.Received) testkit.Reply {
	last := r.Messages[len(r.Messages)-1]
	if last.Role == chat.RoleTool {
		return testkit.Reply{Text: fmt.Sprintf("the tool said %d bytes", len(last.Content))}
	}
	return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "call_1", Name: strings.TrimPrefix(last.Content, "use "), Arguments: `{}`}}}
}

func TestHugeToolResultIsStoredWholeAndSentHeadAndTail(t *testing.T) {
	const limit = 4096
	huge := "HEAD-MARK " + strings.Repeat("filler line of a long tool result\n", 6000) + "MIDDLE-MARK " +
		strings.Repeat("more filler after the middle\n", 6000) + " TAIL-MARK"
	fake := newFake(t, toolScript)
	cfg := baseConfig(t, fake.URL())
	cfg.Limits.ToolResultBytes = limit
	d := startDaemon(t, cfg, nil, func(r *tools.Registry) error {
		return tools.Register(r, "huge", "Returns a very long text.", func(ctx context.Context, _ struct{}) (tools.Result, error) {
			return tools.Result{Text: huge}, nil
		})
	})
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "use huge"}, nil)
	if err != nil || res.Problem != nil {
		t.Fatalf("turn: %v %+v", err, res.Problem)
	}
	msgs, _ := d.Hub.Transcript(ctx, "default", c.ID, 0, 0)
	var stored *api.Message
	for i := range msgs {
		if msgs[i].Role == api.RoleTool {
			stored = &msgs[i]
		}
	}
	if stored == nil || stored.Content != huge {
		t.Fatalf("the tool result is not stored whole: %s", contents(msgs))
	}
	reqs := fake.Requests()
	sent := reqs[len(reqs)-1].Messages
	got := sent[len(sent)-1]
	if got.Role != chat.RoleTool {
		t.Fatalf("the last request does not end with the tool result: %+v", got)
	}
	pointer := fmt.Sprintf(`%s {"from_seq":%d,"to_seq":%d}`, tools.ConversationReadTool, stored.Seq, stored.Seq)
	switch {
	case len(got.Content) > limit:
		t.Fatalf("the model got %d bytes of the result; the limit is %d", len(got.Content), limit)
	case !strings.HasPrefix(got.Content, "HEAD-MARK") || !strings.HasSuffix(got.Content, "TAIL-MARK"):
		t.Fatalf("the model did not get head and tail: %.60q … %.60q", got.Content, got.Content[max(0, len(got.Content)-60):])
	case strings.Contains(got.Content, "MIDDLE-MARK"):
		t.Fatal("the model got the middle of the result")
	case !strings.Contains(got.Content, pointer):
		t.Fatalf("the cut result lacks the recovery pointer %q", pointer)
	}
}

func TestPanickingToolDoesNotTakeTheDaemonDown(t *testing.T) {
	fake := newFake(t, toolScript)
	d := startDaemon(t, baseConfig(t, fake.URL()), nil, func(r *tools.Registry) error {
		return tools.Register(r, "boom", "Always panics.", func(ctx context.Context, _ struct{}) (tools.Result, error) {
			var m map[string]int
			//lint:ignore SA5000 the nil-map write is the point: a real runtime panic
			m["x"] = 1 // a nil-map write: a real bug, not a deliberate panic value
			return tools.Result{}, nil
		})
	})
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	for i := range 3 {
		res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "use boom"}, nil)
		if err != nil || res.Problem != nil {
			t.Fatalf("turn %d: %v %+v", i, err, res.Problem)
		}
		var result *api.Message
		for j := range res.Messages {
			if res.Messages[j].Role == api.RoleTool {
				result = &res.Messages[j]
			}
		}
		if result == nil || !result.IsError || !strings.Contains(result.Content, "boom") {
			t.Fatalf("turn %d: the panic did not become an error result for the model: %+v", i, res.Messages)
		}
	}
	if msgs, _ := d.Hub.Transcript(ctx, "default", c.ID, 0, 0); len(msgs) != 12 {
		t.Fatalf("after three turns the chat has %d messages, want 12: %s", len(msgs), contents(msgs))
	}
}

// scriptFor answers each request with the next reply of replies, then with
// the last one.
func scriptFor(replies ...testkit.Reply) (testkit.Script, *atomic.Int64) {
	var n atomic.Int64
	return func(r testkit.Received) testkit.Reply {
		i := int(n.Add(1)) - 1
		return replies[min(i, len(replies)-1)]
	}, &n
}

func TestProviderFaultsEndAsProblems(t *testing.T) {
	const text = "the beginning of an answer that will be cut off before its end"
	cases := map[string]struct {
		reply       testkit.Reply
		kind        string
		partial     bool // the cut answer is kept, marked partial
		idleTimeout time.Duration
	}{
		// The idle timeout also bounds the next turn's call, which the fake
		// answers at once: well within it however loaded the machine.
		"hangs before answering": {reply: testkit.Reply{Hang: true}, kind: chat.ProblemTimeout, idleTimeout: 2 * time.Second},
		"resets mid-stream":      {reply: testkit.Reply{Text: text, ChunkRunes: 4, CutAfterChunks: 5}, kind: chat.ProblemProvider, partial: true},
		"streams garbage":        {reply: testkit.Reply{Garbage: true}, kind: chat.ProblemProvider},
		"error event mid-stream": {reply: testkit.Reply{StreamError: "the server had an error while processing your request"}, kind: chat.ProblemProvider},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// The fault answers "hello" (and its retries); "again" is echoed.
			fake := newFake(t, func(r testkit.Received) testkit.Reply {
				if r.Messages[len(r.Messages)-1].Content == "hello" {
					return tc.reply
				}
				return echoScript(r)
			})
			cfg := baseConfig(t, fake.URL())
			if tc.idleTimeout > 0 {
				cfg.Limits.ModelIdleTimeout.Duration = tc.idleTimeout
			}
			d := daemontest.Start(t, cfg, nil)
			ctx := context.Background()
			c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
			var problemEvent *chat.Problem
			res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "hello"}, func(ev api.Event) {
				if ev.Type == chat.EventTurnProblem {
					problemEvent = &chat.Problem{}
					_ = json.Unmarshal(ev.Data, problemEvent)
				}
			})
			if err != nil {
				t.Fatalf("the stream broke instead of ending the turn: %v", err)
			}
			if res.Problem == nil || res.Problem.Kind != tc.kind || res.Problem.Message == "" {
				t.Fatalf("turn.completed problem %+v; want kind %q with a message", res.Problem, tc.kind)
			}
			if problemEvent == nil || problemEvent.Kind != tc.kind {
				t.Fatalf("turn.problem event %+v; want kind %q", problemEvent, tc.kind)
			}
			msgs, _ := d.Hub.Transcript(ctx, "default", c.ID, 0, 0)
			last := msgs[len(msgs)-1]
			if tc.partial {
				if last.Role != api.RoleAssistant || !last.Partial || last.Problem == "" || last.Content == "" || !strings.HasPrefix(text, last.Content) {
					t.Fatalf("the cut answer is not kept marked partial: %+v", last)
				}
			} else if len(msgs) != 1 {
				t.Fatalf("a fault with nothing said stored more than the person's message: %s", contents(msgs))
			}
			// The chat goes on.
			next, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "again"}, nil)
			if err != nil || next.Problem != nil {
				t.Fatalf("the chat does not go on after the fault: %v %+v", err, next.Problem)
			}
		})
	}
}

// helloAnswered starts a daemon on the provider at base, says hello in a
// new chat, and fails the test unless the turn ends with an answer.
func helloAnswered(t *testing.T, base string) (*daemontest.Daemon, string, api.TurnResult) {
	t.Helper()
	d := daemontest.Start(t, baseConfig(t, base), nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "hello"}, nil)
	if err != nil || res.Problem != nil {
		t.Fatalf("the turn failed: %v %+v", err, res.Problem)
	}
	return d, c.ID, res
}

func TestRetriesOn5xxThenSucceeds(t *testing.T) {
	overloaded := testkit.Reply{Status: 503, Body: `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`}
	script, calls := scriptFor(overloaded, overloaded, testkit.Reply{Text: "finally"})
	fake := newFake(t, script)
	_, _, res := helloAnswered(t, fake.URL())
	if n := calls.Load(); n != 3 {
		t.Fatalf("the model was asked %d times; want 3 (two 503s, then the answer)", n)
	}
	if last := res.Messages[len(res.Messages)-1]; last.Content != "finally" || last.Partial {
		t.Fatalf("answer %+v", last)
	}
}

// TestRetriesOn429HonourRetryAfter uses a hand-written server: the fake
// always asks 429 callers to wait 7 s.
func TestRetriesOn429HonourRetryAfter(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	fake := newFake(t, echoScript)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		n := len(at)
		mu.Unlock()
		if n <= 2 && r.URL.Path == "/v1/chat/completions" {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
			return
		}
		proxyTo(w, r, fake.URL())
	}))
	t.Cleanup(srv.Close)
	helloAnswered(t, srv.URL+"/v1")
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 3 {
		t.Fatalf("%d requests; want 3", len(at))
	}
	// A lower bound, not a speed claim: the daemon must have waited as told.
	for i := 1; i < 3; i++ {
		if gap := at[i].Sub(at[i-1]); gap < 900*time.Millisecond {
			t.Fatalf("retry %d came %s after a 429 with Retry-After: 1", i, gap)
		}
	}
}

// proxyTo forwards a request to the fake at base (which ends in /v1).
func proxyTo(w http.ResponseWriter, r *http.Request, base string) {
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, strings.TrimSuffix(base, "/v1")+r.URL.Path, r.Body)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	f, _ := w.(http.Flusher)
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// TestProviderStopsMidStream: a server that sends part of an answer and
// then goes silent (hand-written: the fake cannot stall mid-stream) must
// end as a timeout with the part kept, marked partial.
func TestProviderStopsMidStream(t *testing.T) {
	cases := map[string]struct {
		silent bool // goes silent; otherwise closes without [DONE]
		kind   string
	}{
		"goes silent":         {true, chat.ProblemTimeout},
		"ends without [DONE]": {false, chat.ProblemProvider},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				f := w.(http.Flusher)
				for _, piece := range []string{"", "half ", "an ", "answer"} {
					b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
						"choices": []map[string]any{{"index": 0, "delta": map[string]any{"role": "assistant", "content": piece}, "finish_reason": nil}}})
					fmt.Fprintf(w, "data: %s\n\n", b)
					f.Flush()
				}
				if tc.silent {
					<-r.Context().Done()
				}
			}))
			t.Cleanup(srv.Close)
			cfg := baseConfig(t, srv.URL+"/v1")
			// Long beside the server's at-once chunks, however loaded the
			// machine: only the silence is cut.
			cfg.Limits.ModelIdleTimeout.Duration = 2 * time.Second
			d := daemontest.Start(t, cfg, nil)
			ctx := context.Background()
			c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
			res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "hello"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Problem == nil || res.Problem.Kind != tc.kind {
				t.Fatalf("problem %+v; want kind %q", res.Problem, tc.kind)
			}
			msgs, _ := d.Hub.Transcript(ctx, "default", c.ID, 0, 0)
			last := msgs[len(msgs)-1]
			if last.Role != api.RoleAssistant || !last.Partial || last.Content != "half an answer" {
				t.Fatalf("the part said is not kept marked partial: %s", contents(msgs))
			}
			// Text was streamed to the person, so the turn is not retried
			// (a retry would say it twice).
			if n := calls.Load(); n != 1 {
				t.Fatalf("the model was called %d times after streaming text", n)
			}
		})
	}
}

func TestRetriesAfterAResetBeforeAnyWord(t *testing.T) {
	// The connection drops after the role chunk, before any text: nothing
	// was said, so another try is safe.
	script, calls := scriptFor(testkit.Reply{Text: "never seen", CutAfterChunks: 1}, testkit.Reply{Text: "second try"})
	fake := newFake(t, script)
	d, chatID, _ := helloAnswered(t, fake.URL())
	ctx := context.Background()
	if n := calls.Load(); n != 2 {
		t.Fatalf("the model was asked %d times; want 2", n)
	}
	msgs, _ := d.Hub.Transcript(ctx, "default", chatID, 0, 0)
	if len(msgs) != 2 || msgs[1].Content != "second try" || msgs[1].Partial {
		t.Fatalf("transcript %s", contents(msgs))
	}
}
