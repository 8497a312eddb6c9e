package toolindex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"pgregory.net/rapid"

	"github.com/agentd/agentd/toolsearch"
)

const wait = 5 * time.Second

func spawn(t *testing.T) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	sys := actor.NewActorSystem()
	pid := sys.Root.Spawn(Props(Config{}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	return sys, pid
}

// loaded waits for the actor's first load: a search of a scope the load
// may bring (any) waits for it, and for the daemon's scope.
func loaded(t *testing.T, sys *actor.ActorSystem, pid *actor.PID) {
	t.Helper()
	ask[*SearchResult](t, sys, pid, &Search{ReqID: "loaded", Query: "loaded", K: 1, Scopes: []string{"loaded"}})
}

// replaced is ReplaceScope for tools whose indexing cannot fail.
func replaced(scope string, tools []Tool) *Register {
	reg, err := ReplaceScope(scope, tools)
	if err != nil {
		panic(err)
	}
	return reg
}

func ask[T any](t *testing.T, sys *actor.ActorSystem, pid *actor.PID, msg any) T {
	t.Helper()
	res, err := sys.Root.RequestFuture(pid, msg, wait).Result()
	if err != nil {
		t.Fatalf("request %T: %v", msg, err)
	}
	r, ok := res.(T)
	if !ok {
		t.Fatalf("request %T: got %T", msg, res)
	}
	return r
}

var daemonTools = []Tool{
	{Name: "remember", Description: "Save a fact the person asked to keep.", Parameters: json.RawMessage(`{"type":"object","properties":{"fact":{"type":"string","description":"the fact"}}}`)},
	{Name: "web_fetch", Description: "Download a page.", Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","description":"address of the page"}}}`)},
	{Name: "tide_table", Description: "Tides for a place.", Parameters: json.RawMessage(`{"type":"object","properties":{"port":{"type":"object","description":"where","properties":{"harbour_code":{"type":"string","description":"UN/LOCODE of the harbour"}}}}}`)},
}

func TestRegisterSearchNamedIn(t *testing.T) {
	sys, pid := spawn(t)
	reg := ask[*Registered](t, sys, pid, &Register{ReqID: "r1", Tools: daemonTools})
	if reg.ReqID != "r1" || reg.Count != 3 || reg.Total != 3 || len(reg.Invalid) != 0 {
		t.Fatalf("Registered = %+v", reg)
	}
	// "harbour" only appears in a nested parameter's description: the
	// schema's nested properties must be indexed.
	sr := ask[*SearchResult](t, sys, pid, &Search{ReqID: "s1", Query: "harbour", K: 5})
	if sr.ReqID != "s1" || len(sr.Hits) == 0 || sr.Hits[0].Name != "tide_table" {
		t.Errorf("SearchResult = %+v, want tide_table first", sr)
	}
	nr := ask[*NamedInResult](t, sys, pid, &NamedIn{ReqID: "n1", Message: "Please remember that my favourite tea is oolong", Max: 3})
	if nr.ReqID != "n1" || !slices.Contains(nr.Names, "remember") {
		t.Errorf("NamedInResult = %+v, want remember", nr)
	}
	nr = ask[*NamedInResult](t, sys, pid, &NamedIn{ReqID: "n2", Message: "What does the front page of example.com say?", Max: 3})
	if !slices.Contains(nr.Names, "web_fetch") {
		t.Errorf("address: NamedInResult = %+v, want web_fetch", nr)
	}
}

// Register sent without a sender is still seen by the next search; the
// actor does not answer it.
func TestRegisterBySendThenSearch(t *testing.T) {
	sys, pid := spawn(t)
	sys.Root.Send(pid, &Register{Tools: daemonTools[:1]})
	sys.Root.Send(pid, &Register{Tools: daemonTools[1:]})
	sr := ask[*SearchResult](t, sys, pid, &Search{ReqID: "s", Query: "download page", K: 1})
	if len(sr.Hits) != 1 || sr.Hits[0].Name != "web_fetch" {
		t.Errorf("hits = %v, want web_fetch", sr.Hits)
	}
}

func TestUnregisterAndGet(t *testing.T) {
	sys, pid := spawn(t)
	ask[*Registered](t, sys, pid, &Register{ReqID: "r", Tools: daemonTools})
	un := ask[*Unregistered](t, sys, pid, &Unregister{ReqID: "u", Names: []string{"tide_table", "nope"}})
	if un.ReqID != "u" || un.Total != 2 {
		t.Errorf("Unregistered = %+v, want total 2", un)
	}
	sr := ask[*SearchResult](t, sys, pid, &Search{ReqID: "s", Query: "harbour tides", K: 5})
	for _, h := range sr.Hits {
		if h.Name == "tide_table" {
			t.Errorf("unregistered tool still found: %v", sr.Hits)
		}
	}
	g := ask[*GetResult](t, sys, pid, &Get{ReqID: "g", Names: []string{"web_fetch", "tide_table", "remember"}})
	if g.ReqID != "g" || len(g.Tools) != 2 || g.Tools[0].Name != "web_fetch" || g.Tools[1].Name != "remember" {
		t.Errorf("GetResult = %+v, want web_fetch then remember", g)
	}
	if !json.Valid(g.Tools[0].Parameters) {
		t.Errorf("schema not kept: %s", g.Tools[0].Parameters)
	}
}

// The index keeps its own copy of each schema: the sender may reuse its
// buffer, and a tool without one keeps none (null, not an empty schema).
func TestRegisterCopiesSchemas(t *testing.T) {
	sys, pid := spawn(t)
	buf := []byte(`{"type":"object"}{"properties":{}}`)
	ask[*Registered](t, sys, pid, &Register{ReqID: "r", Tools: []Tool{
		{Name: "a", Parameters: buf[:17]}, {Name: "b", Parameters: buf[17:]}, {Name: "c", Parameters: json.RawMessage{}},
	}})
	copy(buf, bytes.Repeat([]byte("x"), len(buf)))
	g := ask[*GetResult](t, sys, pid, &Get{ReqID: "g", Names: []string{"a", "b", "c"}})
	if len(g.Tools) != 3 || string(g.Tools[0].Parameters) != `{"type":"object"}` || string(g.Tools[1].Parameters) != `{"properties":{}}` || g.Tools[2].Parameters != nil {
		t.Fatalf("tools = %+v, want the schemas as registered", g.Tools)
	}
	// Growing one tool's schema in place must not write into the next's.
	_ = append(g.Tools[0].Parameters, '!')
	if g := ask[*GetResult](t, sys, pid, &Get{ReqID: "g", Names: []string{"b"}}); string(g.Tools[0].Parameters) != `{"properties":{}}` {
		t.Errorf("b's schema = %s after a's grew", g.Tools[0].Parameters)
	}
}

func TestRegisterBadSchema(t *testing.T) {
	sys, pid := spawn(t)
	reg := ask[*Registered](t, sys, pid, &Register{ReqID: "r", Tools: []Tool{
		{Name: "broken_tool", Description: "Polishes lanterns.", Parameters: json.RawMessage(`{"properties": [`)},
		{Name: "", Description: "nameless"},
	}})
	if reg.Count != 1 || len(reg.Invalid) != 2 || reg.Invalid[0] != "broken_tool" {
		t.Errorf("Registered = %+v, want 1 accepted and 2 invalid", reg)
	}
	sr := ask[*SearchResult](t, sys, pid, &Search{ReqID: "s", Query: "polish lantern", K: 3})
	if len(sr.Hits) == 0 || sr.Hits[0].Name != "broken_tool" {
		t.Errorf("tool with a bad schema should still be found by description: %v", sr.Hits)
	}
}

// A large registry registered in batches answers searches correctly.
func TestLargeRegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 50,000-tool index")
	}
	sys, pid := spawn(t)
	const n, batch = 50000, 5000
	for start := 0; start < n; start += batch {
		ts := make([]Tool, batch)
		for i := range ts {
			id := start + i
			ts[i] = Tool{Name: fmt.Sprintf("tool_%d", id), Description: fmt.Sprintf("Generic helper number %d.", id)}
		}
		sys.Root.Send(pid, &Register{Tools: ts})
	}
	ask[*Registered](t, sys, pid, &Register{ReqID: "last", Tools: []Tool{{Name: "lighthouse_status", Description: "Whether a lighthouse is lit."}}})
	sr := ask[*SearchResult](t, sys, pid, &Search{ReqID: "s", Query: "is the lighthouse lit", K: 5})
	if len(sr.Hits) == 0 || sr.Hits[0].Name != "lighthouse_status" {
		t.Errorf("hits = %v", sr.Hits)
	}
}

