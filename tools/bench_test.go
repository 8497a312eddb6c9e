package tools

import (
	"context"
	"testing"

	"github.com/agentd/agentd/chat"
)

// BenchmarkRunTyped measures what the registry adds around a trivial typed
// tool: lookup, schema check, strict decode, the guarding goroutine.
func BenchmarkRunTyped(b *testing.B) {
	r := NewRegistry()
	if err := Register(r, "search", "d", func(_ context.Context, a sampleArgs) (Result, error) {
		return Result{Text: a.Query}, nil
	}); err != nil {
		b.Fatal(err)
	}
	call := chat.ToolCall{Name: "search", Arguments: `{"query":"tea","limit":3,"home":{"city":"Oslo"},"visited":[{"city":"Rome"}]}`}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := r.Run(ctx, call, Limits{Timeout: 30e9}); res.IsError {
			b.Fatal(res.Text)
		}
	}
}

// BenchmarkSpecs150 is the cost of building the tool list of a request from
// a registry of 150 tools (issue 8's acceptance size).
func BenchmarkSpecs150(b *testing.B) {
	r := NewRegistry()
	for i := range 150 {
		name := "tool_" + string(rune('a'+i%26)) + formatNumber(float64(i))
		if err := Register(r, name, "d", func(context.Context, sampleArgs) (Result, error) { return Result{}, nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(r.Specs()) != 150 {
			b.Fatal("wrong count")
		}
	}
}
