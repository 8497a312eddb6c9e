package oai_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/httpapi/oai"
)

// TestAnEndedPauseLeavesNoIndexEntry: an entry of the Chat Completions
// pause index goes once its pause has ended for certain (results_wait
// after it began, and a tenth more): a turn left to time out, a chat
// deleted while paused, a pause left when agentd stopped. The next pause
// sweeps them, and so does a start. They stayed in the store for good, an
// entry per paused answer of a tenant whose results did not come back
// through Chat Completions.
func TestAnEndedPauseLeavesNoIndexEntry(t *testing.T) {
	// A pause's entry lives wait and a tenth: long enough that each is
	// looked at while it must be there, on a loaded machine too.
	const wait = time.Second
	d, _, _ := startChat(t, 32000, func(c *configs.Config) { c.Toolsets.ResultsWait = configs.Duration{Duration: wait} })
	ctx := context.Background()
	indexed := func(call string) bool {
		t.Helper()
		var v any
		err := d.Hub.TenantRecord(ctx, "a", oai.KindPause, call, &v)
		if err != nil && !errors.Is(err, hub.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	said := map[string]any{"role": "assistant", "content": "hello"}
	weather := userMsg("What is the weather?")
	timedOut, _ := pauseOn(t, d, "tok-a", []any{weather})
	if !indexed(timedOut) {
		t.Fatalf("the pause on %q is not indexed", timedOut)
	}
	deleted, chatID := pauseOn(t, d, "tok-a", []any{userMsg("hi"), said, weather})
	if timedOut == deleted || !indexed(deleted) {
		t.Fatalf("the pauses on %q and %q are not indexed apart", timedOut, deleted)
	}
	if err := (&api.Client{BaseURL: d.Server.URL, Token: "tok-a"}).DeleteChat(ctx, chatID); err != nil {
		t.Fatal(err)
	}

	time.Sleep(2 * wait) // both pauses have ended for certain
	third, _ := pauseOn(t, d, "tok-a", []any{userMsg("hi"), said, userMsg("and?"), said, weather})
	if !indexed(third) {
		t.Fatalf("the pause on %q is not indexed", third)
	}
	if indexed(timedOut) || indexed(deleted) {
		t.Errorf("the next pause left the entries of a timed-out pause (%v) and a deleted chat's (%v)", indexed(timedOut), indexed(deleted))
	}

	time.Sleep(2 * wait)
	d = d.Restart()
	if indexed(third) {
		t.Error("a start left the entry of a pause that ended while agentd was down")
	}
}
