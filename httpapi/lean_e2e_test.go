package httpapi_test

// Acceptance tests of issue 8 (lean mode: small windows, big tool
// registries) through the whole daemon against the OpenAI-style fake.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/memory"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
	"github.com/agentd/agentd/tools"
	"github.com/agentd/agentd/window"
)

// warehouseTools registers 150 small typed tools (ten verbs on fifteen
// things) and counts the calls each gets.
type warehouseTools struct {
	mu    sync.Mutex
	calls map[string]int
}

var (
	whVerbs = []string{"ship", "count", "archive", "rename", "price", "inspect", "schedule", "cancel", "label", "weigh"}
	whNouns = []string{"parcel", "invoice", "pallet", "crate", "order", "truck", "shelf", "barcode", "supplier", "route",
		"container", "manifest", "receipt", "warehouse", "forklift"}
)

type itemArgs struct {
	ID   string `json:"id" jsonschema:"description=id of the item"`
	Note string `json:"note,omitempty" jsonschema:"description=a short note kept with the action"`
}

func (w *warehouseTools) register(r *tools.Registry) error {
	for _, v := range whVerbs {
		for _, n := range whNouns {
			name := v + "_" + n
			desc := fmt.Sprintf("%s a %s in the warehouse system and record who did it.", strings.ToUpper(v[:1])+v[1:], n)
			err := tools.Register(r, name, desc, func(ctx context.Context, a itemArgs) (tools.Result, error) {
				w.mu.Lock()
				w.calls[name]++
				w.mu.Unlock()
				return tools.Result{Text: fmt.Sprintf("%s done for %s", name, a.ID)}, nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *warehouseTools) count(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[name]
}

// leanScript plays a model that uses tools the way a lean chat offers them.
func leanScript(r testkit.Received) testkit.Reply {
	if requestKind(r) != kindTurn {
		return testkit.Reply{Text: "[]"}
	}
	last := r.Messages[len(r.Messages)-1]
	call := func(id, name, args string) testkit.Reply {
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: id, Name: name, Arguments: args}}}
	}
	if last.Role == chat.RoleTool {
		if last.ToolCallID == "call_find" && slices.Contains(r.Tools, "ship_parcel") {
			return call("call_ship", "ship_parcel", `{"id":"P-17"}`)
		}
		return testkit.Reply{Text: "Done."}
	}
	switch {
	case strings.Contains(last.Content, "remember that"):
		if !slices.Contains(r.Tools, "remember") {
			return testkit.Reply{Text: "I have no way to remember that."}
		}
		return call("call_rem", "remember", `{"text":"The person's favourite tea is oolong."}`)
	case strings.Contains(last.Content, "parcel"):
		return call("call_find", "find_tools", `{"query":"ship a parcel"}`)
	case strings.Contains(last.Content, "crate"):
		// Called by name, never loaded.
		return call("call_weigh", "weigh_crate", `{"id":"C-4"}`)
	}
	return testkit.Reply{Text: "Hello."}
}

// leanWindow is the window of the lean tests: small enough to be lean.
const leanWindow = 8192

// startWarehouse starts a daemon with the warehouse tools on a lean window
// against a fake playing leanScript.
func startWarehouse(t *testing.T) (*warehouseTools, *openaifake.Server, *daemontest.Daemon) {
	t.Helper()
	wh := &warehouseTools{calls: map[string]int{}}
	fake := openaifake.New(openaifake.Options{Window: leanWindow, Script: leanScript})
	t.Cleanup(fake.Close)
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), leanWindow), nil, hub.Options{Tools: wh.register})
	return wh, fake, d
}

// turnRequests returns the turn requests made since the first n.
func turnRequestsSince(fake *openaifake.Server, n int) []testkit.Received {
	return requestsOf(fake, kindTurn)[n:]
}

func sendCollect(t *testing.T, d *daemontest.Daemon, chatID, text string) []api.Event {
	t.Helper()
	var evs []api.Event
	res, err := d.Client.Send(context.Background(), chatID, api.SendMessageRequest{Content: text}, func(ev api.Event) { evs = append(evs, ev) })
	if err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
	if res.Problem != nil {
		t.Fatalf("send %q: problem %+v", text, *res.Problem)
	}
	return evs
}

func loadedIn(t *testing.T, evs []api.Event) []string {
	t.Helper()
	var names []string
	for _, ev := range evs {
		if ev.Type != chat.EventToolsLoaded {
			continue
		}
		var v struct{ Names []string }
		if err := json.Unmarshal(ev.Data, &v); err != nil {
			t.Fatal(err)
		}
		names = append(names, v.Names...)
	}
	return names
}

