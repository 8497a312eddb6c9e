package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
)

func TestTracingIsOffUnlessConfigured(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tp, shutdown, err := NewTracerProvider(context.Background(), configs.Tracing{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	_, span := Tracer(tp).Start(context.Background(), "turn")
	defer span.End()
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatal("with no endpoint configured a span is recorded")
	}
}

// Spans reach an OTLP/HTTP collector at the configured endpoint, or at the
// one the standard variable names.
func TestSpansAreExportedOverOTLPHTTP(t *testing.T) {
	for name, viaEnv := range map[string]bool{"yaml": false, "env": true} {
		t.Run(name, func(t *testing.T) {
			got := make(chan string, 16)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type")
			}))
			defer srv.Close()
			cfg := configs.Tracing{Endpoint: srv.URL}
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
			if viaEnv {
				cfg = configs.Tracing{}
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
			}
			tp, shutdown, err := NewTracerProvider(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, span := Tracer(tp).Start(context.Background(), "turn")
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case req := <-got:
				if req != "POST /v1/traces application/x-protobuf" {
					t.Fatalf("the collector got %q", req)
				}
			default:
				t.Fatal("shutdown returned before the span reached the collector")
			}
		})
	}
}

// TestAModelCallsSpanCountsItsReasoningTokens: a model call's span has the
// tokens the provider reported, its reasoning tokens apart from the rest
// of its output (gen_ai.usage.reasoning.output_tokens), as its cached
// input tokens are.
func TestAModelCallsSpanCountsItsReasoningTokens(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	_, span := StartModelCall(context.Background(), Tracer(tp), "openai", "o4")
	EndModelCall(span, chat.Usage{InputTokens: 100, OutputTokens: 40, CachedTokens: 30, ReasoningTokens: 25}, "stop", nil)
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	got := map[string]int64{}
	for _, kv := range ended[0].Attributes() {
		got[string(kv.Key)] = kv.Value.AsInt64()
	}
	for key, want := range map[string]int64{"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 40,
		"gen_ai.usage.cache_read.input_tokens": 30, "gen_ai.usage.reasoning.output_tokens": 25} {
		if got[key] != want {
			t.Fatalf("the span's %s is %d, want %d (attributes %v)", key, got[key], want, got)
		}
	}
}

// TestAModelCallUntracedBuildsNoSpan: with tracing off, a model call's
// span costs the context that carries it and nothing else (its name and
// attributes, which a no-op span drops, were built every call), and the
// context carries what the no-op tracer gives.
func TestAModelCallUntracedBuildsNoSpan(t *testing.T) {
	tr := Tracer(nil)
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}))
	got, span := StartModelCall(ctx, tr, "openai", "o4")
	want, wantSpan := tr.Start(ctx, "chat o4")
	if span.IsRecording() || !span.SpanContext().Equal(wantSpan.SpanContext()) ||
		!trace.SpanContextFromContext(got).Equal(trace.SpanContextFromContext(want)) {
		t.Fatalf("untraced: span context %v, want %v", span.SpanContext(), wantSpan.SpanContext())
	}
	if n := testing.AllocsPerRun(100, func() {
		_, span := StartModelCall(ctx, tr, "openai", "o4")
		EndModelCall(span, chat.Usage{InputTokens: 100, OutputTokens: 40}, "stop", nil)
	}); n > 1 {
		t.Errorf("an untraced model call's span allocates %v times, want at most 1", n)
	}
}

// BenchmarkModelCallSpanUntraced is what every model call's span costs
// with tracing off.
func BenchmarkModelCallSpanUntraced(b *testing.B) {
	tr, ctx := Tracer(nil), context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := StartModelCall(ctx, tr, "openai", "o4")
		EndModelCall(span, chat.Usage{InputTokens: 100, OutputTokens: 40}, "stop", nil)
	}
}
