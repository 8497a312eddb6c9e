package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// The fuzz targets post random bodies to the real handler of an in-process
// daemon (hub, actors, Badger, the OpenAI-style fake behind it). What must
// hold for every input: no panic, no 5xx, and stored state changes only when
// the request was accepted. Seed corpora: testdata/fuzz/<FuzzName>/.

// fuzzDaemon starts a daemon whose limits never get in a fuzzer's way, so
// that every answer is about the body and not about the request rate.
func fuzzDaemon(f testing.TB) *ownDaemon {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: calculatorScript})
	f.Cleanup(fake.Close)
	cfg := daemontest.Config(f.TempDir(), fake.URL(), 32000)
	cfg.Limits.RequestsPerSecond = 1e9
	cfg.Limits.MaxBodyBytes = 64 << 10
	cfg.Limits.MaxMessageBytes = 16 << 10
	cfg.Limits.ChatsPerTenant = 2000
	return startDaemon(f, cfg, nil, nil)
}

// serveTimeout bounds one request: a turn through the fake takes
// milliseconds, so a request still open after this has hung.
const serveTimeout = 5 * time.Second

// serve runs one request through the handler in-process, so a panic in a
// handler is the fuzzer's finding rather than a dropped connection. A
// request that hangs fails with every goroutine's stack, rather than
// stalling the fuzzer's worker (which then dies without a word).
func serve(t testing.TB, d *ownDaemon, method, path string, body []byte, sse bool) *httptest.ResponseRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, method, path, bytes.NewReader(body))
	req.Host = "127.0.0.1" // the no-token daemon serves loopback names only
	req.Header.Set("Content-Type", "application/json")
	if sse {
		req.Header.Set("Accept", "text/event-stream")
	}
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Handler.ServeHTTP(rec, req)
	}()
	select {
	case <-done:
		return rec
	case <-time.After(serveTimeout):
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		cancel()
		<-done
		t.Fatalf("%s %s with body %q (sse %v) was still open after %s; it answered %d after the cancel.\n%s", method, path, body, sse, serveTimeout, rec.Code, buf[:n])
		return nil
	}
}

// checkAnswer fails on a 5xx and on an error answer that is not the one
// JSON error shape with a kind.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder, body []byte) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("status %d for body %q: %s", rec.Code, body, rec.Body.String())
	}
	if rec.Code >= 400 {
		var e api.Error
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Kind == "" || e.Message == "" {
			t.Fatalf("status %d answer is not the error shape (%v): %s", rec.Code, err, rec.Body.String())
		}
	}
}

