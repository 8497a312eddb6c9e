package tools

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// verifyStandardWebhook checks a request the way a Standard Webhooks
// receiver does: HMAC-SHA256 over "id.timestamp.body" with the secret's key.
func verifyStandardWebhook(r *http.Request, body []byte, key []byte) bool {
	id, ts, sig := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature")
	want := SignWebhook(key, id, ts, body)
	for _, s := range strings.Fields(sig) {
		if v, ok := strings.CutPrefix(s, "v1,"); ok && hmac.Equal([]byte(v), []byte(want)) {
			return id != "" && ts != ""
		}
	}
	return false
}

func TestAWebhookCallIsSignedAndItsBodyIsTheResult(t *testing.T) {
	key := []byte("sixteen byte key")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	var got WebhookCall
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !verifyStandardWebhook(r, body, key) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		_ = json.Unmarshal(body, &got)
		_, _ = io.WriteString(w, `{"found": 3}`)
	}))
	defer srv.Close()
	run := WebhookRunner("crm_find", Webhook{URL: srv.URL, Secret: secret, AllowPrivate: true})
	ctx := WithCallInfo(context.Background(), CallInfo{Tenant: "t1", ChatID: "c1", CallID: "call_7"})
	res, err := run(ctx, json.RawMessage(`{"q":"ada"}`))
	if err != nil || res.IsError || res.Text != `{"found": 3}` {
		t.Fatalf("result = %+v, %v", res, err)
	}
	if got.CallID != "call_7" || got.Tool != "crm_find" || string(got.Arguments) != `{"q":"ada"}` || got.ChatID != "c1" || got.Tenant != "t1" {
		t.Fatalf("the webhook got %+v", got)
	}
	wrong := WebhookRunner("crm_find", Webhook{URL: srv.URL, Secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("another key")), AllowPrivate: true})
	if res, _ := wrong(ctx, json.RawMessage(`{}`)); !res.IsError || !strings.Contains(res.Text, "401") {
		t.Fatalf("a wrong signature must be refused by the receiver: %+v", res)
	}
}

func TestWebhookFailuresAreResultsTheModelCanRead(t *testing.T) {
	quit := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/500":
			http.Error(w, "database is down", http.StatusInternalServerError)
		case "/hang":
			select {
			case <-r.Context().Done():
			case <-quit:
			}
		case "/redirect":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}
	}))
	defer srv.Close()
	defer close(quit)
	cases := map[string]struct {
		hook Webhook
		want string
	}{
		"a 500":             {Webhook{URL: srv.URL + "/500", AllowPrivate: true}, "500 Internal Server Error: database is down"},
		"a timeout":         {Webhook{URL: srv.URL + "/hang", AllowPrivate: true, Timeout: 50 * time.Millisecond}, "did not answer within 50ms"},
		"a redirect":        {Webhook{URL: srv.URL + "/redirect", AllowPrivate: true}, "302"},
		"a private address": {Webhook{URL: srv.URL + "/500"}, "private or local network address"},
		"nobody listens":    {Webhook{URL: "http://127.0.0.1:1/x", AllowPrivate: true}, "could not be reached"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := WebhookRunner("crm_find", c.hook)(context.Background(), json.RawMessage(`{}`))
			if err != nil || !res.IsError || !strings.Contains(res.Text, c.want) {
				t.Fatalf("result = %+v, %v; want an error result saying %q", res, err, c.want)
			}
		})
	}
	// The call's own deadline (limits.tool_timeout) before the webhook's
	// timeout: the model is told the one that ended the wait.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	res, err := WebhookRunner("crm_find", Webhook{URL: srv.URL + "/hang", AllowPrivate: true, Timeout: 10 * time.Minute})(ctx, json.RawMessage(`{}`))
	if err != nil || !res.IsError || !strings.Contains(res.Text, "within 1s ") {
		t.Fatalf("a call's deadline before the webhook's timeout: %+v, %v; want it named, 1s", res, err)
	}
}

func TestCheckWebhookURL(t *testing.T) {
	cases := map[string]struct {
		url          string
		allowPrivate bool
		ok           bool
	}{
		"https":                     {"https://hooks.example.com/agentd", false, true},
		"ftp":                       {"ftp://hooks.example.com/", false, false},
		"no host":                   {"https:///x", false, false},
		"loopback":                  {"http://127.0.0.1:9000/", false, false},
		"localhost":                 {"http://localhost:9000/", false, false},
		"private":                   {"http://10.1.2.3/", false, false},
		"private, allowed":          {"http://10.1.2.3/", true, true},
		"a name is checked on dial": {"https://internal.example/", false, true},
		"not a URL":                 {"::", false, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if err := CheckWebhookURL(c.url, c.allowPrivate); (err == nil) != c.ok {
				t.Fatalf("CheckWebhookURL(%q) = %v, want ok %v", c.url, err, c.ok)
			}
		})
	}
}

// A call's webhook-id is the same for every delivery of that call and
// another call's is another: the model's call id alone repeats (Ollama's
// across chats, and tenants, making the same call at the same point), and
// a receiver that drops repeated ids would drop the second chat's refund.
func TestAWebhookIDNamesOneCall(t *testing.T) {
	var ids []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids = append(ids, r.Header.Get("webhook-id"))
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	run := WebhookRunner("refund", Webhook{URL: srv.URL, Secret: "s", AllowPrivate: true})
	for _, ci := range []CallInfo{
		{Tenant: "t1", ChatID: "chat_a", Seq: 3, CallID: "call_15ee8503"},
		{Tenant: "t1", ChatID: "chat_a", Seq: 3, CallID: "call_15ee8503"}, // the same call again
		{Tenant: "t1", ChatID: "chat_b", Seq: 3, CallID: "call_15ee8503"},
		{Tenant: "t2", ChatID: "chat_a", Seq: 3, CallID: "call_15ee8503"},
		{Tenant: "t1", ChatID: "chat_a", Seq: 9, CallID: "call_15ee8503"}, // after a fold, the same count again
		{},
		{},
	} {
		if res, err := run(WithCallInfo(context.Background(), ci), json.RawMessage(`{"order":"42"}`)); err != nil || res.IsError {
			t.Fatalf("%+v: %+v %v", ci, res, err)
		}
	}
	if ids[0] != ids[1] {
		t.Fatalf("one call delivered twice has two ids: %q", ids[:2])
	}
	seen := map[string]bool{}
	for _, id := range ids[1:] { // the first is the second
		if seen[id] || !strings.HasPrefix(id, "msg_") {
			t.Fatalf("webhook-ids %q: want one per call, each msg_…", ids)
		}
		seen[id] = true
	}
}