func TestParams(t *testing.T) {
	cases := map[string]struct {
		schema string
		want   []toolsearch.Param
	}{
		"empty":  {"", nil},
		"null":   {"null", nil},
		"flat":   {`{"properties":{"b":{"description":"B"},"a":{"description":"A"}}}`, []toolsearch.Param{{Name: "a", Description: "A"}, {Name: "b", Description: "B"}}},
		"nested": {`{"properties":{"o":{"properties":{"x":{"description":"X"}}}}}`, []toolsearch.Param{{Name: "o"}, {Name: "x", Description: "X"}}},
		"items": {`{"properties":{"l":{"type":"array","items":{"description":"an entry","properties":{"k":{}}}}}}`,
			[]toolsearch.Param{{Name: "l"}, {Description: "an entry"}, {Name: "k"}}},
		// Valid JSON Schema the struct cannot hold, read generically.
		"boolean subschemas": {`{"type":"object","properties":{"why":true,"never":false,"to":{"description":"Where"}}}`,
			[]toolsearch.Param{{Name: "never"}, {Name: "to", Description: "Where"}, {Name: "why"}}},
		"items as a list": {`{"properties":{"pair":{"items":[{"description":"first"},true,{"properties":{"k":{}}}]}}}`,
			[]toolsearch.Param{{Name: "pair"}, {Description: "first"}, {Name: "k"}}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := params(json.RawMessage(c.schema))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("params = %+v, want %+v", got, c.want)
			}
		})
	}
	if _, err := params(json.RawMessage(`{`)); err == nil {
		t.Error("bad JSON: want an error")
	}
}

// paramsOf gives each tool what params gives it, in the tools' order,
// whether it parses them in one goroutine or spreads a large batch.
func TestParamsOfIsParamsInOrder(t *testing.T) {
	schemas := []string{
		"",
		`{"properties":{"b":{"description":"B"},"a":{"description":"A"}}}`,
		`{"properties": [`,
		`{"properties":{"l":{"type":"array","items":{"description":"an entry"}}}}`,
	}
	for _, n := range []int{0, 1, 7, parallelFrom - 1, parallelFrom, 3*parallelFrom + 5} {
		tools := make([]Tool, n)
		for i := range tools {
			// Each tool's own parameter name tells a shifted result.
			tools[i].Parameters = json.RawMessage(schemas[i%len(schemas)])
			if i%len(schemas) == 1 {
				tools[i].Parameters = json.RawMessage(fmt.Sprintf(`{"properties":{"p%d":{"description":"D"}}}`, i))
			}
		}
		got := paramsOf(tools)
		if len(got) != n {
			t.Fatalf("%d tools: %d results", n, len(got))
		}
		for i, tl := range tools {
			want, err := params(tl.Parameters)
			if !slices.Equal(got[i].params, want) || (got[i].err == nil) != (err == nil) {
				t.Fatalf("%d tools, tool %d: paramsOf = %+v, %v; params = %+v, %v", n, i, got[i].params, got[i].err, want, err)
			}
		}
	}
}

// crash is turned into a panic by the test's middleware, as a bug in
// Receive would panic.
type crash struct{}

func panicsOnCrash(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(*crash); ok {
			panic("a bug in Receive")
		}
		next(c, env)
	}
}

