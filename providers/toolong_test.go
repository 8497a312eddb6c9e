package providers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// refusal is one line of testdata/too_long.jsonl.
type refusal struct {
	ID        string `json:"id"`
	Provider  string `json:"provider"`
	Status    *int   `json:"status"`
	Body      string `json:"body"`
	Overflow  bool   `json:"is_context_overflow"`
	Window    *int   `json:"window_named"`
	Requested *int   `json:"requested_named"`
	Source    string `json:"source"`
	Partial   bool   `json:"partial"`
	BodyForm  string `json:"body_form"`
	// AnswerRoom is "counts" or "input" (see wantFlags) on the records added
	// with it; older records are listed in wantFlags.
	AnswerRoom string `json:"answer_room"`
	RecordNote string `json:"notes"`
}

func (r refusal) status() int {
	if r.Status == nil {
		return 0
	}
	return *r.Status
}

func loadJSONL[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// Where the detector deliberately reports a figure other than the one the
// record names, and why.
var (
	windowOverride = map[string]int{
		// vLLM's bug named max_model_len - max_tokens (3) as the window; the
		// real one was 2048. No chat model reads 3 tokens: learn nothing.
		"A047": 0,
	}
	requestedOverride = map[string]int{
		// "exceeded max context length by 65590 tokens" is the excess, not
		// what was sent.
		"A064": 0,
	}
)

// The answer-room flags, worked out from each body's own numbers: counts =
// the refusal counts the requested completion and the input alone fits the
// window; input = the wording limits input alone, or the input alone is
// already over. Every other positive body names neither (both false).
var wantFlags = map[string]string{
	// OpenAI, DeepSeek, Azure: "(A in the messages, B in the completion)", A < window
	"A004": "counts", "A008": "counts", "A108": "counts", "A012": "counts", "A040": "counts",
	"H008": "counts", "H009": "counts", "H010": "counts", "H016": "counts",
	// Anthropic "input + max_tokens > window", input fits
	"A033": "counts", "A085": "counts",
	// OpenRouter "(A of text input, B in the output)", vLLM "N output tokens and … input tokens"
	"A044": "counts", "A138": "counts", "A049": "counts",
	// input alone over: "(A in the messages, 0 in the completion)", A ≥ window
	"A025": "input", "A027": "input", "A042": "input", "H012": "input",
	// TGI and Together: inputs alone over the window although they add max_new_tokens
	"A069": "input", "A089": "input",
	// llama.cpp n_prompt_tokens ≥ n_ctx, "request (N tokens) exceeds the available context size (M)"
	"A052": "input", "A054": "input", "A125": "input",
	// input-only wordings
	"A002": "input", "A006": "input", "A010": "input", "H011": "input", "H013": "input",
	"A015": "input", "A017": "input", "A020": "input", "A023": "input", "A131": "input", "A128": "input",
	"A047": "input", "A086": "input", "A058": "input", "A097": "input", "A071": "input",
	"A076": "input", "A092": "input", "A094": "input", "A127": "input",
	"H001": "input", "H002": "input", "H006": "input", "H007": "input",
}

func TestDetectTooLongRealBodies(t *testing.T) {
	recs := loadJSONL[refusal](t, "testdata/too_long.jsonl")
	var pos, neg int
	for _, r := range recs {
		if r.Source == "" {
			t.Errorf("%s has no source", r.ID)
		}
		if r.Overflow {
			pos++
		} else {
			neg++
		}
		t.Run(r.ID+"_"+r.Provider, func(t *testing.T) {
			got := DetectTooLong(r.Provider, r.status(), r.Body)
			if got.TooLong != r.Overflow {
				t.Fatalf("TooLong = %v, want %v; body: %s", got.TooLong, r.Overflow, r.Body)
			}
			if !r.Overflow {
				if got != (Verdict{}) {
					t.Errorf("a look-alike must give the zero verdict, got %+v", got)
				}
				// A body relayed without its status must still not fire.
				if v := DetectTooLong(r.Provider, 0, r.Body); v.TooLong {
					t.Errorf("with status unknown: TooLong = true")
				}
				return
			}
			wantWindow := 0
			if r.Window != nil {
				wantWindow = *r.Window
			}
			if w, ok := windowOverride[r.ID]; ok {
				wantWindow = w
			}
			if got.Window != wantWindow {
				t.Errorf("Window = %d, want %d", got.Window, wantWindow)
			}
			if r.Requested != nil {
				want := *r.Requested
				if w, ok := requestedOverride[r.ID]; ok {
					want = w
				}
				if got.Requested != want {
					t.Errorf("Requested = %d, want %d", got.Requested, want)
				}
			}
			flag := r.AnswerRoom
			if flag == "" {
				flag = wantFlags[r.ID]
			}
			if got.CountsOutput != (flag == "counts") || got.InputOnly != (flag == "input") {
				t.Errorf("CountsOutput=%v InputOnly=%v, want %q", got.CountsOutput, got.InputOnly, flag)
			}
		})
	}
	// The acceptance floor: at least 40 real refusals and 10 look-alikes.
	if pos < 40 || neg < 10 {
		t.Errorf("corpus has %d refusals and %d look-alikes; want at least 40 and 10", pos, neg)
	}
}

// TestDetectTooLongSurvivesWrapping: a proxy that wraps the body as a JSON
// string, or an SDK that prefixes it, must not change the verdict.
func TestDetectTooLongSurvivesWrapping(t *testing.T) {
	recs := loadJSONL[refusal](t, "testdata/too_long.jsonl")
	wraps := map[string]func(string) string{
		"json_string_in_json": func(b string) string {
			// json.Marshal escapes <, > and & as \u003c…: Go proxies do.
			inner, _ := json.Marshal(b)
			return `{"error":{"message":` + string(inner) + `,"code":502,"status":"Bad Gateway"}}`
		},
		"twice_encoded": func(b string) string {
			once, _ := json.Marshal(b)
			twice, _ := json.Marshal(`{"error":{"message":` + string(once) + `}}`)
			return `{"error":` + string(twice) + `}`
		},
		"sdk_prefix": func(b string) string { return "Error code: 400 - " + b },
	}
	for _, r := range recs {
		plain := DetectTooLong(r.Provider, r.status(), r.Body)
		for name, wrap := range wraps {
			t.Run(r.ID+"/"+name, func(t *testing.T) {
				if got := DetectTooLong(r.Provider, r.status(), wrap(r.Body)); got != plain {
					t.Errorf("wrapped verdict %+v, plain %+v", got, plain)
				}
			})
		}
	}
}

func TestDetectTooLongStatusAndShape(t *testing.T) {
	anthropic := `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 200251 tokens > 200000 maximum"}}`
	cases := map[string]struct {
		provider string
		status   int
		body     string
		want     Verdict
	}{
		"429 never too long whatever the words": {"anthropic", 429, anthropic, Verdict{}},
		"402 never too long":                    {"openrouter", 402, anthropic, Verdict{}},
		"500 carrying a refusal":                {"anthropic", 500, anthropic, Verdict{TooLong: true, Window: 200000, Requested: 200251, InputOnly: true}},
		"stream error event after 200":          {"anthropic", 200, anthropic, Verdict{TooLong: true, Window: 200000, Requested: 200251, InputOnly: true}},
		// A proxy's page about bytes: learning nothing beats folding a chat
		// for a limit a shorter transcript may not cure.
		"413 with no words is not too long": {"openai-compatible", 413, "<html><body>413 Request Entity Too Large</body></html>", Verdict{}},
		"413 naming the window is":          {"openai-compatible", 413, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."}}`, Verdict{TooLong: true, Window: 8192, Requested: 9000, InputOnly: true}},
		// Structure: the shapes below carry their meaning in JSON fields.
		"SSE error event in a 200 stream": {"llamacpp", 200, "data: {\"choices\":[{\"delta\":{}}]}\n\nevent: error\ndata: {\"error\":{\"code\":400,\"type\":\"exceed_context_size_error\",\"message\":\"the request was refused\",\"n_prompt_tokens\":5000,\"n_ctx\":4096}}\n\n",
			Verdict{TooLong: true, Window: 4096, Requested: 5000, InputOnly: true}},
		"error code alone":                 {"openai", 400, `{"error":{"message":"Bad request.","code":"context_length_exceeded"}}`, Verdict{TooLong: true}},
		"gateway 502 around an inner 429":  {"openrouter", 502, `{"error":{"message":"{\"error\":{\"code\":429,\"message\":\"the prompt is too long for your plan this minute\"}}"}}`, Verdict{}},
		"gateway around a rate-limit type": {"litellm", 400, `{"error":{"message":"prompt is too long","type":"rate_limit_error"}}`, Verdict{}},
		"413 rate limit is not":            {"groq", 413, "Request too large on tokens per minute (TPM)", Verdict{}},
		"empty body":                       {"openai", 400, "", Verdict{}},
		"Go proxy escaped >":               {"anthropic", 400, `{"message":"prompt is too long: 211180 tokens \u003e 200000 maximum"}`, Verdict{TooLong: true, Window: 200000, Requested: 211180, InputOnly: true}},
		"thousands separators":             {"openai", 400, "This model's maximum context length is 128,000 tokens. However, your messages resulted in 130,512 tokens.", Verdict{TooLong: true, Window: 128000, Requested: 130512, InputOnly: true}},
		"bedrock hint only for bedrock":    {"openai", 400, "expected maxLength: 2048", Verdict{}},
		"bedrock hint for bedrock":         {"bedrock", 400, "expected maxLength: 2048", Verdict{TooLong: true}},
		"zhipu code only for zhipu":        {"zhipu", 400, `{"error":{"code":"1261","message":"…"}}`, Verdict{TooLong: true}},
		// vLLM 0.10–0.17 wording (template in its serving_engine.py): the
		// prompt fits, the answer room does not. A window refusal that
		// shrinking max_tokens cures, not an output cap.
		"vllm max_tokens too large for the window": {"vllm", 400,
			`{"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778). None","type":"BadRequestError","param":null,"code":400}}`,
			Verdict{TooLong: true, Window: 4096, Requested: 2778, CountsOutput: true}},
		"openai output cap is not": {"openai", 400,
			"max_completion_tokens is too large: 200000. This model supports at most 100000 completion tokens, whereas you provided 200000.", Verdict{}},
		"alias google means gemini": {"google", 400, "The input token count (134123) exceeds the maximum number of tokens allowed (131072).", Verdict{TooLong: true, Window: 131072, Requested: 134123, InputOnly: true}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := DetectTooLong(c.provider, c.status, c.body); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestClassifyHTTPError(t *testing.T) {
	tooLong := `{"error":{"message":"This model's maximum context length is 4097 tokens. However, you requested 4120 tokens (3120 in the messages, 1000 in the completion).","code":"context_length_exceeded"}}`
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	cases := map[string]struct {
		status            int
		body              string
		header            http.Header
		tooLong, retry    bool
		window, requested int
		countsOutput      bool
		retryAfter        time.Duration
	}{
		"too long, answer room counted":          {400, tooLong, nil, true, false, 4097, 4120, true, 0},
		"too long on a 5xx is not retried":       {502, tooLong, nil, true, false, 4097, 4120, true, 0},
		"tpm limit retried after header seconds": {429, `{"error":{"message":"Rate limit reached on tokens per min (TPM)"}}`, hdr("Retry-After", "20"), false, true, 0, 0, false, 20 * time.Second},
		"retry-after-ms wins":                    {429, "rate limited", hdr("Retry-After", "20", "Retry-After-Ms", "1500"), false, true, 0, 0, false, 1500 * time.Millisecond},
		"spent quota is not retried":             {429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota"}}`, nil, false, false, 0, 0, false, 0},
		"per-minute quota with retry hint is":    {429, `You exceeded your current quota, please check your plan and billing details. Please retry in 38.8s.`, nil, false, true, 0, 0, false, 0},
		"server fault retried":                   {503, "upstream connect error", nil, false, true, 0, 0, false, 0},
		"plain 400 not retried":                  {400, `{"error":{"message":"Invalid 'messages[0].role'"}}`, nil, false, false, 0, 0, false, 0},
		"overloaded event mid-stream":            {200, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, nil, false, true, 0, 0, false, 0},
		"garbage header ignored":                 {429, "slow down", hdr("Retry-After", "soon"), false, true, 0, 0, false, 0},
		"negative header ignored":                {429, "slow down", hdr("Retry-After", "-5"), false, true, 0, 0, false, 0},
		"absurd header capped":                   {429, "slow down", hdr("Retry-After", "99999999999"), false, true, 0, 0, false, maxRetryAfter},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e := ClassifyHTTPError("openai", c.status, c.body, c.header)
			if e.Provider != "openai" || e.Status != c.status || e.Body != c.body {
				t.Errorf("identity fields not kept: %+v", e)
			}
			if e.TooLong != c.tooLong || e.Retryable != c.retry {
				t.Errorf("TooLong=%v Retryable=%v, want %v %v", e.TooLong, e.Retryable, c.tooLong, c.retry)
			}
			if e.Window != c.window || e.Requested != c.requested || e.CountsOutput != c.countsOutput {
				t.Errorf("Window=%d Requested=%d CountsOutput=%v", e.Window, e.Requested, e.CountsOutput)
			}
			if e.RetryAfter != c.retryAfter {
				t.Errorf("RetryAfter = %v, want %v", e.RetryAfter, c.retryAfter)
			}
			if e.Error() == "" {
				t.Error("empty error text")
			}
		})
	}
}

func TestRetryAfterHTTPDate(t *testing.T) {
	now := time.Date(2026, 10, 3, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		value string
		want  time.Duration
	}{
		"ninety seconds ahead": {now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		"in the past":          {now.Add(-time.Hour).Format(http.TimeFormat), 0},
		"fractional seconds":   {"1.5", 1500 * time.Millisecond},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := http.Header{}
			h.Set("Retry-After", c.value)
			if got := retryAfter(h, now); got != c.want {
				t.Errorf("retryAfter(%q) = %v, want %v", c.value, got, c.want)
			}
		})
	}
}

func BenchmarkDetectTooLong(b *testing.B) {
	recs := loadJSONL[refusal](b, "testdata/too_long.jsonl")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := recs[i%len(recs)]
		DetectTooLong(r.Provider, r.status(), r.Body)
	}
}

// BenchmarkDetectTooLongHugeBody: a 1 MB body (a proxy's HTML error page, a
// log) is cut to maxScan before any pattern runs.
func BenchmarkDetectTooLongHugeBody(b *testing.B) {
	body := strings.Repeat("exceed the context of tokens, maximum length: 12, ", 1<<20/50)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		DetectTooLong("openai", 500, body)
	}
}

// TestExplainTooLong: the explanation names what decided, and which figure
// is which when a body names several.
func TestExplainTooLong(t *testing.T) {
	e := ExplainTooLong("openai", 400, `{"error":{"message":"This model's maximum context length is 4097 tokens. However, you requested 4120 tokens (3120 in the messages, 1000 in the completion).","code":"context_length_exceeded"}}`)
	if !e.Verdict.TooLong || e.Verdict.Window != 4097 || e.Total != 4120 || e.Input != 3120 || e.Output != 1000 {
		t.Fatalf("figures: %+v", e)
	}
	joined := strings.Join(e.Rules, "\n")
	for _, want := range []string{"field code=context_length_exceeded", "maximum context length is {n}"} {
		if !strings.Contains(joined, want) {
			t.Errorf("rules %q lack %q", joined, want)
		}
	}
	if e := ExplainTooLong("openai", 429, "prompt is too long"); e.Status == "" || e.Verdict.TooLong {
		t.Errorf("429: %+v", e)
	}
	if e := ExplainTooLong("groq", 413, "Request too large on tokens per minute (TPM)"); e.Veto == "" || e.Verdict.TooLong {
		t.Errorf("look-alike: %+v", e)
	}
}

// TestTooLongCorpusFigures is the acceptance floor of the corpus and the
// figures BENCHMARKS.md records (run with -v to print them): bodies,
// providers, the share recognised and the share of named windows read right.
func TestTooLongCorpusFigures(t *testing.T) {
	recs := loadJSONL[refusal](t, "testdata/too_long.jsonl")
	providers := map[string]bool{}
	var right, named, windowsRight int
	for _, r := range recs {
		providers[r.Provider] = true
		got := DetectTooLong(r.Provider, r.status(), r.Body)
		if got.TooLong == r.Overflow {
			right++
		}
		if r.Overflow && r.Window != nil {
			named++
			want := *r.Window
			if w, ok := windowOverride[r.ID]; ok {
				want = w
			}
			if got.Window == want {
				windowsRight++
			}
		}
	}
	t.Logf("corpus: %d bodies from %d providers and servers; verdict right on %d (%.1f%%); window right on %d of %d that name one (%.1f%%)",
		len(recs), len(providers), right, 100*float64(right)/float64(len(recs)), windowsRight, named, 100*float64(windowsRight)/float64(max(named, 1)))
	if len(recs) < 200 || len(providers) < 25 {
		t.Errorf("corpus has %d bodies from %d providers; want at least 200 from 25", len(recs), len(providers))
	}
}

func TestLearntWindow(t *testing.T) {
	cases := map[string]struct {
		e                      *Error
		sent, answer, believed int
		want                   int
	}{
		"named window wins":           {&Error{TooLong: true, Window: 4096, Requested: 5000}, 3000, 500, 8192, 4096},
		"the refusal's count":         {&Error{TooLong: true, Requested: 6000}, 3000, 500, 8192, 5700},
		"input and answer room":       {&Error{TooLong: true}, 3000, 500, 8192, 3325},
		"input alone when input-only": {&Error{TooLong: true, InputOnly: true}, 3000, 1000, 8192, 2850},
		// The second refusal of a request sized to the bound the first
		// taught still lowers it (issue 19).
		"lowered again at the bound": {&Error{TooLong: true}, 4000, 0, 3800, 3610},
		"a count over the belief":    {&Error{TooLong: true, Requested: 9000}, 3000, 0, 8192, 7782},
		"not too long":               {&Error{Status: 429}, 3000, 0, 8192, 0},
		"nothing sent":               {&Error{TooLong: true}, 0, 0, 8192, 0},
		"implausibly small":          {&Error{TooLong: true, InputOnly: true}, 100, 500, 8192, 0},
	}
	for name, c := range cases {
		if got := LearntWindow(c.e, c.sent, c.answer, c.believed); got != c.want {
			t.Errorf("%s: got %d, want %d", name, got, c.want)
		}
	}
}

// TestWindowShapes: a refusal no specific wording knows still gives its
// window in the shapes windows are named in, and the window rather than the
// request size or the answer room when it names several numbers.
func TestWindowShapes(t *testing.T) {
	cases := map[string]struct {
		body   string
		window int
	}{
		"limit is N":             {"Prompt too long: 9000 tokens requested, limit is 8192.", 8192},
		"limit of N tokens":      {"context_length_exceeded: 5000 input + 1000 output tokens; limit of 4096 tokens", 4096},
		"context length (N)":     {"Input too long for the model's context length (32768 tokens): 40000 given, max_tokens 2048.", 32768},
		"N tokens > M":           {"input is too long: 9100 tokens > 8000", 8000},
		"exceeds the limit of N": {"The prompt (70000 tokens) is too long: it exceeds the context limit of 65536 with 4096 for the answer.", 65536},
		"maximum of N":           {"Prompt is too long. The maximum is 131072 tokens; you sent 140000 and asked for 8192 more.", 131072},
		"n_ctx_slot":             {"the request exceeds the available context size, n_ctx_slot = 2048, n_prompt_tokens = 2059", 2048},
	}
	for name, c := range cases {
		if got := DetectTooLong("", 400, c.body); !got.TooLong || got.Window != c.window {
			t.Errorf("%s: got %+v, want window %d", name, got, c.window)
		}
	}
}

func TestRetryWindow(t *testing.T) {
	var told int
	learn := func(_ context.Context, w int) (int, error) { told = w; return w - 1, nil }
	if got, err := RetryWindow(context.Background(), &Error{TooLong: true, Window: 4096}, 0, 0, 8192, learn); err != nil || got != 4095 || told != 4096 {
		t.Errorf("named window: got %d (told %d, err %v)", got, told, err)
	}
	told = 0
	if got, _ := RetryWindow(context.Background(), &Error{TooLong: true}, 0, 0, 8000, learn); got != 7600 || told != 0 {
		t.Errorf("nothing taught: got %d, told %d; want 5%% less and nothing recorded", got, told)
	}
	fail := func(context.Context, int) (int, error) { return 0, errors.New("disk full") }
	if got, err := RetryWindow(context.Background(), &Error{TooLong: true, Window: 4096}, 0, 0, 8192, fail); got != 4096 || err == nil {
		t.Errorf("failed record: got %d, err %v; want the window learned and the error", got, err)
	}
}
