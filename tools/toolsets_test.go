package tools

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
)

var objSchema = json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)

func clientTool(name string) Tool { return Tool{Name: name, Parameters: objSchema, Client: true} }

func names(ts []chat.ToolSpec) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func TestPutToolsetRefusesWhatCannotBeSentOrCollides(t *testing.T) {
	r := NewRegistry()
	if err := r.Add(Tool{Name: "calculate", Parameters: objSchema, Run: func(context.Context, json.RawMessage) (Result, error) { return Result{}, nil }}); err != nil {
		t.Fatal(err)
	}
	if err := r.PutToolset("t1", "crm", []Tool{clientTool("crm_find")}, nil); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		tenant, set string
		tools       []Tool
		want        string
	}{
		"a name with a space":         {"t1", "cal", []Tool{clientTool("find event")}, "letters, digits"},
		"a name of 65 characters":     {"t1", "cal", []Tool{clientTool(strings.Repeat("a", 65))}, "letters, digits"},
		"a schema that is not JSON":   {"t1", "cal", []Tool{{Name: "x", Parameters: json.RawMessage(`{`), Client: true}}, "not a JSON Schema"},
		"a schema of a string":        {"t1", "cal", []Tool{{Name: "x", Parameters: json.RawMessage(`{"type":"string"}`), Client: true}}, `"type": "object"`},
		"a schema with a bad keyword": {"t1", "cal", []Tool{{Name: "x", Parameters: json.RawMessage(`{"type":"object","minProperties":"two"}`), Client: true}}, "JSON Schema"},
		"a daemon tool's name":        {"t1", "cal", []Tool{clientTool("calculate")}, "daemon tool"},
		"find_tools, the session's":   {"t1", "cal", []Tool{clientTool("find_tools")}, "daemon tool"},
		"another toolset's name":      {"t1", "cal", []Tool{clientTool("crm_find")}, "in toolset crm"},
		"a tool twice":                {"t1", "cal", []Tool{clientTool("a"), clientTool("a")}, "twice"},
		"no executor":                 {"t1", "cal", []Tool{{Name: "x", Parameters: objSchema}}, "no executor"},
		"a toolset name with a slash": {"t1", "a/b", []Tool{clientTool("x")}, "letters, digits"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if err := r.CheckToolset(c.tenant, c.set, c.tools); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("check: err = %v, want one saying %q", err, c.want)
			}
			err := r.PutToolset(c.tenant, c.set, c.tools, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one saying %q", err, c.want)
			}
			if _, ok := r.Toolset(c.tenant, c.set); ok {
				t.Fatal("a refused toolset was registered")
			}
		})
	}
	if err := r.PutToolset("t2", "crm2", []Tool{clientTool("crm_find")}, nil); err != nil {
		t.Fatalf("another tenant may use the same tool name: %v", err)
	}
	if err := r.PutToolset("t1", "crm", []Tool{clientTool("crm_find"), clientTool("crm_add")}, nil); err != nil {
		t.Fatalf("a toolset may be replaced with its own names: %v", err)
	}
}

