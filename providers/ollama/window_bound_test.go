package ollama

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/ollamafake"
)

// Issue 16: window 65536 configured for a model Ollama runs at its trained
// length. The trained length from /api/show bounds the configured window,
// in what Models says and in the num_ctx a request asks for.
func TestConfiguredWindowBoundedByTrainedLength(t *testing.T) {
	tests := map[string]struct {
		configured, want int
		source           string
	}{
		"over the trained 8192": {configured: 65536, want: 8192, source: providers.SourceList},
		"under it":              {configured: 4096, want: 4096, source: providers.SourceConfig},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, fake := setup(t, 32*gib, nil, func(cfg *Config) {
				cfg.Models = []string{"llama3"}
				cfg.Windows = map[string]int{"llama3": tc.configured}
			})
			infos, err := c.Models(context.Background())
			if err != nil || len(infos) != 1 {
				t.Fatalf("Models = %+v, %v", infos, err)
			}
			if infos[0].Window != tc.want || infos[0].WindowSource != tc.source {
				t.Errorf("Models says %d (%s), want %d (%s)", infos[0].Window, infos[0].WindowSource, tc.want, tc.source)
			}
			if _, err := c.Stream(context.Background(), providers.Request{Model: "llama3", Messages: testkit.Ask("hi")}, nil); err != nil {
				t.Fatal(err)
			}
			if got := fake.Requests()[0].NumCtx; got != tc.want {
				t.Errorf("num_ctx %d, want %d", got, tc.want)
			}
		})
	}
}

// A request agentd estimated longer than the window the server runs (by
// /api/ps), which then fails — a 500, or a hang that the caller ends — is a
// refusal for length naming that window; one that fits is the fault it is.
func TestFailureOverRunningWindowIsTooLong(t *testing.T) {
	tests := map[string]struct {
		reply     testkit.Reply
		estimate  int
		tooLong   bool
		retryable bool
	}{
		"500 over the window":  {reply: testkit.Reply{Status: 500, Body: `{"error":"llama runner process has terminated"}`}, estimate: 6000, tooLong: true},
		"hang over the window": {reply: testkit.Reply{Hang: true}, estimate: 6000, tooLong: true},
		"500 that fits":        {reply: testkit.Reply{Status: 500, Body: `{"error":"llama runner process has terminated"}`}, estimate: 3000, retryable: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := ollamafake.New(ollamafake.Options{Models: realModels(t), Window: 4096, Script: testkit.Always(tc.reply)})
			t.Cleanup(fake.Close)
			c, err := New(Config{BaseURL: fake.URL(), MemoryBytes: 32 * gib, Windows: map[string]int{"gemma3:1b": 8192}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			// The first request loads the model; /api/ps then says 4096.
			_, _ = c.Stream(ctx, providers.Request{Model: "gemma3:1b", Messages: testkit.Ask("hi")}, nil)
			ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel2()
			_, err = c.Stream(ctx2, providers.Request{Model: "gemma3:1b", Messages: testkit.Ask(bigPrompt(tc.estimate)), EstimatedInput: tc.estimate}, nil)
			var pe *providers.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *providers.Error", err)
			}
			if pe.TooLong != tc.tooLong || (tc.tooLong && (pe.Window != 4096 || pe.Requested != tc.estimate || pe.Retryable)) {
				t.Fatalf("err = %#v, want TooLong=%v naming window 4096 and %d requested", pe, tc.tooLong, tc.estimate)
			}
			if !tc.tooLong && (pe.Retryable != tc.retryable || pe.Status != http.StatusInternalServerError) {
				t.Errorf("err = %#v, want the 500 as it is (retryable %v)", pe, tc.retryable)
			}
		})
	}
}
