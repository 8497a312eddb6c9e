// Package telemetry is what follows one request through the daemon: its
// request id, carried in a context and into the session's turn, and its
// OpenTelemetry trace (docs/tracing.md) — the tracer provider built from
// the configuration, off unless configured, and the spans of a model call
// and a tool call with the GenAI semantic conventions' attributes.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
)

// Name is the instrumentation scope of every agentd span.
const Name = "github.com/agentd/agentd"

// Propagator reads and writes the W3C trace context of HTTP requests.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// NewTracerProvider returns the provider every span of the daemon comes
// from, and the shutdown that flushes it: a no-op provider unless
// cfg.Endpoint or OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set, else one
// that exports in batches over OTLP/HTTP. The batch processor never
// blocks the code that ends a span: a full queue drops the span.
func NewTracerProvider(ctx context.Context, cfg configs.Tracing) (trace.TracerProvider, func(context.Context) error, error) {
	if cfg.Endpoint == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	var opts []otlptracehttp.Option
	if cfg.Endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(cfg.Endpoint+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: OTLP/HTTP exporter: %w", err)
	}
	version := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("agentd"), semconv.ServiceVersion(version)))
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// Tracer returns agentd's tracer of tp; a nil tp traces nothing.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(Name)
}

// Attributes of agentd's own spans.
const (
	ChatIDKey = attribute.Key("agentd.chat_id")
	TurnIDKey = attribute.Key("agentd.turn_id")
	// cachedKey is the GenAI conventions' count of input tokens served
	// from the provider's cache (newer than the semconv package we pin).
	cachedKey = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	// reasoningKey is their count of output tokens the model spent
	// reasoning, part of gen_ai.usage.output_tokens (newer too).
	reasoningKey = attribute.Key("gen_ai.usage.reasoning.output_tokens")
	// systemKey is gen_ai.provider.name's name before semconv 1.37, which
	// many backends still read.
	systemKey = attribute.Key("gen_ai.system")
)

// StartModelCall starts the span of one chat completion by provider's
// model, named as the GenAI conventions say: "chat <model>". A no-op
// tracer (tracing off) names nothing and keeps no attribute, so they are
// not built, every model call, for it.
func StartModelCall(ctx context.Context, tr trace.Tracer, provider, model string) (context.Context, trace.Span) {
	if _, off := tr.(noop.Tracer); off {
		return tr.Start(ctx, "")
	}
	return tr.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		semconv.GenAIOperationNameChat, semconv.GenAIProviderNameKey.String(provider), systemKey.String(provider),
		semconv.GenAIRequestModel(model)))
}

// EndModelCall ends a model call's span with what the provider reported;
// a span that records nothing (tracing off, or sampled out) is left as it
// is, its attributes not built.
func EndModelCall(span trace.Span, u chat.Usage, finish string, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.GenAIUsageInputTokens(u.InputTokens), semconv.GenAIUsageOutputTokens(u.OutputTokens), cachedKey.Int(u.CachedTokens),
		reasoningKey.Int(u.ReasoningTokens))
	if finish != "" {
		span.SetAttributes(semconv.GenAIResponseFinishReasons(finish))
	}
	fail(span, err)
	span.End()
}

// StartTool starts the span of one tool call: "execute_tool <name>".
func StartTool(ctx context.Context, tr trace.Tracer, name, callID string) (context.Context, trace.Span) {
	return tr.Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(name), semconv.GenAIToolCallID(callID)))
}

// EndTool ends a tool call's span; a result the model sees as an error
// marks the span, as a failure of the tool does.
func EndTool(span trace.Span, isError bool, err error) {
	if isError && err == nil {
		span.SetStatus(codes.Error, "the tool answered an error")
	}
	fail(span, err)
	span.End()
}

func fail(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the id of the request it serves.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the id of the request ctx serves, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
