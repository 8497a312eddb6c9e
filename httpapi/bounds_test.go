package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit/daemontest"
)

// Issue 15, deliver 5: titles are bounded, the chat list pages, and bytes
// that are not UTF-8 are refused rather than replaced.

func listPage(t *testing.T, url, token string) api.ChatList {
	t.Helper()
	a := call(t, context.Background(), http.MethodGet, url, token, "")
	a.want(t, 200, "")
	var page api.ChatList
	if err := json.Unmarshal([]byte(a.body), &page); err != nil {
		t.Fatal(err)
	}
	return page
}

func TestChatListPages(t *testing.T) {
	fake := newFake(t, echoScript)
	d := daemontest.Start(t, baseConfig(t, fake.URL()), map[string]string{"tok-a": "a", "tok-b": "b"})
	ctx := context.Background()
	a := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	made := map[string]bool{}
	for i := range 103 {
		c, err := a.CreateChat(ctx, api.CreateChatRequest{Title: fmt.Sprint("chat ", i)})
		if err != nil {
			t.Fatal(err)
		}
		made[c.ID] = true
	}
	bChat, _ := (&api.Client{BaseURL: d.Server.URL, Token: "tok-b"}).CreateChat(ctx, api.CreateChatRequest{})

	if first := listPage(t, d.Server.URL+"/v1/chats", "tok-a"); len(first.Chats) != 100 || first.Next == "" {
		t.Fatalf("the default page holds %d chats, next %q; want 100 and a cursor", len(first.Chats), first.Next)
	}
	seen := map[string]bool{}
	pages := 0
	for after := ""; ; pages++ {
		page := listPage(t, d.Server.URL+"/v1/chats?limit=25&after="+after, "tok-a")
		if len(page.Chats) > 25 {
			t.Fatalf("a page of limit 25 holds %d chats", len(page.Chats))
		}
		for _, c := range page.Chats {
			if seen[c.ID] || !made[c.ID] {
				t.Fatalf("chat %s listed twice or not the tenant's", c.ID)
			}
			seen[c.ID] = true
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if len(seen) != len(made) || pages != 4 {
		t.Fatalf("the pages listed %d of %d chats in %d pages", len(seen), len(made), pages+1)
	}
	// A cursor from another tenant's list pages only one's own chats.
	for after := range made {
		for _, c := range listPage(t, d.Server.URL+"/v1/chats?after="+after, "tok-b").Chats {
			if c.ID != bChat.ID {
				t.Fatalf("tenant b listed %s", c.ID)
			}
		}
		break
	}
	for _, bad := range []string{"0", "-1", "1001", "ten", "1e3"} {
		a := call(t, ctx, http.MethodGet, d.Server.URL+"/v1/chats?limit="+bad, "tok-a", "")
		a.want(t, 400, "bad_request")
		if !strings.Contains(a.err.Message, "1000") {
			t.Fatalf("limit=%s: the error does not say the range: %q", bad, a.err.Message)
		}
	}
	// A cursor that is no chat id would answer an empty page, as if the
	// list had ended: it is refused.
	for _, bad := range []string{"zzzz", "%FF", strings.Repeat("a", 300), "..%2Fx", strings.ToUpper(bChat.ID)} {
		call(t, ctx, http.MethodGet, d.Server.URL+"/v1/chats?after="+bad, "tok-a", "").want(t, 400, "bad_request")
	}
}

func TestTitlesAreBounded(t *testing.T) {
	fake := newFake(t, echoScript)
	d := daemontest.Start(t, baseConfig(t, fake.URL()), nil)
	ctx := context.Background()
	most := d.Cfg.Limits.MaxTitleRunes
	atLimit := strings.Repeat("é", most) // more bytes than runes: the limit counts characters
	call(t, ctx, http.MethodPost, d.Server.URL+"/v1/chats", "", `{"title":"`+atLimit+`"}`).want(t, 201, "")
	over := call(t, ctx, http.MethodPost, d.Server.URL+"/v1/chats", "", `{"title":"`+atLimit+`x"}`)
	over.want(t, 400, "bad_request")
	if !strings.Contains(over.err.Message, fmt.Sprint(most)) {
		t.Fatalf("the refusal does not name the limit: %q", over.err.Message)
	}
	chats, _ := d.Hub.Chats(ctx, "default")
	if len(chats) != 1 {
		t.Fatalf("%d chats stored; the refused one must not be", len(chats))
	}
	call(t, ctx, http.MethodPatch, d.Server.URL+"/v1/chats/"+chats[0].ID, "", `{"title":"`+atLimit+`x"}`).want(t, 400, "bad_request")
	if c, _ := d.Hub.Chat(ctx, "default", chats[0].ID); c.Title != atLimit {
		t.Fatal("a refused rename changed the title")
	}
}

func TestInvalidUTF8IsRefused(t *testing.T) {
	fake := newFake(t, echoScript)
	d := daemontest.Start(t, baseConfig(t, fake.URL()), nil)
	ctx := context.Background()
	c, _ := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	cases := map[string]struct{ method, path, body string }{
		"title":   {http.MethodPost, "/v1/chats", "{\"title\":\"caf\xe9\"}"},
		"rename":  {http.MethodPatch, "/v1/chats/" + c.ID, "{\"title\":\"\xff\xfe\"}"},
		"message": {http.MethodPost, "/v1/chats/" + c.ID + "/messages", "{\"content\":\"hello \xc3\x28 world\"}"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := call(t, ctx, tc.method, d.Server.URL+tc.path, "", tc.body)
			a.want(t, 400, "bad_request")
			if !strings.Contains(a.err.Message, "UTF-8") {
				t.Fatalf("the refusal does not say why: %q", a.err.Message)
			}
		})
	}
	chats, _ := d.Hub.Chats(ctx, "default")
	msgs, _ := d.Hub.Transcript(ctx, "default", c.ID, 0, 0)
	if len(chats) != 1 || chats[0].Title != "" || len(msgs) != 0 {
		t.Fatalf("refused bodies changed the store: %d chats, title %q, %d messages", len(chats), chats[0].Title, len(msgs))
	}
}