// Issue 15: a restarted index came back empty for the rest of the process.
func TestRestartedIndexComesBackWithEveryTool(t *testing.T) {
	sys := actor.NewActorSystem()
	var loads atomic.Int64
	crm := ToolsetScope("acme", "crm")
	crmTools := []Tool{{Name: "crm_lookup_invoice", Description: "Find an invoice in the CRM by its number.", Parameters: json.RawMessage(`{"type":"object"}`)}}
	src := func(context.Context) []*Register {
		loads.Add(1)
		return []*Register{{Tools: daemonTools}, {Scope: crm, Replace: true, Tools: crmTools}}
	}
	var starts atomic.Int64
	countStarts := func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*actor.Started); ok {
				starts.Add(1)
			}
			next(c, env)
		}
	}
	pid := sys.Root.Spawn(Props(Config{Source: src}).Configure(actor.WithReceiverMiddleware(panicsOnCrash, countStarts)))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	names := []string{"remember", "web_fetch", "tide_table"}
	for _, when := range []string{"before", "after"} {
		sr := ask[*SearchResult](t, sys, pid, &Search{ReqID: when, Query: "harbour", K: 5})
		if len(sr.Hits) == 0 || sr.Hits[0].Name != "tide_table" {
			t.Fatalf("%s the restart: hits %v, want tide_table first", when, sr.Hits)
		}
		if got := ask[*GetResult](t, sys, pid, &Get{ReqID: when, Names: names}); len(got.Tools) != len(names) {
			t.Fatalf("%s the restart: %d of %d tools", when, len(got.Tools), len(names))
		}
		// A toolset's tools come back too, in their own scope only.
		if sr := ask[*SearchResult](t, sys, pid, &Search{ReqID: when, Query: "invoice", K: 5, Scopes: []string{crm}}); len(sr.Hits) == 0 || sr.Hits[0].Name != "crm_lookup_invoice" {
			t.Fatalf("%s the restart: toolset hits %v, want crm_lookup_invoice", when, sr.Hits)
		}
		if when == "before" {
			sys.Root.Send(pid, &crash{})
		}
	}
	if starts.Load() < 2 {
		t.Fatalf("the actor started %d times; it did not restart", starts.Load())
	}
	// The panic hit no scope: every one was kept, none read again.
	if loads.Load() != 1 {
		t.Errorf("the source was read %d times, want once", loads.Load())
	}
}

// TestARestartRebuildsOnlyTheScopeItsPanicHit: a restart after a panic
// keeps every scope built and rebuilds the one the panicking message was
// changing, off the mailbox, so another tenant's find_tools is answered
// meanwhile, and the tenant's own waits for its tools rather than finding
// none. A restart used to read the whole source again in the mailbox
// (every tenant's toolsets indexed again, 650 ms at 50,000 tools), and
// every search waited for it.
func TestARestartRebuildsOnlyTheScopeItsPanicHit(t *testing.T) {
	sys := actor.NewActorSystem()
	crm, warehouse := ToolsetScope("b", "crm"), ToolsetScope("a", "warehouse")
	crmTools := []Tool{{Name: "crm_lookup_invoice", Description: "Find an invoice in the CRM by its number."}}
	palletTools := []Tool{{Name: "move_pallet", Description: "Move a pallet in the warehouse."}}
	toolsOf := map[string][]Tool{crm: crmTools, warehouse: palletTools}
	src := func(context.Context) []*Register {
		return []*Register{replaced(crm, crmTools), replaced(warehouse, palletTools)}
	}
	pid := sys.Root.Spawn(Props(Config{Source: src, Tools: func(_ context.Context, scope string) []Tool { return toolsOf[scope] }}))
	loaded(t, sys, pid)
	// Tenant a's tools panic as they are indexed in the mailbox; indexed
	// again, they are held until the test releases them.
	var calls atomic.Int64
	indexing, release := make(chan struct{}), make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	testHookIndexing = func() {
		switch calls.Add(1) {
		case 1:
			panic("a bad tool")
		case 2:
			close(indexing)
		}
		<-release
	}
	sent := make(chan struct{})
	t.Cleanup(func() {
		free()
		<-sent
		_ = sys.Root.StopFuture(pid).Wait()
		testHookIndexing = func() {}
	})
	go func() {
		// The synchronized dispatcher runs the restart on this goroutine.
		defer close(sent)
		sys.Root.Send(pid, &Register{Scope: warehouse, Tools: palletTools})
	}()
	select {
	case <-indexing:
	case <-time.After(wait):
		t.Fatal("nothing was indexed again after the panic")
	}
	res, err := sys.Root.RequestFuture(pid, &Search{ReqID: "b", Query: "invoice", K: 3, Scopes: []string{crm}}, wait).Result()
	if err != nil {
		t.Fatalf("tenant b's search waited for the restart's indexing: %v", err)
	}
	if sr := res.(*SearchResult); len(sr.Hits) == 0 || sr.Hits[0].Name != "crm_lookup_invoice" {
		t.Fatalf("tenant b's hits %v during the rebuild, want crm_lookup_invoice", sr.Hits)
	}
	// Asked during the rebuild, tenant a's search is answered once its
	// toolset is back: answered at once it found nothing.
	own := sys.Root.RequestFuture(pid, &Search{ReqID: "a", Query: "pallet", K: 3, Scopes: []string{warehouse}}, wait)
	free()
	res, err = own.Result()
	if err != nil {
		t.Fatalf("tenant a's search during the rebuild: %v", err)
	}
	if sr := res.(*SearchResult); len(sr.Hits) == 0 || sr.Hits[0].Name != "move_pallet" {
		t.Fatalf("tenant a's hits %v asked during the rebuild, want move_pallet", sr.Hits)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("tools were indexed %d times, want twice (the panic, then tenant a's toolset alone)", n)
	}
}