func TestAViewSeesItsTenantsNamedToolsetsInAStableOrder(t *testing.T) {
	r := NewRegistry()
	run := func(context.Context, json.RawMessage) (Result, error) { return Result{Text: "ran"}, nil }
	_ = r.Add(Tool{Name: "b_builtin", Parameters: objSchema, Run: run})
	_ = r.Add(Tool{Name: "a_builtin", Parameters: objSchema, Run: run})
	_ = r.PutToolset("t1", "crm", []Tool{clientTool("z_crm"), clientTool("m_crm")}, nil)
	_ = r.PutToolset("t1", "cal", []Tool{{Name: "cal_add", Parameters: objSchema, Run: run}}, nil)
	_ = r.PutToolset("t2", "crm", []Tool{clientTool("other_tenant")}, nil)

	v := r.In(Scope{Tenant: "t1", Toolsets: []string{"crm", "cal"}, Inline: []chat.ToolSpec{{Name: "inline_one", Parameters: objSchema}}})
	want := []string{"a_builtin", "b_builtin", "z_crm", "m_crm", "cal_add", "inline_one"}
	if got := names(v.Specs()); !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
	// Adding a tool appends it to its toolset's run; nothing reshuffles.
	_ = r.PutToolset("t1", "crm", []Tool{clientTool("z_crm"), clientTool("m_crm"), clientTool("a_crm")}, nil)
	want = []string{"a_builtin", "b_builtin", "z_crm", "m_crm", "a_crm", "cal_add", "inline_one"}
	if got := names(v.Specs()); !slices.Equal(got, want) {
		t.Fatalf("after adding: %v, want %v", got, want)
	}
	if _, ok := v.Get("other_tenant"); ok {
		t.Fatal("a view reached another tenant's tool")
	}
	if _, ok := r.In(Scope{Tenant: "t1"}).Get("z_crm"); ok {
		t.Fatal("a chat that names no toolset reached one")
	}
	if res, err := v.Call(context.Background(), chat.ToolCall{ID: "1", Name: "cal_add", Arguments: `{}`}, Limits{}); err != nil || res.Text != "ran" {
		t.Fatalf("a toolset's tool runs through Call: %+v %v", res, err)
	}
	if res, err := v.Call(context.Background(), chat.ToolCall{ID: "1", Name: "z_crm", Arguments: `{}`}, Limits{}); err == nil || !res.IsError {
		t.Fatalf("a client tool is not run by agentd: %+v %v", res, err)
	}
}

func TestCheckScopeRefusesUnknownToolsetsAndCollidingInlineTools(t *testing.T) {
	r := NewRegistry()
	_ = r.PutToolset("t1", "crm", []Tool{clientTool("crm_find")}, nil)
	if err := r.CheckScope(Scope{Tenant: "t2", Toolsets: []string{"crm"}}); !errors.Is(err, ErrUnknownToolset) {
		t.Fatalf("another tenant's toolset: %v", err)
	}
	if err := r.CheckScope(Scope{Tenant: "t1", Toolsets: []string{"crm"}, Inline: []chat.ToolSpec{{Name: "crm_find", Parameters: objSchema}}}); err == nil {
		t.Fatal("an inline tool may not shadow a toolset's")
	}
	// Each toolset named is sent once: named twice, its tools would be too.
	if err := r.CheckScope(Scope{Tenant: "t1", Toolsets: []string{"crm", "crm"}}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a toolset named twice: %v", err)
	}
	// A lean request sends find_tools and the chat's own tools: one of them
	// named so would make two tools of one name, which providers refuse.
	if err := r.CheckScope(Scope{Tenant: "t1", Inline: []chat.ToolSpec{{Name: "find_tools", Parameters: objSchema}}}); err == nil {
		t.Fatal("an inline tool may not take find_tools' name")
	}
	if err := r.CheckScope(Scope{Tenant: "t1", Toolsets: []string{"crm"}, Inline: []chat.ToolSpec{{Name: "mine", Parameters: objSchema}}}); err != nil {
		t.Fatal(err)
	}
}

// A toolset PUT after a chat was set up may take the name of one of the
// chat's own tools: the view still lists each name once (the toolset's,
// which Get reaches), since providers refuse two tools of one name.
func TestAViewListsAToolOnceWhenAToolsetTakesAChatsOwnToolsName(t *testing.T) {
	r := NewRegistry()
	_ = r.PutToolset("t1", "crm", []Tool{clientTool("crm_find")}, nil)
	sc := Scope{Tenant: "t1", Toolsets: []string{"crm"}, Inline: []chat.ToolSpec{{Name: "crm_note", Parameters: objSchema}, {Name: "mine", Parameters: objSchema}}}
	if err := r.CheckScope(sc); err != nil {
		t.Fatal(err)
	}
	if err := r.PutToolset("t1", "crm", []Tool{clientTool("crm_find"), {Name: "crm_note", Description: "the toolset's", Parameters: objSchema, Client: true}}, nil); err != nil {
		t.Fatal(err)
	}
	v := r.In(sc)
	want := []string{"crm_find", "crm_note", "mine"}
	if got := names(v.Specs()); !slices.Equal(got, want) {
		t.Fatalf("specs = %v, want %v", got, want)
	}
	var listed []string
	for _, tl := range v.List() {
		listed = append(listed, tl.Name)
	}
	if !slices.Equal(listed, want) {
		t.Fatalf("list = %v, want %v", listed, want)
	}
	if tl, _ := v.Get("crm_note"); tl.Description != "the toolset's" {
		t.Fatalf("Get reaches %+v", tl)
	}
}