// On an 8K window with 150 registered tools a chat starts lean: a first
// request of at most a quarter of the window carrying find_tools; tools the
// person names are preloaded, find_tools loads more, a tool called by name
// runs and is loaded, and the loaded set survives a restart.
func TestLeanChatOnSmallWindowWithManyTools(t *testing.T) {
	const win = leanWindow
	wh, fake, d := startWarehouse(t)
	ctx := context.Background()

	// The premise: every tool's spec together would not fit a quarter of
	// the window, so the first request fits only by going lean.
	all := 0
	for _, sp := range d.Hub.Tools().Specs() {
		all += window.EstimateText(sp.Name) + window.EstimateText(sp.Description) + window.EstimateText(string(sp.Parameters))
	}
	if all <= win/4 {
		t.Fatalf("the registry's specs estimate at %d tokens; the test needs more than %d", all, win/4)
	}
	c := newChat(t, d, "")

	t.Run("first request is lean", func(t *testing.T) {
		evs := sendCollect(t, d, c.ID, "hello there")
		first := requestsOf(fake, kindTurn)[0]
		t.Logf("first request: %d tokens, tools %v", first.InputTokens, first.Tools)
		if first.InputTokens > win/4 {
			t.Fatalf("the first request counts %d tokens; at most %d", first.InputTokens, win/4)
		}
		if !slices.Contains(first.Tools, "find_tools") {
			t.Fatalf("the first request's tools %v lack find_tools", first.Tools)
		}
		for _, name := range first.Tools {
			if name != "find_tools" && !slices.Contains(loadedIn(t, evs), name) {
				t.Fatalf("the first request carries %s, which was not preloaded", name)
			}
		}
		if v := chatContext(t, d, c.ID); !v.Lean {
			t.Fatal("GET /context says the chat is not lean")
		}
	})

	t.Run("remember is preloaded and stores the memory", func(t *testing.T) {
		n := len(requestsOf(fake, kindTurn))
		evs := sendCollect(t, d, c.ID, "Please remember that my favourite tea is oolong")
		reqs := turnRequestsSince(fake, n)
		if !slices.Contains(reqs[0].Tools, "remember") {
			t.Fatalf("the turn's first request has tools %v; want remember preloaded", reqs[0].Tools)
		}
		if !slices.Contains(loadedIn(t, evs), "remember") {
			t.Fatal("no tools.loaded event names remember")
		}
		resp, err := http.Get(d.Server.URL + "/v1/memories?state=active")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Memories []memory.Memory }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(out.Memories, func(m memory.Memory) bool {
			return strings.Contains(m.Text, "oolong") && m.ChatID == c.ID
		}) {
			t.Fatalf("GET /v1/memories = %+v; want the oolong memory of this chat", out.Memories)
		}
	})

	t.Run("find_tools loads tools for the next request", func(t *testing.T) {
		n := len(requestsOf(fake, kindTurn))
		evs := sendCollect(t, d, c.ID, "I need to send a parcel to Porto")
		reqs := turnRequestsSince(fake, n)
		// find_tools' answer, then the request after it.
		var after *testkit.Received
		var answer string
		for i, r := range reqs {
			if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleTool && last.ToolCallID == "call_find" {
				after, answer = &reqs[i], last.Content
			}
		}
		if after == nil {
			t.Fatal("no request followed find_tools' result")
		}
		// The answer gives the loaded tools' specs; each is offered next.
		_, specsJSON, _ := strings.Cut(answer, "\n")
		var specs []chat.ToolSpec
		if err := json.Unmarshal([]byte(specsJSON), &specs); err != nil || len(specs) == 0 {
			t.Fatalf("find_tools answered %q; want the loaded tools' specs", answer)
		}
		for _, sp := range specs {
			if !slices.Contains(after.Tools, sp.Name) || len(sp.Parameters) == 0 {
				t.Fatalf("find_tools loaded %s (parameters %s) but the next request's tools are %v", sp.Name, sp.Parameters, after.Tools)
			}
		}
		// ship_parcel came from find_tools alone: the message says "send".
		if slices.Contains(reqs[0].Tools, "ship_parcel") || !slices.ContainsFunc(specs, func(sp chat.ToolSpec) bool { return sp.Name == "ship_parcel" }) {
			t.Fatalf("ship_parcel: preloaded %v, found %v", reqs[0].Tools, specs)
		}
		loaded := loadedIn(t, evs)
		t.Logf("loaded this turn: %v; first request's tools %v; after find_tools %v", loaded, reqs[0].Tools, after.Tools)
		if len(loaded) == 0 {
			t.Fatal("find_tools loaded nothing")
		}
		for _, name := range loaded {
			if !slices.Contains(after.Tools, name) {
				t.Fatalf("%s was loaded but the next request's tools are %v", name, after.Tools)
			}
		}
		if wh.count("ship_parcel") != 1 {
			t.Fatalf("ship_parcel ran %d times; want once", wh.count("ship_parcel"))
		}
	})

	t.Run("a tool called by name runs and is loaded", func(t *testing.T) {
		if slices.Contains(chatContext(t, d, c.ID).LoadedTools, "weigh_crate") {
			t.Fatal("weigh_crate is loaded before the model calls it")
		}
		n := len(requestsOf(fake, kindTurn))
		sendCollect(t, d, c.ID, "weigh the crate C-4 please")
		if wh.count("weigh_crate") != 1 {
			t.Fatalf("weigh_crate ran %d times; want once", wh.count("weigh_crate"))
		}
		reqs := turnRequestsSince(fake, n)
		next := reqs[len(reqs)-1]
		res := next.Messages[len(next.Messages)-1]
		if res.ToolCallID != "call_weigh" || strings.Contains(res.Content, "Invalid") || !strings.Contains(res.Content, "weigh_crate done") {
			t.Fatalf("weigh_crate's result sent back is %q", res.Content)
		}
		if !slices.Contains(next.Tools, "weigh_crate") {
			t.Fatalf("the request after the call has tools %v; want weigh_crate loaded", next.Tools)
		}
		if !slices.Contains(chatContext(t, d, c.ID).LoadedTools, "weigh_crate") {
			t.Fatal("GET /context loaded_tools lacks weigh_crate")
		}
	})

	t.Run("loaded tools survive a restart", func(t *testing.T) {
		before := chatContext(t, d, c.ID).LoadedTools
		if len(before) == 0 {
			t.Fatal("nothing loaded before the restart")
		}
		d2 := d.Restart()
		after, err := d2.Client.Context(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(before, after.LoadedTools) {
			t.Fatalf("loaded tools %v before the restart, %v after", before, after.LoadedTools)
		}
		n := len(requestsOf(fake, kindTurn))
		sendCollect(t, d2, c.ID, "hello again")
		r := turnRequestsSince(fake, n)[0]
		for _, name := range before {
			if !slices.Contains(r.Tools, name) {
				t.Fatalf("after the restart the request's tools %v lack %s", r.Tools, name)
			}
		}
	})
}