func FuzzSendMessageDecode(f *testing.F) {
	d := fuzzDaemon(f)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		`{"content":"hello"}`,
		`{"content":"please calculate 6*7"}`,
		`{"content":"hi","origin":"app"}`,
		`{"content":"hi","origin":"robot"}`,
		`{"content":"   "}`,
		`{"content":"\u0000\ud800"}`,
		`{"content":"x","attachment_ids":["nope"],"paths":["/etc/passwd"]}`,
		`{"content":1}`,
		`{"content":"a"}{"content":"b"}`,
		`[]`, `null`, ``, `{`,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	path := "/v1/chats/" + c.ID + "/messages"
	f.Fuzz(func(t *testing.T, body []byte, sse bool) {
		before, err := d.Hub.Store().LastSeq(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		rec := serve(t, d, http.MethodPost, path, body, sse)
		checkAnswer(t, rec, body)
		after, err := d.Hub.Store().LastSeq(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Code >= 300 {
			if after != before {
				t.Fatalf("refused body %q (status %d) changed the transcript: last seq %d → %d", body, rec.Code, before, after)
			}
			return
		}
		// Accepted: the person's message is the first one the turn stored,
		// exactly as sent.
		var req api.SendMessageRequest
		if err := firstValue(body, &req); err != nil {
			t.Fatalf("accepted a body that is not a SendMessageRequest (%v): %q", err, body)
		}
		msgs, err := d.Hub.Transcript(ctx, daemontestTenant, c.ID, before+1, before+1)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("accepted body %q: read seq %d: %v (%d messages)", body, before+1, err, len(msgs))
		}
		if msgs[0].Content != req.Content || msgs[0].Origin != req.Origin || msgs[0].Role != "user" {
			t.Fatalf("accepted body %q stored %+v", body, msgs[0])
		}
	})
}

// firstValue decodes the first JSON value of body, as the server does.
// Trailing bytes are the business of TestDecodeRefusesTrailingBytes.
func firstValue(body []byte, v any) error {
	return json.NewDecoder(bytes.NewReader(body)).Decode(v)
}

// TestDecodeRefusesTrailingBytes: a body must be one JSON value. A check
// with dec.More missed a trailing '}' or ']' — found by FuzzPatchChatDecode
// (testdata/fuzz/FuzzPatchChatDecode/d21c52d1329a1e1c).
func TestDecodeRefusesTrailingBytes(t *testing.T) {
	d := fuzzDaemon(t)
	c, err := d.Client.CreateChat(context.Background(), api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct{ method, path, body string }{
		"patch null then brace":      {http.MethodPatch, "/v1/chats/" + c.ID, `null}`},
		"patch object then bracket":  {http.MethodPatch, "/v1/chats/" + c.ID, `{"title":"x"}]`},
		"create object then brace":   {http.MethodPost, "/v1/chats", `{"title":"x"}}`},
		"message object then brace":  {http.MethodPost, "/v1/chats/" + c.ID + "/messages", `{"content":"x"}}`},
		"message object then object": {http.MethodPost, "/v1/chats/" + c.ID + "/messages", `{"content":"x"}{}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := serve(t, d, tc.method, tc.path, []byte(tc.body), false)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d for %q; want 400: a body is one JSON value", rec.Code, tc.body)
			}
		})
	}
}

// daemontestTenant owns every chat of a daemon started without tokens.
const daemontestTenant = "default"

func FuzzCreateChatDecode(f *testing.F) {
	d := fuzzDaemon(f)
	ctx := context.Background()
	for _, seed := range []string{
		`{}`, `{"model":"fake/m","title":"t"}`, `{"model":"nobody/none"}`, `{"model":"fake"}`,
		`{"title":"x","no_auto_remember":true,"shared":true}`, `{"shared":"yes"}`, `{"titel":"typo"}`,
		`[]`, `null`, ``, `{"title":"\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before, err := d.Hub.Chats(ctx, daemontestTenant)
		if err != nil {
			t.Fatal(err)
		}
		rec := serve(t, d, http.MethodPost, "/v1/chats", body, false)
		checkAnswer(t, rec, body)
		after, err := d.Hub.Chats(ctx, daemontestTenant)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Code >= 300 {
			if len(after) != len(before) {
				t.Fatalf("refused body %q (status %d) changed the chat count %d → %d", body, rec.Code, len(before), len(after))
			}
			return
		}
		var got api.Chat
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.ID == "" {
			t.Fatalf("201 without a chat (%v): %s", err, rec.Body.String())
		}
		if len(after) != len(before)+1 {
			t.Fatalf("accepted body %q: chat count %d → %d", body, len(before), len(after))
		}
		if !strings.HasPrefix(got.Model, "fake/") {
			t.Fatalf("accepted body %q made a chat on model %q, of no configured provider", body, got.Model)
		}
	})
}

func FuzzPatchChatDecode(f *testing.F) {
	d := fuzzDaemon(f)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{Title: "start"})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		`{"title":"renamed"}`, `{"model":"fake/m"}`, `{"model":"nobody/none"}`, `{"model":""}`,
		`{"title":null,"model":null}`, `{"title":5}`, `{}`, ``, `null`, `{"title":"a"} x`,
	} {
		f.Add([]byte(seed))
	}
	path := "/v1/chats/" + c.ID
	f.Fuzz(func(t *testing.T, body []byte) {
		before, err := d.Hub.Chat(ctx, daemontestTenant, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		rec := serve(t, d, http.MethodPatch, path, body, false)
		checkAnswer(t, rec, body)
		after, err := d.Hub.Chat(ctx, daemontestTenant, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Code >= 300 {
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("refused body %q (status %d) changed the chat: %+v → %+v", body, rec.Code, before, after)
			}
			return
		}
		var req api.PatchChatRequest
		if err := firstValue(body, &req); err != nil {
			t.Fatalf("accepted a body that is not a PatchChatRequest (%v): %q", err, body)
		}
		if req.Title != nil && after.Title != *req.Title {
			t.Fatalf("patched title %q but the chat says %q", *req.Title, after.Title)
		}
		if req.Model != nil && after.Model != *req.Model {
			t.Fatalf("patched model %q but the chat says %q", *req.Model, after.Model)
		}
		// Any model id of a configured provider is accepted (the catalog
		// serves unlisted ids); one of no provider must not be.
		if !strings.HasPrefix(after.Model, "fake/") {
			t.Fatalf("accepted body %q moved the chat to model %q, of no configured provider", body, after.Model)
		}
	})
}
