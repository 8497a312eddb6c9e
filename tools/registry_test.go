package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
)

type address struct {
	City string `json:"city" jsonschema:"description=City name"`
	Zip  string `json:"zip,omitempty"`
}

type sampleArgs struct {
	Query   string    `json:"query" jsonschema:"description=What to look for,minLength=1"`
	Limit   int       `json:"limit,omitempty" jsonschema:"description=How many results,minimum=1,maximum=50"`
	Mode    string    `json:"mode,omitempty" jsonschema:"enum=fast,enum=exact"`
	Home    address   `json:"home"`
	Visited []address `json:"visited,omitempty"`
	Exact   bool      `json:"exact,omitempty"`
}

func TestSchemaFor(t *testing.T) {
	raw, err := SchemaFor[sampleArgs]()
	if err != nil {
		t.Fatal(err)
	}
	for _, banned := range []string{`"$defs"`, `"$ref"`, `"$schema"`, `"definitions"`} {
		if strings.Contains(string(raw), banned) {
			t.Errorf("schema contains %s; want everything inlined: %s", banned, raw)
		}
	}
	var s struct {
		Type       string         `json:"type"`
		Required   []string       `json:"required"`
		Additional *bool          `json:"additionalProperties"`
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" {
		t.Errorf("type = %q, want object", s.Type)
	}
	// query and home have no omitempty; every other field does.
	slices.Sort(s.Required)
	if want := []string{"home", "query"}; !slices.Equal(s.Required, want) {
		t.Errorf("required = %v, want %v", s.Required, want)
	}
	if s.Additional == nil || *s.Additional {
		t.Errorf("additionalProperties should be false, so unknown fields are refused")
	}
	prop := func(path ...string) map[string]any {
		var cur any = s.Properties
		for _, p := range path {
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("no %v in schema", path)
			}
			cur = m[p]
		}
		m, _ := cur.(map[string]any)
		return m
	}
	tests := []struct {
		name string
		path []string
		key  string
		want any
	}{
		{"description from tag", []string{"query"}, "description", "What to look for"},
		{"integer type", []string{"limit"}, "type", "integer"},
		{"minimum from tag", []string{"limit"}, "minimum", 1.0},
		{"nested struct inlined", []string{"home"}, "type", "object"},
		{"nested description", []string{"home", "properties", "city"}, "description", "City name"},
		{"array items inlined", []string{"visited", "items"}, "type", "object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := prop(tc.path...)[tc.key]
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%v.%s = %v, want %v", tc.path, tc.key, got, tc.want)
			}
		})
	}
	if req := prop("home")["required"]; fmt.Sprint(req) != "[city]" {
		t.Errorf("home.required = %v, want [city] (zip is omitempty)", req)
	}
}

func TestSchemaForRejectsNonStruct(t *testing.T) {
	if _, err := SchemaFor[string](); err == nil {
		t.Fatal("SchemaFor[string] succeeded; tool parameters must be an object")
	}
	r := NewRegistry()
	err := Register(r, "bad", "d", func(context.Context, []int) (Result, error) { return Result{}, nil })
	if err == nil {
		t.Fatal("Register with a slice argument type succeeded")
	}
}

// newTestRegistry registers tools that exercise every path of Run.
func newTestRegistry(t *testing.T) *Registry {
	t.Helper()
	r := NewRegistry()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(Register(r, "search", "Search things", func(_ context.Context, a sampleArgs) (Result, error) {
		return Result{Text: fmt.Sprintf("query=%s limit=%d city=%s", a.Query, a.Limit, a.Home.City)}, nil
	}))
	must(Register(r, "noargs", "No arguments", func(context.Context, struct{}) (Result, error) {
		return Result{Text: "ok"}, nil
	}))
	must(Register(r, "block", "Blocks until cancelled", func(ctx context.Context, _ struct{}) (Result, error) {
		<-ctx.Done()
		return Result{}, ctx.Err()
	}))
	must(Register(r, "stubborn", "Ignores its context", func(context.Context, struct{}) (Result, error) {
		time.Sleep(time.Hour)
		return Result{}, nil
	}))
	must(Register(r, "boom", "Panics", func(context.Context, struct{}) (Result, error) {
		var m map[string]int
		//lint:ignore SA5000 the nil-map write is the point: a real runtime panic
		m["x"] = 1 // nil map write: a real runtime panic
		return Result{}, nil
	}))
	must(Register(r, "broken", "Returns a Go error", func(context.Context, struct{}) (Result, error) {
		return Result{}, errors.New("disk on fire")
	}))
	must(Register(r, "big", "Returns a long text", func(context.Context, struct{}) (Result, error) {
		return Result{Text: "HEAD" + strings.Repeat("x", 10000) + "TAIL"}, nil
	}))
	return r
}

