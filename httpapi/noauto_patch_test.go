package httpapi_test

import (
	"context"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestAPatchChangesHowAChatLearns: no_auto_remember, settable only when a
// chat was created, is changed by PATCH /v1/chats/{id}, both ways, and a
// PATCH without it leaves it as it is.
func TestAPatchChangesHowAChatLearns(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	ctx := context.Background()
	c := newChat(t, d, "")
	learns := func(step string, want bool) {
		t.Helper()
		exp, err := d.Client.Export(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if exp.NoAutoRemember != want {
			t.Fatalf("%s: the chat's no_auto_remember is %v, want %v", step, exp.NoAutoRemember, want)
		}
	}
	on, off, title := true, false, "renamed"
	for _, step := range []struct {
		name string
		req  api.PatchChatRequest
		want bool
	}{
		{"set", api.PatchChatRequest{NoAutoRemember: &on}, true},
		{"a rename", api.PatchChatRequest{Title: &title}, true},
		{"unset", api.PatchChatRequest{NoAutoRemember: &off}, false},
	} {
		if _, err := d.Client.PatchChat(ctx, c.ID, step.req); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		learns(step.name, step.want)
	}
}