// Tools a message's words preloaded that the model never calls leave the
// list at the next fold (where the prefix changes anyway) and words load
// them no more; a tool the model called stays.
func TestWordLoadedToolsLeaveAtTheNextFoldUnlessCalled(t *testing.T) {
	wh, fake, d := startWarehouse(t)
	c := newChat(t, d, "")

	preloaded := loadedIn(t, sendCollect(t, d, c.ID, "how do I inspect a pallet and price an invoice"))
	if len(preloaded) == 0 {
		t.Fatal("the words preloaded nothing; the test needs a preloaded tool")
	}
	sendCollect(t, d, c.ID, "weigh the crate C-4 please")
	if wh.count("weigh_crate") != 1 {
		t.Fatalf("weigh_crate ran %d times", wh.count("weigh_crate"))
	}
	before := chatContext(t, d, c.ID).LoadedTools
	for _, name := range append(slices.Clone(preloaded), "weigh_crate") {
		if !slices.Contains(before, name) {
			t.Fatalf("loaded tools %v lack %s before the fold", before, name)
		}
	}
	var folded chat.Compacted
	if err := d.Client.Post(context.Background(), "/v1/chats/"+c.ID+"/compact", map[string]string{}, &folded); err != nil {
		t.Fatal(err)
	}
	after := chatContext(t, d, c.ID).LoadedTools
	for _, name := range preloaded {
		if name != "weigh_crate" && slices.Contains(after, name) {
			t.Fatalf("%s, preloaded by words and never called, is still loaded after the fold: %v", name, after)
		}
	}
	if !slices.Contains(after, "weigh_crate") {
		t.Fatalf("weigh_crate, called, left the loaded tools at the fold: %v", after)
	}
	// The same words load the declined tools no more: the list stays.
	n := len(requestsOf(fake, kindTurn))
	if again := loadedIn(t, sendCollect(t, d, c.ID, "how do I inspect a pallet and price an invoice")); len(again) > 0 {
		t.Fatalf("words loaded %v again after the model left them uncalled", again)
	}
	if r := turnRequestsSince(fake, n)[0]; !slices.Contains(r.Tools, "weigh_crate") || slices.ContainsFunc(preloaded, func(n string) bool { return n != "weigh_crate" && slices.Contains(r.Tools, n) }) {
		t.Fatalf("the next request's tools are %v", r.Tools)
	}
}