func TestRun(t *testing.T) {
	r := newTestRegistry(t)
	tests := []struct {
		name      string
		tool      string
		args      string
		lim       Limits
		wantError bool
		// every fragment must appear in the result text
		want []string
		// set when the caller should get a Go error to log
		wantGoErr bool
	}{
		{name: "valid call", tool: "search", args: `{"query":"tea","limit":3,"home":{"city":"Oslo"}}`,
			want: []string{"query=tea", "limit=3", "city=Oslo"}},
		{name: "unknown tool names the alternatives", tool: "serch", args: `{}`, wantError: true, wantGoErr: true,
			want: []string{`"serch"`, "search"}},
		{name: "invalid JSON", tool: "search", args: `{"query": "tea"`, wantError: true,
			want: []string{"search", "not valid JSON"}},
		{name: "array instead of object", tool: "search", args: `["tea"]`, wantError: true,
			want: []string{"must be a JSON object", "an array"}},
		{name: "wrong type", tool: "search", args: `{"query":42,"home":{"city":"Oslo"}}`, wantError: true,
			want: []string{"search", `"query"`, "string", "an integer"}},
		{name: "fraction for integer", tool: "search", args: `{"query":"a","limit":2.5,"home":{"city":"Oslo"}}`, wantError: true,
			want: []string{`"limit"`, "integer"}},
		{name: "unknown field", tool: "search", args: `{"query":"a","home":{"city":"Oslo"},"colour":"red"}`, wantError: true,
			want: []string{`"colour"`, "query"}},
		{name: "unknown nested field", tool: "search", args: `{"query":"a","home":{"city":"Oslo","planet":"Earth"}}`, wantError: true,
			want: []string{`"planet"`}},
		{name: "missing required", tool: "search", args: `{"query":"a"}`, wantError: true,
			want: []string{`"home" is required`}},
		{name: "missing nested required", tool: "search", args: `{"query":"a","home":{}}`, wantError: true,
			want: []string{`"home.city" is required`}},
		{name: "below minimum", tool: "search", args: `{"query":"a","limit":0,"home":{"city":"Oslo"}}`, wantError: true,
			want: []string{`"limit"`, "at least 1"}},
		{name: "not in enum", tool: "search", args: `{"query":"a","mode":"slow","home":{"city":"Oslo"}}`, wantError: true,
			want: []string{`"mode"`, `"fast"`, `"exact"`}},
		{name: "wrong type in array item", tool: "search", args: `{"query":"a","home":{"city":"Oslo"},"visited":[{"city":1}]}`, wantError: true,
			want: []string{`"visited[0].city"`}},
		{name: "empty string too short", tool: "search", args: `{"query":"","home":{"city":"Oslo"}}`, wantError: true,
			want: []string{`"query"`, "at least 1"}},
		{name: "empty arguments mean no arguments", tool: "noargs", args: ``, want: []string{"ok"}},
		{name: "null arguments mean no arguments", tool: "noargs", args: `null`, want: []string{"ok"}},
		{name: "timeout of a tool that honours ctx", tool: "block", args: `{}`, lim: Limits{Timeout: 20 * time.Millisecond},
			wantError: true, wantGoErr: true, want: []string{"block", "time limit"}},
		{name: "timeout of a tool that ignores ctx", tool: "stubborn", args: `{}`, lim: Limits{Timeout: 20 * time.Millisecond},
			wantError: true, wantGoErr: true, want: []string{"stubborn", "time limit"}},
		{name: "panic recovered", tool: "boom", args: `{}`, wantError: true, wantGoErr: true,
			want: []string{"boom", "internal error"}},
		{name: "go error from tool", tool: "broken", args: `{}`, wantError: true, wantGoErr: true,
			want: []string{"broken", "disk on fire"}},
		{name: "result capped keeps head and tail", tool: "big", args: `{}`, lim: Limits{MaxResultBytes: 200},
			want: []string{"HEAD", "TAIL", "bytes cut"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.Call(context.Background(), chat.ToolCall{ID: "c1", Name: tc.tool, Arguments: tc.args}, tc.lim)
			if res.IsError != tc.wantError {
				t.Errorf("IsError = %v, want %v (text %q)", res.IsError, tc.wantError, res.Text)
			}
			if (err != nil) != tc.wantGoErr {
				t.Errorf("Go error = %v, want one: %v", err, tc.wantGoErr)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Text, w) {
					t.Errorf("result %q does not mention %q", res.Text, w)
				}
			}
			if tc.lim.MaxResultBytes > 0 && len(res.Text) > tc.lim.MaxResultBytes {
				t.Errorf("result is %d bytes, over the cap of %d", len(res.Text), tc.lim.MaxResultBytes)
			}
			// Run gives the model exactly what Call does.
			if again := r.Run(context.Background(), chat.ToolCall{Name: tc.tool, Arguments: tc.args}, tc.lim); again.IsError != res.IsError {
				t.Errorf("Run IsError = %v, Call IsError = %v", again.IsError, res.IsError)
			}
		})
	}
}

