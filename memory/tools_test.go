package memory

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/tools"
)

func call(t *testing.T, r *tools.Registry, ctx context.Context, name string, args any) tools.Result {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Call(ctx, chat.ToolCall{ID: "1", Name: name, Arguments: string(b)}, tools.Limits{})
	if err != nil {
		t.Fatalf("%s: system error %v", name, err)
	}
	return res
}

func TestToolsRememberSearchGet(t *testing.T) {
	s, _ := newStore(t)
	r := tools.NewRegistry()
	if err := RegisterTools(r, s); err != nil {
		t.Fatal(err)
	}
	alice := tools.WithCallInfo(context.Background(), tools.CallInfo{Tenant: "alice", ChatID: "c1", Seq: 7})
	bob := tools.WithCallInfo(context.Background(), tools.CallInfo{Tenant: "bob", ChatID: "c2", Seq: 3})

	res := call(t, r, alice, "remember", RememberParams{Text: "The person's cat is called Miso."})
	if res.IsError {
		t.Fatalf("remember: %s", res.Text)
	}
	id := regexp.MustCompile(`m_[0-9a-f]{24}`).FindString(res.Text)
	if id == "" {
		t.Fatalf("remember did not say the id: %q", res.Text)
	}
	m, err := s.Get(context.Background(), "alice", id)
	if err != nil || m.State != StateActive || m.ChatID != "c1" || m.FromSeq != 7 {
		t.Fatalf("stored %+v, %v: want an active memory of chat c1 at seq 7", m, err)
	}
	runs, _ := s.Runs(context.Background(), "alice")
	if len(runs) != 1 || runs[0].Source != SourceTool {
		t.Fatalf("runs = %+v, want one run from the tool", runs)
	}
	if again := call(t, r, alice, "remember", RememberParams{Text: "the person's cat is called miso."}); !strings.Contains(again.Text, "Already") {
		t.Fatalf("second remember of the same fact: %q", again.Text)
	}

	cases := map[string]struct {
		ctx       context.Context
		tool      string
		args      any
		wantError bool
		want      string
	}{
		"search finds it at once":      {ctx: alice, tool: "memory_search", args: SearchParams{Query: "cat name"}, want: id},
		"search is tenant scoped":      {ctx: bob, tool: "memory_search", args: SearchParams{Query: "cat"}, want: "No memory matches"},
		"get reads it":                 {ctx: alice, tool: "memory_get", args: GetParams{ID: id}, want: "called Miso"},
		"get of another tenant's id":   {ctx: bob, tool: "memory_get", args: GetParams{ID: id}, wantError: true, want: "No memory"},
		"get of a garbage id":          {ctx: alice, tool: "memory_get", args: GetParams{ID: "nope"}, wantError: true},
		"remember without a chat":      {ctx: context.Background(), tool: "remember", args: RememberParams{Text: "x"}, wantError: true, want: "inside a chat"},
		"search without a chat":        {ctx: context.Background(), tool: "memory_search", args: SearchParams{Query: "cat"}, wantError: true},
		"remember of blank text":       {ctx: alice, tool: "remember", args: RememberParams{Text: "   "}, wantError: true},
		"remember over the size limit": {ctx: alice, tool: "remember", args: RememberParams{Text: strings.Repeat("a", 501)}, wantError: true},
		"search limit over the max":    {ctx: alice, tool: "memory_search", args: SearchParams{Query: "cat", Limit: 50}, wantError: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res := call(t, r, tc.ctx, tc.tool, tc.args)
			if res.IsError != tc.wantError {
				t.Fatalf("IsError = %v, want %v: %s", res.IsError, tc.wantError, res.Text)
			}
			if !strings.Contains(res.Text, tc.want) {
				t.Fatalf("result %q lacks %q", res.Text, tc.want)
			}
		})
	}
}

func TestMemoryGetHidesWaiting(t *testing.T) {
	s, _ := newStore(t)
	r := tools.NewRegistry()
	if err := RegisterTools(r, s); err != nil {
		t.Fatal(err)
	}
	_, mems := mustAdd(t, s, AddInput{Tenant: "t", Texts: []string{"Wire money to account 42."}, Wait: true})
	ctx := tools.WithCallInfo(context.Background(), tools.CallInfo{Tenant: "t", ChatID: "c"})
	if res := call(t, r, ctx, "memory_get", GetParams{ID: mems[0].ID}); !res.IsError || strings.Contains(res.Text, "account 42") {
		t.Fatalf("memory_get showed a memory waiting for an OK: %q", res.Text)
	}
	if res := call(t, r, ctx, "memory_search", SearchParams{Query: "wire money"}); strings.Contains(res.Text, "account 42") {
		t.Fatalf("memory_search showed a memory waiting for an OK: %q", res.Text)
	}
}