// The mailbox runs on its senders' goroutines: many of them registering and
// searching at once are still served one message at a time, each search
// seeing the tool its goroutine registered before it.
func TestConcurrentSenders(t *testing.T) {
	sys, pid := spawn(t)
	ask[*Registered](t, sys, pid, &Register{ReqID: "r", Tools: daemonTools})
	const n = 16
	errs := make(chan error, n)
	for i := range n {
		go func() {
			name := fmt.Sprintf("lighthouse_%d_status", i)
			sys.Root.Send(pid, &Register{Tools: []Tool{{Name: name, Description: fmt.Sprintf("Whether lighthouse number%d is lit.", i)}}})
			res, err := sys.Root.RequestFuture(pid, &Search{ReqID: name, Query: name, K: 3}, wait).Result()
			sr, ok := res.(*SearchResult)
			switch {
			case err != nil:
				errs <- err
			case !ok || len(sr.Hits) == 0 || sr.Hits[0].Name != name:
				errs <- fmt.Errorf("search for %s: %+v", name, res)
			default:
				errs <- nil
			}
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := ask[*Registered](t, sys, pid, &Register{ReqID: "end"}); got.Total != len(daemonTools)+n {
		t.Errorf("total %d, want %d", got.Total, len(daemonTools)+n)
	}
}

// params decodes a schema as encoding/json would: the same parameters, or
// an error for the same schemas, whatever the case of its keys, repeated
// keys, bad UTF-8, values of the wrong type or JSON that is not.
func TestParamsDecodeAsEncodingJSON(t *testing.T) {
	v1 := func(raw json.RawMessage) ([]toolsearch.Param, error) {
		if len(raw) == 0 || string(raw) == "null" {
			return nil, nil
		}
		var root schemaNode
		if err := json.Unmarshal(raw, &root); err != nil {
			return nil, err
		}
		var out []toolsearch.Param
		walk(&root, &out, 0)
		return out, nil
	}
	keys := []string{`"description"`, `"Description"`, `"DESCRIPTION"`, `"properties"`, `"Properties"`, `"items"`, `"type"`, `"a"`, `"b\u00e9"`}
	values := []string{`"a city"`, `"bad \xff utf8"`, `5`, `null`, `true`, `[]`, `"x\u0041"`}
	var schema func(t *rapid.T, depth int) string
	schema = func(t *rapid.T, depth int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range rapid.IntRange(0, 4).Draw(t, "members") {
			if i > 0 {
				b.WriteString(",")
			}
			k := rapid.SampledFrom(keys).Draw(t, "key")
			b.WriteString(k + ":")
			if depth < 3 && rapid.Bool().Draw(t, "object") {
				if strings.EqualFold(k, `"properties"`) {
					b.WriteString(`{"p1":` + schema(t, depth+1) + `,"P2":` + schema(t, depth+1) + "}")
				} else {
					b.WriteString(schema(t, depth+1))
				}
				continue
			}
			b.WriteString(rapid.SampledFrom(values).Draw(t, "value"))
		}
		b.WriteString("}")
		s := b.String()
		if rapid.IntRange(0, 20).Draw(t, "broken") == 0 {
			s = s[:len(s)-1]
		}
		return s
	}
	rapid.Check(t, func(t *rapid.T) {
		raw := json.RawMessage(schema(t, 0))
		got, err := params(raw)
		want, wantErr := v1(raw)
		if (err == nil) != (wantErr == nil) || !slices.Equal(got, want) {
			t.Fatalf("params(%s) = %+v, %v; encoding/json gives %+v, %v", raw, got, err, want, wantErr)
		}
	})
}

// TestATenantsToolsetBeingIndexedHoldsNoOtherTenantsSearch: a tenant's
// toolset is indexed by the goroutine that puts it, not in the actor's one
// mailbox, so another tenant's find_tools is answered while it is (in the
// mailbox, a tenant putting 10,000 tools again and again queued every
// other tenant's search behind each indexing).
func TestATenantsToolsetBeingIndexedHoldsNoOtherTenantsSearch(t *testing.T) {
	sys, pid := spawn(t)
	crm := ToolsetScope("b", "crm")
	ask[*Registered](t, sys, pid, replaced(crm, []Tool{{Name: "crm_lookup_invoice", Description: "Find an invoice in the CRM by its number."}}))
	indexing, release := make(chan struct{}), make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	testHookIndexing = func() { close(indexing); <-release }
	t.Cleanup(func() { free(); testHookIndexing = func() {} }) // before the actor stops
	warehouse := ToolsetScope("a", "warehouse")
	put := make(chan struct{})
	go func() {
		defer close(put)
		sys.Root.Send(pid, replaced(warehouse, []Tool{{Name: "move_pallet", Description: "Move a pallet in the warehouse."}}))
	}()
	<-indexing // tenant a's toolset is being indexed, and stays so
	sr := ask[*SearchResult](t, sys, pid, &Search{ReqID: "b", Query: "invoice", K: 3, Scopes: []string{crm}})
	free()
	<-put
	if len(sr.Hits) == 0 || sr.Hits[0].Name != "crm_lookup_invoice" {
		t.Fatalf("tenant b's hits %v, want crm_lookup_invoice", sr.Hits)
	}
	if sr := ask[*SearchResult](t, sys, pid, &Search{ReqID: "a", Query: "pallet", K: 3, Scopes: []string{warehouse}}); len(sr.Hits) == 0 || sr.Hits[0].Name != "move_pallet" {
		t.Fatalf("tenant a's hits %v once indexed, want move_pallet", sr.Hits)
	}
}

// TestAnIndexThatKeepsPanickingStillAnswers: past protoactor's default
// bound (10 failures in 10 s) the index is restarted still, not stopped: a
// tenant whose tool made every search of its own panic stopped find_tools
// for every tenant for the rest of the process.
func TestAnIndexThatKeepsPanickingStillAnswers(t *testing.T) {
	sys := actor.NewActorSystem()
	src := func(context.Context) []*Register { return []*Register{{Tools: daemonTools}} }
	pid := sys.Root.Spawn(Props(Config{Source: src}).Configure(actor.WithReceiverMiddleware(panicsOnCrash)))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	for range 15 {
		sys.Root.Send(pid, &crash{})
	}
	res, err := sys.Root.RequestFuture(pid, &Search{ReqID: "s", Query: "harbour", K: 3}, wait).Result()
	if err != nil {
		t.Fatalf("a search after 15 panics: %v", err)
	}
	if sr := res.(*SearchResult); len(sr.Hits) == 0 || sr.Hits[0].Name != "tide_table" {
		t.Fatalf("hits %v after 15 panics, want tide_table first", sr.Hits)
	}
}

// TestTheFirstLoadHoldsNoMessageBehindIt: the daemon's registry is read and
// indexed off the mailbox when the index first starts, so a slow read holds
// neither the spawn nor a tenant's toolset put; a search asked meanwhile
// is answered once the load is in, not with the nothing there is yet; and
// a toolset put during the load is not undone by the load's older copy.
// The load ran in the mailbox: every tenant's find_tools waited for it,
// and a read that hung froze the index.
func TestTheFirstLoadHoldsNoMessageBehindIt(t *testing.T) {
	sys := actor.NewActorSystem()
	crm := ToolsetScope("b", "crm")
	reading, release := make(chan struct{}), make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	src := func(context.Context) []*Register {
		close(reading)
		<-release
		return []*Register{{Tools: daemonTools[:1]}, {Tools: daemonTools[1:]}, {Scope: crm, Tools: []Tool{{Name: "crm_old_lookup", Description: "Find an invoice, the old way."}}}}
	}
	spawned := make(chan *actor.PID, 1)
	go func() { spawned <- sys.Root.Spawn(Props(Config{Source: src})) }()
	var pid *actor.PID
	t.Cleanup(func() {
		free()
		if pid == nil {
			pid = <-spawned
		}
		_ = sys.Root.StopFuture(pid).Wait()
	})
	select {
	case <-reading:
	case <-time.After(wait):
		t.Fatal("the source was never read")
	}
	select {
	case pid = <-spawned:
	case <-time.After(wait):
		t.Fatal("the spawn waited for the source")
	}
	put, err := sys.Root.RequestFuture(pid, replaced(crm, []Tool{{Name: "crm_lookup_invoice", Description: "Find an invoice in the CRM by its number."}}), wait).Result()
	if err != nil {
		t.Fatalf("a toolset put while the source is read: %v", err)
	}
	if r := put.(*Registered); r.Total != 1 {
		t.Fatalf("Registered = %+v, want 1 tool", r)
	}
	search := sys.Root.RequestFuture(pid, &Search{ReqID: "s", Query: "harbour", K: 3, Scopes: []string{crm}}, wait)
	free()
	res, err := search.Result()
	if err != nil {
		t.Fatalf("a search asked during the load: %v", err)
	}
	if sr := res.(*SearchResult); len(sr.Hits) == 0 || sr.Hits[0].Name != "tide_table" {
		t.Fatalf("hits %v for a search asked during the load, want tide_table first", sr.Hits)
	}
	g := ask[*GetResult](t, sys, pid, &Get{ReqID: "g", Names: []string{"remember", "web_fetch", "crm_lookup_invoice", "crm_old_lookup"}, Scopes: []string{crm}})
	var names []string
	for _, tl := range g.Tools {
		names = append(names, tl.Name)
	}
	if want := []string{"remember", "web_fetch", "crm_lookup_invoice"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v after the load, want %v (the put kept over the load's older toolset)", names, want)
	}
}

// TestASearchThatPanicsRebuildsOnlyTheScopeItRead: a search that panics
// while it reads one tenant's toolset costs that scope alone, rebuilt off
// the mailbox; the daemon's tools and another tenant's are kept as they
// were, and a search of the scope asked meanwhile finds its tools.
func TestASearchThatPanicsRebuildsOnlyTheScopeItRead(t *testing.T) {
	crm := ToolsetScope("b", "crm")
	toolsOf := map[string][]Tool{
		"":        daemonTools,
		crm:       {{Name: "crm_lookup_invoice", Description: "Find an invoice in the CRM by its number."}},
		warehouse: {{Name: "move_pallet", Description: "Move a pallet in the warehouse."}},
	}
	sys, pid, free, rebuilt, _ := panicInWarehouse(t, toolsOf)
	// While the warehouse is rebuilt, the other scopes answer as they were.
	for _, c := range []struct{ scope, query, want string }{
		{crm, "invoice", "crm_lookup_invoice"},
		{"", "harbour", "tide_table"},
	} {
		sr := ask[*SearchResult](t, sys, pid, &Search{ReqID: c.query, Query: c.query, K: 3, Scopes: []string{c.scope}})
		if len(sr.Hits) == 0 || sr.Hits[0].Name != c.want {
			t.Fatalf("%q during the rebuild: hits %v, want %s first", c.query, sr.Hits, c.want)
		}
	}
	own := sys.Root.RequestFuture(pid, &Search{ReqID: "pallet", Query: "pallet", K: 3, Scopes: []string{warehouse}}, wait)
	free()
	res, err := own.Result()
	if err != nil {
		t.Fatalf("a search of the warehouse asked during its rebuild: %v", err)
	}
	if sr := res.(*SearchResult); len(sr.Hits) == 0 || sr.Hits[0].Name != "move_pallet" {
		t.Fatalf("hits %v for the warehouse asked during its rebuild, want move_pallet first", sr.Hits)
	}
	if got := rebuilt(); !slices.Equal(got, []string{warehouse}) {
		t.Errorf("scopes rebuilt %q, want the warehouse alone", got)
	}
}

var warehouse = ToolsetScope("a", "warehouse")

// panicInWarehouse starts an index of toolsOf's scopes, then panics a
// search as it reads the warehouse's, and returns once the warehouse is
// being rebuilt, held until free; rebuilt lists the scopes rebuilt, boom
// is the panicking search's answer.
func panicInWarehouse(t *testing.T, toolsOf map[string][]Tool) (sys *actor.ActorSystem, pid *actor.PID, free func(), rebuilt func() []string, boom *actor.Future) {
	t.Helper()
	sys = actor.NewActorSystem()
	src := func(context.Context) []*Register {
		var regs []*Register
		for scope, ts := range toolsOf {
			regs = append(regs, replaced(scope, ts))
		}
		return regs
	}
	// The rebuild is held until the test releases it; the first load's
	// read of the daemon's scope is not.
	var mu sync.Mutex
	var scopes []string
	var armed atomic.Bool
	rebuilding, release := make(chan struct{}), make(chan struct{})
	free = sync.OnceFunc(func() { close(release) })
	tools := func(_ context.Context, scope string) []Tool {
		if !armed.Load() {
			return toolsOf[scope]
		}
		mu.Lock()
		scopes = append(scopes, scope)
		mu.Unlock()
		close(rebuilding)
		<-release
		return toolsOf[scope]
	}
	pid = sys.Root.Spawn(Props(Config{Source: src, Tools: tools}))
	t.Cleanup(func() { free(); _ = sys.Root.StopFuture(pid).Wait() })
	loaded(t, sys, pid)
	var panicked atomic.Bool
	testHookSearching = func(scope string) {
		if scope == warehouse && panicked.CompareAndSwap(false, true) {
			panic("a bad search")
		}
	}
	t.Cleanup(func() { testHookSearching = func(string) {} })
	armed.Store(true)
	// It reads the daemon's scope, then the warehouse, where it panics.
	boom = sys.Root.RequestFuture(pid, &Search{ReqID: "boom", Query: "pallet", K: 3, Scopes: []string{warehouse}}, wait)
	select {
	case <-rebuilding:
	case <-time.After(wait):
		t.Fatalf("no scope was rebuilt after the search (panicked: %v)", panicked.Load())
	}
	return sys, pid, free, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(scopes)
	}, boom
}

// failed checks that f is answered with Failed for reqID wrapping want,
// not left to time out: find_tools told the model "timeout" after 5 s.
func failed(t *testing.T, f *actor.Future, reqID string, want error) {
	t.Helper()
	res, err := f.Result()
	if err != nil {
		t.Fatalf("the asker of %q: %v, want a Failed", reqID, err)
	}
	rf, ok := res.(*Failed)
	if !ok || rf.ReqID != reqID || !errors.Is(rf, want) {
		t.Fatalf("the asker of %q got %#v, want a Failed for it wrapping %q", reqID, res, want)
	}
}

// TestASearchThatPanicsIsAnsweredWithAnError: the asker of a search that
// panics hears an error at once, without the search being run again; it
// heard nothing, and find_tools reported a timeout after 5 s.
func TestASearchThatPanicsIsAnsweredWithAnError(t *testing.T) {
	_, _, free, _, boom := panicInWarehouse(t, map[string][]Tool{warehouse: {{Name: "move_pallet", Description: "Move a pallet."}}})
	defer free()
	failed(t, boom, "boom", ErrReadFailed)
}

// TestAParkedReadThatPanicsIsAnsweredAndTheRestStillAre: a read parked
// during the first load that panics once the load is in is answered with
// an error, and the reads parked after it are answered by the restarted
// actor, the panicking scope's own once it is rebuilt.
func TestAParkedReadThatPanicsIsAnsweredAndTheRestStillAre(t *testing.T) {
	crm := ToolsetScope("b", "crm")
	toolsOf := map[string][]Tool{
		"":        daemonTools,
		crm:       {{Name: "crm_lookup_invoice", Description: "Find an invoice in the CRM by its number."}},
		warehouse: {{Name: "move_pallet", Description: "Move a pallet in the warehouse."}},
	}
	sys := actor.NewActorSystem()
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	src := func(context.Context) []*Register {
		<-release
		var regs []*Register
		for scope, ts := range toolsOf {
			regs = append(regs, replaced(scope, ts))
		}
		return regs
	}
	var panicked atomic.Bool
	testHookSearching = func(scope string) {
		if scope == warehouse && panicked.CompareAndSwap(false, true) {
			panic("a bad search")
		}
	}
	t.Cleanup(func() { testHookSearching = func(string) {} }) // once the actor is stopped
	pid := sys.Root.Spawn(Props(Config{Source: src, Tools: func(_ context.Context, scope string) []Tool { return toolsOf[scope] }}))
	t.Cleanup(func() { free(); _ = sys.Root.StopFuture(pid).Wait() })
	// All three are parked behind the load; the first panics as it is
	// answered.
	boom := sys.Root.RequestFuture(pid, &Search{ReqID: "boom", Query: "pallet", K: 3, Scopes: []string{warehouse}}, wait)
	invoice := sys.Root.RequestFuture(pid, &Search{ReqID: "invoice", Query: "invoice", K: 3, Scopes: []string{crm}}, wait)
	pallet := sys.Root.RequestFuture(pid, &Search{ReqID: "pallet", Query: "pallet", K: 3, Scopes: []string{warehouse}}, wait)
	free()
	failed(t, boom, "boom", ErrReadFailed)
	for _, c := range []struct {
		f    *actor.Future
		want string
	}{{invoice, "crm_lookup_invoice"}, {pallet, "move_pallet"}} {
		res, err := c.f.Result()
		if err != nil {
			t.Fatalf("a read parked after the one that panicked: %v", err)
		}
		if sr, ok := res.(*SearchResult); !ok || len(sr.Hits) == 0 || sr.Hits[0].Name != c.want {
			t.Fatalf("a read parked after the one that panicked got %+v, want %s first", res, c.want)
		}
	}
	if !panicked.Load() {
		t.Fatal("no search panicked")
	}
}

// TestAChangeToAScopeBeingRebuiltIsAppliedOnTopOfIt: a tool added to, or
// removed from, a toolset while a panic's rebuild of it runs is applied
// once the toolset is back. It was applied to the empty scope at once and
// dropped the rebuild: the toolset's other tools were gone until it was
// put again.
func TestAChangeToAScopeBeingRebuiltIsAppliedOnTopOfIt(t *testing.T) {
	sys, pid, free, _, _ := panicInWarehouse(t, map[string][]Tool{
		warehouse: {{Name: "move_pallet", Description: "Move a pallet."}, {Name: "scrap_pallet", Description: "Scrap a broken pallet."}},
	})
	add := sys.Root.RequestFuture(pid, &Register{ReqID: "add", Scope: warehouse, Tools: []Tool{{Name: "count_pallets", Description: "Count the pallets."}}}, wait)
	remove := sys.Root.RequestFuture(pid, &Unregister{ReqID: "remove", Scope: warehouse, Names: []string{"scrap_pallet"}}, wait)
	free()
	if res, err := add.Result(); err != nil || res.(*Registered).Total != 3 {
		t.Fatalf("adding a tool during the rebuild: %+v, %v; want 3 tools", res, err)
	}
	if res, err := remove.Result(); err != nil || res.(*Unregistered).Total != 2 {
		t.Fatalf("removing a tool during the rebuild: %+v, %v; want 2 tools", res, err)
	}
	g := ask[*GetResult](t, sys, pid, &Get{ReqID: "g", Names: []string{"move_pallet", "scrap_pallet", "count_pallets"}, Scopes: []string{warehouse}})
	var names []string
	for _, tl := range g.Tools {
		names = append(names, tl.Name)
	}
	if want := []string{"move_pallet", "count_pallets"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v after the rebuild, want %v", names, want)
	}
}

// TestStoppingCancelsAHungSource: stopping the actor cancels the context
// Source runs under, so a source that hangs until then holds the stop no
// longer; the stop waited for it up to 10 s (stopWait), and with it the
// daemon's.
func TestStoppingCancelsAHungSource(t *testing.T) {
	sys := actor.NewActorSystem()
	reading, cancelled := make(chan struct{}), make(chan struct{})
	src := func(ctx context.Context) []*Register {
		close(reading)
		<-ctx.Done()
		close(cancelled)
		return []*Register{{Tools: daemonTools}}
	}
	pid := sys.Root.Spawn(Props(Config{Source: src}))
	select {
	case <-reading:
	case <-time.After(wait):
		t.Fatal("the source was never read")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- sys.Root.StopFuture(pid).Wait() }()
	select {
	case <-cancelled:
	case <-time.After(wait):
		t.Fatal("stopping the actor did not cancel the source's context")
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stopping the actor: %v", err)
	}
}

// TestTheDaemonsToolsWaitForNoTenantsToolsets: during the first load, the
// daemon's own tools (read from Tools("")) are in before the toolsets
// Source brings, so a search of them alone (every search reads them) is
// answered while a tenant's toolset is still read, and a search of that
// toolset waits for it. Both waited for the whole of Source.
func TestTheDaemonsToolsWaitForNoTenantsToolsets(t *testing.T) {
	sys := actor.NewActorSystem()
	crm := ToolsetScope("b", "crm")
	toolsOf := map[string][]Tool{"": daemonTools, crm: {{Name: "crm_lookup_invoice", Description: "Find an invoice in the CRM by its number."}}}
	reading, release := make(chan struct{}), make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	src := func(context.Context) []*Register {
		close(reading)
		<-release // a tenant's toolset, slow to read
		return []*Register{replaced(crm, toolsOf[crm])}
	}
	pid := sys.Root.Spawn(Props(Config{Source: src, Tools: func(_ context.Context, scope string) []Tool { return toolsOf[scope] }}))
	t.Cleanup(func() { free(); _ = sys.Root.StopFuture(pid).Wait() })
	select {
	case <-reading:
	case <-time.After(wait):
		t.Fatal("the source was never read")
	}
	if sr := ask[*SearchResult](t, sys, pid, &Search{ReqID: "own", Query: "harbour", K: 3}); len(sr.Hits) == 0 || sr.Hits[0].Name != "tide_table" {
		t.Fatalf("hits %v for the daemon's tools while a toolset is read, want tide_table first", sr.Hits)
	}
	invoice := sys.Root.RequestFuture(pid, &Search{ReqID: "crm", Query: "invoice", K: 3, Scopes: []string{crm}}, wait)
	free()
	res, err := invoice.Result()
	if err != nil {
		t.Fatalf("a search of the toolset asked while it was read: %v", err)
	}
	if sr := res.(*SearchResult); len(sr.Hits) == 0 || sr.Hits[0].Name != "crm_lookup_invoice" {
		t.Fatalf("hits %v for the toolset asked while it was read, want crm_lookup_invoice first", sr.Hits)
	}
}

// TestAChangeThatPanicsIsAnsweredAndChangesNothing: a Register or
// Unregister asked (RequestFuture) that panics is answered with Failed
// (ErrChangeFailed) at once, the index goes on serving another tenant's
// toolset, and the toolset changed holds what it held before: a replace
// is indexed apart and never installed, tools added to or removed from a
// toolset are indexed again from the registry (Tools). Its asker heard
// nothing until its ask timed out, and an Unregister's panic left its
// toolset half changed (its tools gone, its index still finding them).
func TestAChangeThatPanicsIsAnsweredAndChangesNothing(t *testing.T) {
	crm := ToolsetScope("b", "crm")
	pallets := []Tool{{Name: "move_pallet", Description: "Move a pallet."}, {Name: "scrap_pallet", Description: "Scrap a broken pallet."}}
	toolsOf := map[string][]Tool{
		crm:       {{Name: "crm_lookup_invoice", Description: "Find an invoice in the CRM by its number."}},
		warehouse: pallets,
	}
	counting := []Tool{{Name: "count_pallets", Description: "Count the pallets."}}
	for _, c := range []struct {
		name string
		// noTools leaves Config.Tools unset: nothing to index a scope
		// again from.
		noTools bool
		change  any
		arm     func(panicOnce func())
	}{
		{name: "add", change: &Register{ReqID: "change", Scope: warehouse, Tools: counting},
			arm: func(p func()) { testHookIndexing = p }},
		{name: "replace", noTools: true, change: &Register{ReqID: "change", Scope: warehouse, Replace: true, Tools: counting},
			arm: func(p func()) { testHookIndexing = p }},
		{name: "remove", change: &Unregister{ReqID: "change", Scope: warehouse, Names: []string{"scrap_pallet"}},
			arm: func(p func()) { testHookRemoving = func(string) { p() } }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Cleanup(func() { testHookIndexing, testHookRemoving = func() {}, func(string) {} }) // once the actor is stopped
			cfg := Config{Source: func(context.Context) []*Register {
				return []*Register{replaced(crm, toolsOf[crm]), replaced(warehouse, toolsOf[warehouse])}
			}}
			if !c.noTools {
				cfg.Tools = func(_ context.Context, scope string) []Tool { return toolsOf[scope] }
			}
			sys := actor.NewActorSystem()
			pid := sys.Root.Spawn(Props(cfg))
			t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
			loaded(t, sys, pid)
			var panicked atomic.Bool
			c.arm(func() {
				if panicked.CompareAndSwap(false, true) {
					panic("a bad change")
				}
			})
			failed(t, sys.Root.RequestFuture(pid, c.change, wait), "change", ErrChangeFailed)
			if !panicked.Load() {
				t.Fatal("the change did not panic")
			}
			if sr := ask[*SearchResult](t, sys, pid, &Search{ReqID: "b", Query: "invoice", K: 3, Scopes: []string{crm}}); len(sr.Hits) == 0 || sr.Hits[0].Name != "crm_lookup_invoice" {
				t.Fatalf("tenant b's hits %v after the panic, want crm_lookup_invoice first", sr.Hits)
			}
			g := ask[*GetResult](t, sys, pid, &Get{ReqID: "g", Names: []string{"move_pallet", "scrap_pallet", "count_pallets"}, Scopes: []string{warehouse}})
			var names []string
			for _, tl := range g.Tools {
				names = append(names, tl.Name)
			}
			if want := []string{"move_pallet", "scrap_pallet"}; !slices.Equal(names, want) {
				t.Fatalf("the warehouse holds %v after its change panicked, want %v as before", names, want)
			}
			// Its index agrees with its tools.
			if sr := ask[*SearchResult](t, sys, pid, &Search{ReqID: "a", Query: "scrap a broken pallet", K: 1, Scopes: []string{warehouse}}); len(sr.Hits) == 0 || sr.Hits[0].Name != "scrap_pallet" {
				t.Fatalf("the warehouse's hits %v after its change panicked, want scrap_pallet", sr.Hits)
			}
		})
	}
}

// TestStoppingAnswersTheParkedRequests: the reads and changes still parked
// for a scope being built when the actor stops are answered with Failed
// (ErrStopping) as it stops; their askers waited for their timeouts (5 s
// for find_tools), the daemon's shutdown with them.
func TestStoppingAnswersTheParkedRequests(t *testing.T) {
	sys := actor.NewActorSystem()
	src := func(ctx context.Context) []*Register {
		<-ctx.Done() // the first load never ends before the stop
		return nil
	}
	pid := sys.Root.Spawn(Props(Config{Source: src}))
	crm := ToolsetScope("b", "crm")
	search := sys.Root.RequestFuture(pid, &Search{ReqID: "search", Query: "invoice", K: 3, Scopes: []string{crm}}, wait)
	add := sys.Root.RequestFuture(pid, &Register{ReqID: "add", Scope: crm, Tools: []Tool{{Name: "crm_lookup_invoice", Description: "Find an invoice."}}}, wait)
	// A replace waits for no build: answered, it was handled after the two
	// parked before it.
	ask[*Registered](t, sys, pid, &Register{ReqID: "put", Scope: ToolsetScope("c", "x"), Replace: true, Tools: []Tool{{Name: "x", Description: "x"}}})
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatalf("stopping the actor: %v", err)
	}
	failed(t, search, "search", ErrStopping)
	failed(t, add, "add", ErrStopping)
}