func TestCallReportsPanicWithStack(t *testing.T) {
	r := newTestRegistry(t)
	_, err := r.Call(context.Background(), chat.ToolCall{Name: "boom", Arguments: "{}"}, Limits{})
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v, want a *PanicError", err)
	}
	if pe.Tool != "boom" || !strings.Contains(string(pe.Stack), "registry_test.go") {
		t.Errorf("panic error lacks the tool or the stack of the panicking code: tool=%q stack=%q", pe.Tool, pe.Stack)
	}
}

func TestRunCancelledByCaller(t *testing.T) {
	r := newTestRegistry(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := r.Run(ctx, chat.ToolCall{Name: "block", Arguments: "{}"}, Limits{Timeout: time.Hour})
	if !res.IsError || !strings.Contains(res.Text, "cancelled") {
		t.Fatalf("result = %+v, want a cancelled error result", res)
	}
}

func TestAdd(t *testing.T) {
	run := func(context.Context, json.RawMessage) (Result, error) { return Result{}, nil }
	tests := []struct {
		name    string
		tool    Tool
		wantErr bool
	}{
		{"valid", Tool{Name: "ok_tool-1", Run: run}, false},
		{"empty name", Tool{Name: "", Run: run}, true},
		{"space in name", Tool{Name: "two words", Run: run}, true},
		{"dot in name", Tool{Name: "a.b", Run: run}, true},
		{"name too long", Tool{Name: strings.Repeat("a", 65), Run: run}, true},
		{"64 chars is fine", Tool{Name: strings.Repeat("b", 64), Run: run}, false},
		{"nil run", Tool{Name: "norun"}, true},
		{"schema not an object", Tool{Name: "badschema", Parameters: json.RawMessage(`[1]`), Run: run}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := NewRegistry().Add(tc.tool)
			if (err != nil) != tc.wantErr {
				t.Errorf("Add error = %v, want error %v", err, tc.wantErr)
			}
		})
	}
	r := NewRegistry()
	if err := r.Add(Tool{Name: "dup", Run: run}); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(Tool{Name: "dup", Run: run, Source: "mcp:x"}); err == nil {
		t.Error("second Add of the same name succeeded")
	}
	if got, _ := r.Get("dup"); got.Source != SourceGo {
		t.Errorf("duplicate replaced the first tool: source %q", got.Source)
	}
}

