package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/memory"
)

type apiMemory struct {
	ID     string `json:"id"`
	Text   string `json:"text"`
	ChatID string `json:"chat_id"`
	State  string `json:"state"`
	RunID  string `json:"run_id"`
}

type apiRun struct {
	ID     string   `json:"id"`
	Added  []string `json:"added"`
	Undone bool     `json:"undone"`
}

// memories reads GET /v1/memories where the browser does (the daemon, or
// the test's stand-in while the route is not mounted).
func (r *rig) memories(ctx context.Context, state string) []apiMemory {
	r.t.Helper()
	var out struct {
		Memories []apiMemory `json:"memories"`
	}
	if err := getJSON(ctx, r.url+"/v1/memories?state="+state, &out); err != nil {
		r.t.Fatal(err)
	}
	return out.Memories
}

func (r *rig) runs(ctx context.Context) []apiRun {
	r.t.Helper()
	var out struct {
		Runs []apiRun `json:"runs"`
	}
	if err := getJSON(ctx, r.url+"/v1/memory-runs", &out); err != nil {
		r.t.Fatal(err)
	}
	return out.Runs
}

// learnWaiting makes a waiting memory the way the daemon does: a chat with
// remembering automatically off, a fact in the person's words, and a fold
// that hands them to the learner. With the stand-in store (the memory API
// not mounted yet) the run is recorded directly, as the learner would.
func (r *rig) learnWaiting(ctx context.Context) (chatID string) {
	r.t.Helper()
	c, err := r.d.Client.CreateChat(ctx, api.CreateChatRequest{Title: "Morning routine", NoAutoRemember: true})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, text := range []string{"I drink green tea every morning.", "What goes well with it?"} {
		if _, err := r.d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: text}, nil); err != nil {
			r.t.Fatal(err)
		}
	}
	if r.mem != nil {
		if _, _, err := r.mem.Add(ctx, memory.AddInput{Tenant: "default", ChatID: c.ID, Source: memory.SourceFold,
			FromSeq: 1, ToSeq: 2, Texts: []string{fakeFact}, Wait: true}); err != nil {
			r.t.Fatal(err)
		}
		return c.ID
	}
	if err := r.d.Client.Post(ctx, "/v1/chats/"+c.ID+"/compact", map[string]string{}, &api.Compacted{}); err != nil {
		r.t.Fatal(err)
	}
	// The learner runs beside the fold; wait (bounded by the test's
	// deadline, not a duration) until what it learned is stored.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	waitFor(wctx, r.t, "the learner to store the fact", func() (bool, error) {
		return len(r.memories(ctx, "waiting")) > 0, nil
	})
	return c.ID
}

func TestBrowserApproveAWaitingMemory(t *testing.T) {
	r := newRig(t, rigOptions{window: 32000})
	ctx := context.Background()
	chatID := r.learnWaiting(ctx)
	waiting := r.memories(ctx, "waiting")
	if len(waiting) != 1 || waiting[0].Text != fakeFact || waiting[0].ChatID != chatID {
		t.Fatalf("waiting memories %+v, want the one fact from chat %s", waiting, chatID)
	}

	r.open("#/memories/waiting")
	r.until("the waiting memory", `document.querySelector('#memories li.memory[data-id=`+js(waiting[0].ID)+`] button.approve') !== null`)
	// It says which chat it came from, by title, linking to it.
	link := eval[string](r, `document.querySelector("#memories li.memory a").getAttribute("href")`)
	title := eval[string](r, `document.querySelector("#memories li.memory a").textContent`)
	if link != "#/chats/"+chatID || title != "Morning routine" {
		t.Fatalf("memory links to %q titled %q", link, title)
	}
	if sel := eval[string](r, `document.querySelector('[role="tab"][aria-selected="true"]').id`); sel != "tab-waiting" {
		t.Fatalf("selected tab %q", sel)
	}
	r.shoot("console-memories.png", "")

	r.do("press OK", chromedp.Click(chromedp.CSS("#memories li.memory button.approve")))
	r.until("the approval", `document.querySelector("#memories li.memory .approved") !== null`)
	active := r.memories(ctx, "active")
	if len(active) != 1 || active[0].ID != waiting[0].ID {
		t.Fatalf("active memories after OK: %+v", active)
	}
	if w := r.memories(ctx, "waiting"); len(w) != 0 {
		t.Fatalf("still waiting after OK: %+v", w)
	}

	// The keyboard moves between the tabs.
	r.do("focus the waiting tab", chromedp.Focus(chromedp.CSS("#tab-waiting")))
	r.do("arrow left", chromedp.KeyEvent(kb.ArrowLeft))
	r.until("the active tab", `location.hash === "#/memories/active" && document.activeElement.id === "tab-active"`)
	r.until("the active list", `[...document.querySelectorAll("#memories li.memory .text")].some(e => e.textContent === `+js(fakeFact)+`)`)
}

func TestBrowserUndoARun(t *testing.T) {
	r := newRig(t, rigOptions{window: 32000})
	ctx := context.Background()
	r.learnWaiting(ctx)
	runs := r.runs(ctx)
	if len(runs) != 1 || runs[0].Undone {
		t.Fatalf("runs %+v, want one not undone", runs)
	}

	r.open("#/memories")
	r.until("the run", `document.querySelector('#runs li.run[data-id=`+js(runs[0].ID)+`] button.undo') !== null`)
	r.do("undo it", chromedp.Click(chromedp.CSS("#runs li.run button.undo")))
	r.until("the run to show undone", `document.querySelector('#runs li.run.undone') !== null && document.querySelector('#runs button.undo') === null`)

	after := r.runs(ctx)
	if len(after) != 1 || !after[0].Undone {
		t.Fatalf("runs after Undo %+v", after)
	}
	undone := r.memories(ctx, "undone")
	if len(undone) != len(runs[0].Added) {
		t.Fatalf("%d undone memories, the run added %d", len(undone), len(runs[0].Added))
	}
	r.open("#/memories/undone")
	r.until("the undone list", `[...document.querySelectorAll("#memories li.memory .text")].some(e => e.textContent === `+js(fakeFact)+`)`)
	if strings.Contains(eval[string](r, `document.querySelector("#memories").textContent`), "OK") {
		t.Fatal("an undone memory offers OK")
	}
}

func getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