// TestReplaceScopeThatPanicsIsAnError: indexing a scope on the caller's
// goroutine (ReplaceScope) that panics returns an error wrapping
// ErrChangeFailed rather than panicking there, so the hub can refuse the
// toolset before it stores it.
func TestReplaceScopeThatPanicsIsAnError(t *testing.T) {
	testHookIndexing = func() { panic("a bad tool") }
	t.Cleanup(func() { testHookIndexing = func() {} })
	reg, err := ReplaceScope(ToolsetScope("a", "warehouse"), []Tool{{Name: "move_pallet", Description: "Move a pallet."}})
	if !errors.Is(err, ErrChangeFailed) || reg != nil || !strings.Contains(err.Error(), "a bad tool") {
		t.Fatalf("ReplaceScope = %v, %v; want no Register and an error wrapping ErrChangeFailed that names the panic", reg, err)
	}
}

// TestReplaceScopeOfALargeToolsetThatPanicsIsAnError: a toolset large
// enough that its schemas are parsed on goroutines of their own (paramsOf)
// whose parsing panics is ReplaceScope's error, as a panic on the caller's
// goroutine is; it ended the process.
func TestReplaceScopeOfALargeToolsetThatPanicsIsAnError(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	tools := make([]Tool, 2*parallelFrom)
	for i := range tools {
		tools[i] = Tool{Name: fmt.Sprintf("tool_%d", i), Parameters: json.RawMessage(fmt.Sprintf(`{"properties":{"p%d":{}}}`, i))}
	}
	bad := string(tools[len(tools)-1].Parameters) // in the last goroutine's part
	testHookParsing = func(raw json.RawMessage) {
		if string(raw) == bad {
			panic("a schema the parser chokes on")
		}
	}
	t.Cleanup(func() { testHookParsing = func(json.RawMessage) {} })
	reg, err := ReplaceScope(ToolsetScope("a", "warehouse"), tools)
	if !errors.Is(err, ErrChangeFailed) || reg != nil || !strings.Contains(err.Error(), "a schema the parser chokes on") {
		t.Fatalf("ReplaceScope = %v, %v; want no Register and an error wrapping ErrChangeFailed that names the panic", reg, err)
	}
}