func TestListAndSpecs(t *testing.T) {
	r := NewRegistry()
	run := func(context.Context, json.RawMessage) (Result, error) { return Result{}, nil }
	for _, n := range []string{"zeta", "alpha", "mid"} {
		if err := r.Add(Tool{Name: n, Description: "tool " + n, Run: run}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, tl := range r.List() {
		names = append(names, tl.Name)
	}
	if want := []string{"alpha", "mid", "zeta"}; !slices.Equal(names, want) {
		t.Errorf("List = %v, want sorted %v", names, want)
	}
	tests := []struct {
		name  string
		query []string
		want  []string
	}{
		{"all sorted when none named", nil, []string{"alpha", "mid", "zeta"}},
		{"order given kept", []string{"zeta", "alpha"}, []string{"zeta", "alpha"}},
		{"unknown and repeated skipped", []string{"mid", "nope", "mid"}, []string{"mid"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range r.Specs(tc.query...) {
				got = append(got, s.Name)
				if s.Description != "tool "+s.Name || len(s.Parameters) == 0 {
					t.Errorf("spec %s incomplete: %+v", s.Name, s)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Specs(%v) = %v, want %v", tc.query, got, tc.want)
			}
		})
	}
	// The kept specs are the caller's to change, and follow every change.
	all := r.Specs()
	all[0].Name = "changed"
	if again := r.Specs(); again[0].Name != "alpha" {
		t.Errorf("a caller's change reached the registry: %v", again[0].Name)
	}
	if err := r.Add(Tool{Name: "beta", Description: "tool beta", Run: run}); err != nil {
		t.Fatal(err)
	}
	r.Remove("zeta")
	names = names[:0]
	for _, s := range r.Specs() {
		names = append(names, s.Name)
	}
	if want := []string{"alpha", "beta", "mid"}; !slices.Equal(names, want) {
		t.Errorf("after an add, a remove and a caller's change: %v, want %v", names, want)
	}
}

// TestConcurrentUse is for the race detector: registering, listing and
// running at once.
func TestConcurrentUse(t *testing.T) {
	r := newTestRegistry(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			name := fmt.Sprintf("dyn_%d", i)
			if err := Register(r, name, "d", func(context.Context, struct{}) (Result, error) { return Result{Text: name}, nil }); err != nil {
				t.Error(err)
			}
			for range 20 {
				_ = r.List()
				_ = r.Specs("search", name)
				if res := r.Run(context.Background(), chat.ToolCall{Name: name}, Limits{}); res.Text != name {
					t.Errorf("run %s = %q", name, res.Text)
				}
			}
		})
	}
	wg.Wait()
	if got := r.Len(); got != 7+16 {
		t.Errorf("Len = %d, want %d", got, 7+16)
	}
}

func TestCallInfo(t *testing.T) {
	if _, ok := CallInfoFrom(context.Background()); ok {
		t.Error("CallInfo found in a bare context")
	}
	want := CallInfo{Tenant: "acme", ChatID: "c42", Seq: 7}
	r := NewRegistry()
	var got CallInfo
	if err := Register(r, "who", "d", func(ctx context.Context, _ struct{}) (Result, error) {
		got, _ = CallInfoFrom(ctx)
		return Result{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	r.Run(WithCallInfo(context.Background(), want), chat.ToolCall{Name: "who"}, Limits{Timeout: time.Minute})
	if got != want {
		t.Errorf("tool saw %+v, want %+v (it must pass through Run's timeout context)", got, want)
	}
}

func TestCallRefusesOversizeArgumentsUnread(t *testing.T) {
	r := NewRegistry()
	ran := false
	if err := r.Add(Tool{Name: "echo", Parameters: []byte(`{"type":"object"}`), Run: func(context.Context, json.RawMessage) (Result, error) {
		ran = true
		return Result{Text: "ran"}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	lim := Limits{MaxArgBytes: 64}
	res := r.Run(context.Background(), chat.ToolCall{Name: "echo", Arguments: `{"x":"` + strings.Repeat("a", 100) + `"}`}, lim)
	if ran || !res.IsError || !strings.Contains(res.Text, "over the limit of 64 bytes") {
		t.Fatalf("oversize call: ran %v, %+v", ran, res)
	}
	if res := r.Run(context.Background(), chat.ToolCall{Name: "echo", Arguments: `{"x":"a"}`}, lim); res.IsError || !ran {
		t.Fatalf("a call within the limit: %+v", res)
	}
	short := ShortArguments(`{"x":"`+strings.Repeat("a", 100)+`"}`, 64)
	var v map[string]string
	if err := json.Unmarshal([]byte(short), &v); err != nil || !strings.Contains(v["note"], "108 bytes") || len(v["cut_arguments_head"]) > 32 {
		t.Fatalf("ShortArguments = %s (%v)", short, err)
	}
}
