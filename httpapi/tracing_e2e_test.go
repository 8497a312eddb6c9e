package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// tracedScript calls the calculator for every message that asks, reports
// half of each tool round's input as cached, summarises and answers.
func tracedScript(r testkit.Received) testkit.Reply {
	switch requestKind(r) {
	case kindSummary:
		return testkit.Reply{Text: "What the person wants: the ledger kept.\nDecided or done: shipments listed.\nStill open: nothing."}
	case kindLearner:
		return testkit.Reply{Text: "[]"}
	case kindCondense:
		return testkit.Reply{Text: "TASK: none"}
	}
	last := r.Messages[len(r.Messages)-1]
	if last.Role == chat.RoleTool {
		text := "The result is " + last.Content + "."
		return testkit.Reply{Text: text, Usage: &chat.Usage{InputTokens: r.InputTokens, OutputTokens: testkit.CountTokens(text), CachedTokens: r.InputTokens / 2}}
	}
	return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "call_7", Name: "calculate", Arguments: `{"expression":"6*7"}`}}}
}

// A turn's spans form one tree under the request that sent it: the turn,
// then its fold, model calls and tool call, with the GenAI attributes an
// operator's tracing backend reads.
func TestATurnIsTracedAsOneTreeUnderItsRequest(t *testing.T) {
	const win = 4096
	fake := openaifake.New(openaifake.Options{Window: win, Script: tracedScript})
	defer fake.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), win), nil, hub.Options{InMemory: true, TracerProvider: tp})
	// The client's own trace context: the request's span is its child.
	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	d.Client.HTTP = &http.Client{Transport: withHeader{"traceparent", "00-" + callerTrace + "-00f067aa0ba902b7-01"}}
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Each message is longer than the one before, by a twenty-fifth of the
	// window: within a few turns one does not fit beside the ones before,
	// and its turn folds first.
	filler := strings.Repeat("the ledger lists each shipment with its weight and carrier; ", 12)
	for i := range 8 {
		res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "please calculate six times seven. " + strings.Repeat(filler, i+1)}, nil)
		if err != nil || res.Problem != nil {
			t.Fatalf("turn %d: %v %+v", i, err, res.Problem)
		}
		spans := turnSpans(t, exp, res.TurnID)
		if byName(spans.children, "fold") == nil {
			continue // this turn fitted; the next one is longer
		}
		checkTurnTree(t, spans, c.ID, res.TurnID)
		if got := spans.request.SpanContext.TraceID().String(); got != callerTrace || spans.request.Parent.SpanID().String() != "00f067aa0ba902b7" {
			t.Fatalf("the request's span is in trace %s under %s, not the caller's", got, spans.request.Parent.SpanID())
		}
		return
	}
	t.Fatal("no turn folded in 8 turns of growing messages on a 4K window")
}

type turnTree struct {
	request, turn tracetest.SpanStub
	children      []tracetest.SpanStub // the turn's
	all           tracetest.SpanStubs
}

// turnSpans waits until the turn's span and its request's have ended (the
// turn's ends once the session says the turn is over, the request's once
// its handler returns: either may come after the client has the answer)
// and returns them with the turn's children, which end before the turn.
func turnSpans(t *testing.T, exp *tracetest.InMemoryExporter, turnID string) turnTree {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		all := exp.GetSpans()
		for _, s := range all {
			if s.Name == "turn" && attr(s, "agentd.turn_id").AsString() == turnID {
				tree := turnTree{turn: s, all: all}
				found := false
				for _, o := range all {
					if o.SpanContext.SpanID() == s.Parent.SpanID() {
						tree.request, found = o, true
					}
					if o.Parent.SpanID() == s.SpanContext.SpanID() {
						tree.children = append(tree.children, o)
					}
				}
				if found {
					return tree
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn %s: its span and its request's did not both end within a minute", turnID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func checkTurnTree(t *testing.T, tr turnTree, chatID, turnID string) {
	t.Helper()
	if tr.request.Name != "POST /v1/chats/{id}/messages" || tr.request.SpanKind != trace.SpanKindServer ||
		attr(tr.request, "http.response.status_code").AsInt64() != 200 {
		t.Fatalf("the turn's parent is %q (%v, status %v), want the request's server span", tr.request.Name, tr.request.SpanKind, attr(tr.request, "http.response.status_code"))
	}
	if attr(tr.turn, "agentd.chat_id").AsString() != chatID {
		t.Errorf("turn span attributes %v", tr.turn.Attributes)
	}
	for _, s := range append(tr.children, tr.turn) {
		if s.SpanContext.TraceID() != tr.request.SpanContext.TraceID() {
			t.Errorf("span %q is in another trace", s.Name)
		}
	}
	var calls []tracetest.SpanStub
	for _, s := range tr.children {
		if s.Name == "chat m" {
			calls = append(calls, s)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("the turn has %d model calls, want 2 (the tool call, the answer); children: %v", len(calls), names(tr.children))
	}
	for _, s := range calls {
		want := map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "fake", "gen_ai.system": "fake", "gen_ai.request.model": "m"}
		for k, v := range want {
			if got := attr(s, k).AsString(); got != v {
				t.Errorf("model call: %s = %q, want %q", k, got, v)
			}
		}
		if attr(s, "gen_ai.usage.input_tokens").AsInt64() <= 0 || attr(s, "gen_ai.usage.output_tokens").AsInt64() <= 0 || s.SpanKind != trace.SpanKindClient {
			t.Errorf("model call without its usage or kind: %v", s.Attributes)
		}
	}
	last := calls[0]
	if calls[1].EndTime.After(last.EndTime) {
		last = calls[1]
	}
	if attr(last, "gen_ai.usage.cache_read.input_tokens").AsInt64() <= 0 {
		t.Errorf("the answer's call does not carry the cached tokens the provider reported: %v", last.Attributes)
	}
	tool := byName(tr.children, "execute_tool calculate")
	if tool == nil || attr(*tool, "gen_ai.tool.name").AsString() != "calculate" || attr(*tool, "gen_ai.tool.call.id").AsString() != "call_7" ||
		attr(*tool, "gen_ai.operation.name").AsString() != "execute_tool" {
		t.Fatalf("no tool span with its name and call id under the turn: %v", names(tr.children))
	}
	fold := byName(tr.children, "fold")
	if attr(*fold, "agentd.fold.messages").AsInt64() <= 0 {
		t.Errorf("fold span attributes %v", fold.Attributes)
	}
	// The fold's own model call, the summary, is the fold's child.
	summarised := false
	for _, s := range tr.all {
		if s.Parent.SpanID() == fold.SpanContext.SpanID() && s.Name == "chat m" && attr(s, "gen_ai.usage.output_tokens").AsInt64() > 0 {
			summarised = true
		}
	}
	if !summarised {
		t.Error("the fold's summarising call is not traced under the fold")
	}
}

func byName(spans []tracetest.SpanStub, name string) *tracetest.SpanStub {
	for i := range spans {
		if spans[i].Name == name {
			return &spans[i]
		}
	}
	return nil
}

func names(spans []tracetest.SpanStub) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}
