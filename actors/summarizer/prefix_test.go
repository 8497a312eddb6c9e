package summarizer

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/window"
)

// callModel records requests and answers a tool call to the first one when
// callFirst is set, a summary otherwise.
type callModel struct {
	mu        sync.Mutex
	reqs      []providers.Request
	callFirst bool
}

func (c *callModel) Stream(_ context.Context, req providers.Request, _ func(providers.Event)) (providers.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, req)
	if c.callFirst && len(c.reqs) == 1 {
		return providers.Response{Message: chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "x", Name: "t", Arguments: "{}"}}}}, nil
	}
	return providers.Response{Message: chat.Message{Role: chat.RoleAssistant, Content: "What the person wants: bees."}}, nil
}

func (c *callModel) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

type oneCatalog struct {
	model  providers.Client
	window int
}

func (c oneCatalog) Resolve(ref string) (providers.Client, providers.ModelInfo, error) {
	_, id, _ := strings.Cut(ref, "/")
	return c.model, providers.ModelInfo{ID: id, Window: c.window}, nil
}
func (oneCatalog) SummaryModels(ref string) []string                     { return []string{ref} }
func (oneCatalog) Learn(_ context.Context, _ string, w int) (int, error) { return w, nil }

// TestAFoldAsksTheChatsOwnModelAfterItsOwnRequest: with the chat's request
// prefix and the chat's own model first, one request is the prefix byte for
// byte plus the summariser's question (what the provider caches); another
// model, a prefix too big for the answer's room, or an answer that is no
// summary send the folded turns as lines instead.
func TestAFoldAsksTheChatsOwnModelAfterItsOwnRequest(t *testing.T) {
	framed := window.SummaryOpen + "\nold facts\n" + window.SummaryClose + "\n\nhello"
	prefix := &Prefix{System: "You help.", Tools: []chat.ToolSpec{{Name: "t", Parameters: []byte(`{"type":"object"}`)}},
		Messages: []chat.Message{{Seq: 4, Role: chat.RoleUser, Content: framed}, {Seq: 5, Role: chat.RoleAssistant, Content: "hi"}},
		Tokens:   60, CacheKey: "c"}
	turns := []chat.Message{{Seq: 4, Role: chat.RoleUser, Content: "hello"}, {Seq: 5, Role: chat.RoleAssistant, Content: "hi"}}
	for _, tc := range []struct {
		name       string
		models     []string
		prefix     *Prefix
		callFirst  bool
		wantPrefix bool // the first request is the chat's prefix
		wantReqs   int
	}{
		{"own model", []string{"p/m"}, prefix, false, true, 1},
		{"another model", []string{"p/small"}, prefix, false, false, 1},
		{"no prefix", []string{"p/m"}, nil, false, false, 1},
		{"too big", []string{"p/m"}, &Prefix{System: prefix.System, Messages: prefix.Messages, Tokens: 7000}, false, false, 1},
		{"not a summary", []string{"p/m"}, prefix, true, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &callModel{callFirst: tc.callFirst}
			cfg := Config{Catalog: oneCatalog{model: m, window: 8000}, Log: zerolog.Nop()}
			res := run(context.Background(), cfg, &Fold{ChatID: "c", Model: "p/m", Summary: "old facts", Turns: turns, Prefix: tc.prefix},
				tc.models, []chan struct{}{make(chan struct{}, 1)})
			if !res.OK || len(m.reqs) != tc.wantReqs || res.Requests != tc.wantReqs {
				t.Fatalf("ok %v (%s), %d requests (reported %d), want %d", res.OK, res.Err, len(m.reqs), res.Requests, tc.wantReqs)
			}
			first, last := m.reqs[0], m.reqs[len(m.reqs)-1]
			if got := first.System == prefix.System; got != tc.wantPrefix {
				t.Fatalf("first request's system %q: the chat's own %v, want %v", first.System, got, tc.wantPrefix)
			}
			if tc.wantPrefix {
				n := len(prefix.Messages)
				if len(first.Messages) != n+1 || first.Messages[0].Content != framed || first.Messages[1].Content != "hi" ||
					len(first.Tools) != 1 || first.CacheKey != "c" {
					t.Fatalf("the request is not the chat's prefix: %+v", first)
				}
				q := first.Messages[n]
				if q.Role != chat.RoleUser || !strings.HasPrefix(q.Content, PrefixMark) || !strings.Contains(q.Content, "summary so far is in") {
					t.Fatalf("the question after the prefix: %+v", q)
				}
			}
			if last.System != prefix.System && (last.System != Instructions || !strings.Contains(last.Messages[0].Content, "old facts")) {
				t.Fatalf("the fallback is not the folded turns as lines: %+v", last)
			}
		})
	}
}