// TestTheOldestParkedReadPastTheCapIsAnswered: past maxParked reads
// waiting for a scope being built, the oldest is answered with Failed
// (ErrOverloaded) and the others still are once the build is in. It was
// dropped unanswered, and its asker waited for its timeout.
func TestTheOldestParkedReadPastTheCapIsAnswered(t *testing.T) {
	maxParked = 2
	t.Cleanup(func() { maxParked = 10000 })
	crm := ToolsetScope("b", "crm")
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	src := func(context.Context) []*Register {
		<-release
		return []*Register{replaced(crm, []Tool{{Name: "crm_lookup_invoice", Description: "Find an invoice in the CRM by its number."}})}
	}
	sys := actor.NewActorSystem()
	pid := sys.Root.Spawn(Props(Config{Source: src}))
	t.Cleanup(func() { free(); _ = sys.Root.StopFuture(pid).Wait() })
	var asks []*actor.Future
	for i := range 3 {
		asks = append(asks, sys.Root.RequestFuture(pid, &Search{ReqID: fmt.Sprint("s", i), Query: "invoice", K: 3, Scopes: []string{crm}}, wait))
	}
	failed(t, asks[0], "s0", ErrOverloaded)
	free()
	for i, f := range asks[1:] {
		res, err := f.Result()
		if sr, ok := res.(*SearchResult); err != nil || !ok || len(sr.Hits) == 0 || sr.Hits[0].Name != "crm_lookup_invoice" {
			t.Fatalf("search s%d once the build is in: %#v, %v; want crm_lookup_invoice", i+1, res, err)
		}
	}
}
