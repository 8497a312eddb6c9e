package httpapi_test

// Issue 21, point 3: a chat keeps what it showed. Its activity (problems
// with their next step, compactions, ...) and its last requests are stored
// with it and come back after a restart.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit/daemontest"
)

// activityOf reads every page of a chat's activity with token, pages of size.
func activityOf(t *testing.T, d *daemontest.Daemon, token, chatID string, size int) []api.ActivityItem {
	t.Helper()
	var all []api.ActivityItem
	for after := int64(0); ; {
		var page api.ActivityPage
		path := fmt.Sprintf("/v1/chats/%s/activity?limit=%d&after=%d", chatID, size, after)
		if st := askJSON(t, d, token, "GET", path, nil, &page); st != 200 {
			t.Fatalf("GET %s: status %d", path, st)
		}
		all = append(all, page.Activity...)
		if page.Next == 0 {
			return all
		}
		after = page.Next
	}
}

func TestActivityKeepsATooLongProblemAndACompactionAcrossARestart(t *testing.T) {
	const bigWindow = 131072
	p := &provider{kind: "openai", real: 8000}
	fake := startFake(t, "openai", fakeOptions{Script: p.script, Models: []fakeModel{{ID: "m", Window: 32000}, {ID: "big", Window: bigWindow, Loaded: true}}})
	tokens := map[string]string{"tok-a": "a", "tok-b": "b"}
	d := daemontest.Start(t, kindConfig(t, "openai", fake.URL(), 32000, configs.Model{ID: "big", Window: bigWindow}), tokens)
	d.Client.Token = "tok-a"
	ctx := context.Background()
	d.Hub.Refresh(ctx) // as `agentd serve` does
	c := newChat(t, d, "")
	send(t, d, c.ID, noteText("first", 300))
	send(t, d, c.ID, noteText("second", 300))
	if st := askJSON(t, d, "tok-a", "POST", "/v1/chats/"+c.ID+"/compact", api.CompactRequest{}, nil); st != 200 {
		t.Fatalf("compact: status %d", st)
	}
	p.closed.Store(true)
	p.always.Store(true)
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "Once more, please."}, nil)
	if err != nil || res.Problem == nil || res.Problem.Kind != chat.ProblemTooLong {
		t.Fatalf("want a too-long problem: %v %+v", err, res.Problem)
	}
	before := chatContext(t, d, c.ID).RecentRequests
	if len(before) < 3 {
		t.Fatalf("%d recent requests before the restart, want the turns' (at least 3)", len(before))
	}

	d = d.Restart()
	d.Client.Token = "tok-a"
	items := activityOf(t, d, "tok-a", c.ID, 1) // a page an item: the paging is walked too
	var compacted, problem *api.ActivityItem
	for i := range items {
		if items[i].ID != int64(i+1) {
			t.Fatalf("item %d has id %d", i, items[i].ID)
		}
		switch items[i].Type {
		case chat.EventCompacted:
			if compacted == nil { // the /compact; the heal's fold follows
				compacted = &items[i]
			}
		case chat.EventTurnProblem:
			problem = &items[i]
		}
	}
	if compacted == nil || problem == nil {
		t.Fatalf("activity after the restart lacks the compaction or the problem: %+v", items)
	}
	var pr api.Problem
	if err := json.Unmarshal(problem.Data, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.Kind != chat.ProblemTooLong || pr.NextStep == nil || *pr.NextStep != (api.NextStep{Action: "switch-model", Model: "fake/big", Window: bigWindow}) {
		t.Fatalf("stored problem %s: want too-long with its switch-model step", problem.Data)
	}
	if problem.TurnID != res.TurnID || problem.AfterSeq != 5 || compacted.AfterSeq != 4 {
		t.Errorf("problem of turn %s after seq %d, compaction after seq %d; want turn %s after 5 (the person's message), compaction after 4",
			problem.TurnID, problem.AfterSeq, compacted.AfterSeq, res.TurnID)
	}
	var cv api.Compacted
	if err := json.Unmarshal(compacted.Data, &cv); err != nil || cv.FirstKeptSeq != 3 {
		t.Errorf("stored compaction %s: want first_kept_seq 3", compacted.Data)
	}
	after := chatContext(t, d, c.ID).RecentRequests
	if !slices.Equal(after, before) {
		t.Errorf("recent requests after the restart: %+v, before: %+v", after, before)
	}

	// Another tenant, an unknown chat, a bad page: refused, nothing shown.
	cases := map[string]struct {
		token, path string
		status      int
	}{
		"another tenant's chat": {"tok-b", "/v1/chats/" + c.ID + "/activity", 404},
		"an unknown chat":       {"tok-a", "/v1/chats/nope/activity", 404},
		"a bad limit":           {"tok-a", "/v1/chats/" + c.ID + "/activity?limit=0", 400},
		"a limit too big":       {"tok-a", "/v1/chats/" + c.ID + "/activity?limit=100000", 400},
		"a bad after":           {"tok-a", "/v1/chats/" + c.ID + "/activity?after=-1", 400},
		"no token":              {"", "/v1/chats/" + c.ID + "/activity", 401},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var e api.Error
			if st := askJSON(t, d, tc.token, "GET", tc.path, nil, &e); st != tc.status || e.Message == "" {
				t.Fatalf("status %d (%q), want %d with a clear error", st, e.Message, tc.status)
			}
		})
	}
}
