package providers

import (
	"net/http"
	"testing"
)

// FuzzDetectTooLong: any body, status and provider name gives a verdict
// without panicking, and the verdict is consistent with itself. The seed
// corpus in testdata/fuzz/FuzzDetectTooLong holds real bodies (see
// testdata/SOURCES.md).
func FuzzDetectTooLong(f *testing.F) {
	f.Add("openai", 400, `{"error":{"message":"This model's maximum context length is 4097 tokens. However, you requested 4120 tokens (3120 in the messages, 1000 in the completion).","code":"context_length_exceeded"}}`)
	f.Add("anthropic", 429, `{"type":"rate_limit_error","message":"30,000 input tokens per minute. Please reduce the prompt length"}`)
	f.Add("", 0, `\\\\u003e\\"\\n`)
	f.Add("llamacpp", 200, "event: error\ndata: {\"error\":{\"type\":\"exceed_context_size_error\",\"n_ctx\":4096,\"n_prompt_tokens\":5000}}\n\n")
	f.Add("openrouter", 502, `{"error":{"message":"{\"error\":{\"code\":429,\"message\":\"{\\\"code\\\":\\\"context_length_exceeded\\\"}\"}}"}}`)
	f.Fuzz(func(t *testing.T, provider string, status int, body string) {
		v := DetectTooLong(provider, status, body)
		if v != DetectTooLong(provider, status, body) {
			t.Fatal("verdict not deterministic")
		}
		if e := ExplainTooLong(provider, status, body); e.Verdict != v || (v.TooLong && len(e.Rules) == 0) || (e.Veto != "" && v.TooLong) {
			t.Fatalf("explanation disagrees with the verdict: %+v vs %+v", e, v)
		}
		if !v.TooLong && v != (Verdict{}) {
			t.Fatalf("figures without a verdict: %+v", v)
		}
		if v.Window != 0 && (v.Window < minPlausibleWindow || v.Window > maxPlausibleWindow) {
			t.Fatalf("implausible window %d", v.Window)
		}
		if v.Requested < 0 {
			t.Fatalf("negative requested %d", v.Requested)
		}
		if v.CountsOutput && v.InputOnly {
			t.Fatalf("both CountsOutput and InputOnly: %+v", v)
		}
		if status == http.StatusTooManyRequests && v.TooLong {
			t.Fatal("a 429 called too long")
		}
		e := ClassifyHTTPError(provider, status, body, nil)
		if e.TooLong != v.TooLong || e.Window != v.Window || e.Requested != v.Requested || e.CountsOutput != v.CountsOutput || e.InputOnly != v.InputOnly {
			t.Fatalf("ClassifyHTTPError disagrees with DetectTooLong: %+v vs %+v", e, v)
		}
		if e.TooLong && e.Retryable {
			t.Fatal("too long marked retryable: the same request would fail again")
		}
	})
}

// FuzzWindowsFromModelList: any body gives windows or an error, never a
// panic, and every window it gives is plausible.
func FuzzWindowsFromModelList(f *testing.F) {
	f.Add("openrouter", []byte(`{"data":[{"id":"a","context_length":1048576,"top_provider":{"context_length":262000}}]}`))
	f.Add("lmstudio", []byte(`{"models":[{"key":"m","loaded_instances":[{"config":{"context_length":4096}}]}]}`))
	f.Add("ollama", []byte(`{"model_info":{"general.architecture":"llama","llama.context_length":8192}}`))
	f.Fuzz(func(t *testing.T, provider string, body []byte) {
		got, err := WindowsFromModelList(provider, body)
		if err != nil {
			return
		}
		for id, w := range got {
			if w < 1 || w > maxPlausibleWindow {
				t.Fatalf("%q window %d", id, w)
			}
		}
	})
}
