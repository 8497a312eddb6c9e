package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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