// Replacing a toolset whose old connection fails to close (its server
// gone) registers the new one all the same, and leaves its connection
// open: the hub read the close's error as a refusal and closed the new
// connection, though the new toolset was registered.
func TestAReplacedToolsetsCloseErrorRefusesNothing(t *testing.T) {
	r := NewRegistry()
	_ = r.PutToolset("t1", "mcp", []Tool{clientTool("a")}, func() error { return errors.New("the server is gone") })
	if err := r.PutToolset("t1", "mcp", []Tool{clientTool("b")}, func() error { return nil }); err != nil {
		t.Fatalf("replacing a toolset whose close fails: %v", err)
	}
	if ts, ok := r.Toolset("t1", "mcp"); !ok || len(ts) != 1 || ts[0].Name != "b" {
		t.Fatalf("the toolset after replacing: %v %v", ts, ok)
	}
}

func TestRemovingAndReplacingAToolsetClosesWhatItHeld(t *testing.T) {
	r := NewRegistry()
	closed := 0
	closer := func() error { closed++; return nil }
	_ = r.PutToolset("t1", "mcp", []Tool{clientTool("a")}, closer)
	_ = r.PutToolset("t1", "mcp", []Tool{clientTool("b")}, closer)
	if closed != 1 {
		t.Fatalf("replacing closed %d, want 1", closed)
	}
	if ok, _ := r.RemoveToolset("t1", "mcp"); !ok || closed != 2 {
		t.Fatalf("remove: ok %v closed %d", ok, closed)
	}
	_ = r.PutToolset("t1", "again", []Tool{clientTool("c")}, closer)
	if err := r.CloseToolsets(); err != nil || closed != 3 {
		t.Fatalf("close all: %v closed %d", err, closed)
	}
	if _, ok := r.Toolset("t1", "again"); ok {
		t.Fatal("a closed registry still holds toolsets")
	}
}

// TestATenantsToolsetsHoldAtMostTheLimitTogether: a toolset that would
// take its tenant's toolsets past LimitTenantTools is refused, and nothing
// changes; replacing a toolset counts only the others, and another tenant
// has its own count.
func TestATenantsToolsetsHoldAtMostTheLimitTogether(t *testing.T) {
	r := NewRegistry()
	r.LimitTenantTools(3)
	put := func(tenant, set string, tools ...string) error {
		ts := make([]Tool, len(tools))
		for i, n := range tools {
			ts[i] = clientTool(n)
		}
		return r.PutToolset(tenant, set, ts, nil)
	}
	if err := put("t1", "a", "a1", "a2"); err != nil {
		t.Fatal(err)
	}
	if err := put("t1", "b", "b1", "b2"); !errors.Is(err, ErrTenantTools) {
		t.Fatalf("a fourth tool of t1: %v, want ErrTenantTools", err)
	}
	if _, ok := r.Toolset("t1", "b"); ok {
		t.Fatal("the refused toolset was registered")
	}
	if err := put("t1", "a", "a1", "a2", "a3"); err != nil {
		t.Fatalf("replacing t1's only toolset with 3 tools: %v", err)
	}
	if err := put("t2", "a", "a1", "a2", "a3"); err != nil {
		t.Fatalf("t2's own 3 tools while t1 is at the limit: %v", err)
	}
}
