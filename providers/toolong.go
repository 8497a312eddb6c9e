package providers

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Verdict is what a refusal body says about the window.
type Verdict struct {
	// TooLong: the request did not fit the model's window.
	TooLong bool
	// Window is the window the refusal names, 0 when it names none (or only
	// an implausible one, see minPlausibleWindow).
	Window int
	// Requested is the size the refusal says was sent, in its own words: the
	// total when it names one, else the input; 0 when it names neither.
	Requested int
	// CountsOutput: the refusal counts the requested answer room in the total
	// and the input alone fits (or its size is not named), so shrinking
	// MaxTokens first may be enough.
	CountsOutput bool
	// InputOnly: the named limit is a limit on input, or the input alone is
	// over the window; shrinking the answer room cannot help.
	InputOnly bool
}

// Bounds on a window read from a refusal. vLLM once named the room left
// (2048 - max_tokens = 3) as the window (vllm-project/vllm#33425); no chat
// model has a window that small, so such a figure is dropped rather than
// learned. The upper bound keeps byte counts and garbage out.
const (
	minPlausibleWindow = 256
	maxPlausibleWindow = 100_000_000
	// maxScan bounds the work on a huge body: every refusal we know of
	// says what it means in its first few hundred bytes.
	maxScan = 16 << 10
)

// DetectTooLong classifies an error body (or a stream error event's text)
// from provider/company `provider`. Most wordings are recognised whatever the
// provider, because gateways (OpenRouter, LiteLLM, Azure, proxies) relay other
// companies' bodies; the provider only adds its own weak hints. status 0 means
// unknown (a body an SDK printed without it).
func DetectTooLong(provider string, status int, body string) Verdict {
	return ExplainTooLong(provider, status, body).Verdict
}

// Explanation is how DetectTooLong reached its verdict, for `agentd debug
// too-long --explain` and for logs.
type Explanation struct {
	Verdict Verdict
	// Status is set when the HTTP status alone decided (a 429, 401, …).
	Status string
	// Veto names the look-alike the body was taken for ("" for none).
	Veto string
	// Rules lists the wordings and JSON fields that matched, in order.
	Rules []string
	// Input, Output and Total are the other figures the body names (0 when
	// it names none): what Window is not.
	Input, Output, Total int
}

// ExplainTooLong is DetectTooLong with its reasons.
func ExplainTooLong(provider string, status int, body string) Explanation {
	switch status {
	case http.StatusTooManyRequests, http.StatusPaymentRequired,
		http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		// A rate limit, a bill or a bad key: never about the window, however
		// the body words it ("Please reduce the prompt length" on a 429).
		return Explanation{Status: fmt.Sprintf("HTTP %d is never about the window", status)}
	}
	if len(body) > maxScan {
		body = body[:maxScan]
	}
	st := readStructure(body)
	if st.veto != "" {
		return Explanation{Veto: st.veto}
	}
	text := normalize(body)
	if w := vetoed(text); w != "" {
		return Explanation{Veto: w}
	}
	f := facts{rules: st.rules, hit: st.hit}
	setOnce(&f.window, st.window)
	setOnce(&f.input, st.input)
	for _, r := range sharedRules {
		r.apply(text, &f)
	}
	for _, r := range providerRules[canonicalName(provider)] {
		r.apply(text, &f)
	}
	for _, r := range windowShapes {
		if !f.hit || f.window > 0 {
			break
		}
		r.apply(text, &f)
	}
	// No status makes a body too long by itself: a 413 with no other word
	// is a proxy's limit on bytes (nginx's client_max_body_size), not the
	// model's window; left alone, no window is learned and no chat folded.
	v := f.verdict()
	e := Explanation{Verdict: v, Rules: f.rules}
	if v.TooLong {
		e.Input, e.Output, e.Total = f.input, f.output, f.total
	}
	return e
}

// ClassifyHTTPError builds the *Error an adapter returns for a non-2xx answer
// (or an error event after HTTP 200, status 200): TooLong, Window, Requested
// and CountsOutput from DetectTooLong; Retryable for 429 and 5xx that are not
// too long (and for an overload or rate-limit event mid-stream); RetryAfter
// from the Retry-After header (seconds or HTTP date) when present.
func ClassifyHTTPError(provider string, status int, body string, header http.Header) *Error {
	v := DetectTooLong(provider, status, body)
	e := &Error{
		Provider:     provider,
		Status:       status,
		Body:         body,
		TooLong:      v.TooLong,
		Window:       v.Window,
		Requested:    v.Requested,
		CountsOutput: v.CountsOutput,
		InputOnly:    v.InputOnly,
	}
	if !v.TooLong {
		e.Retryable = retryable(status, normalize(body))
	}
	e.RetryAfter = retryAfter(header, time.Now())
	return e
}

// retryable says whether another try of the same request may succeed.
func retryable(status int, text string) bool {
	switch {
	case status == http.StatusTooManyRequests:
		// A spent balance stays spent; a per-minute limit passes.
		return !hardQuota.MatchString(text) || softWait.MatchString(text)
	case status >= 500:
		return true
	case status == http.StatusOK:
		// An error event inside a stream that started fine.
		return streamRetry.MatchString(text)
	}
	return false
}

var (
	hardQuota   = regexp.MustCompile(`insufficient_quota|check your plan and billing|credit balance is too low|can only afford`)
	softWait    = regexp.MustCompile(`per minute|per min\b|\b(?:tpm|rpm)\b|(?:retry|try again) in \d`)
	streamRetry = regexp.MustCompile(`overloaded|rate_limit|server_error|internal_error|api_error|service_unavailable`)
)

// maxRetryAfter caps a server's wish, so a bogus header cannot park a chat.
const maxRetryAfter = 24 * time.Hour

// retryAfter reads OpenAI's retry-after-ms, then the standard Retry-After in
// seconds or as an HTTP date relative to now.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return clampWait(time.Duration(ms * float64(time.Millisecond)))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs > maxRetryAfter.Seconds() {
			return maxRetryAfter
		}
		return clampWait(time.Duration(secs * float64(time.Second)))
	}
	if t, err := http.ParseTime(v); err == nil {
		return clampWait(t.Sub(now))
	}
	return 0
}

func clampWait(d time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d > maxRetryAfter:
		return maxRetryAfter
	}
	return d
}

// facts gathers what the rules read from one body.
type facts struct {
	hit                     bool
	window, total           int
	input, output           int
	inputOnly, countsOutput bool
	rules                   []string // what matched, for Explanation
}

func (f *facts) verdict() Verdict {
	if !f.hit {
		return Verdict{}
	}
	v := Verdict{TooLong: true, Window: f.window}
	if v.Window < minPlausibleWindow || v.Window > maxPlausibleWindow {
		v.Window = 0
	}
	v.Requested = f.total
	if v.Requested == 0 {
		v.Requested = f.input
	}
	v.InputOnly = f.inputOnly || (f.input > 0 && v.Window > 0 && f.input >= v.Window)
	v.CountsOutput = (f.output > 0 || f.countsOutput) && !v.InputOnly
	return v
}

// setOnce keeps the first figure a rule found: rules run from the most
// specific wording to the most general.
func setOnce(dst *int, n int) {
	if *dst == 0 && n > 0 {
		*dst = n
	}
}

// normalize turns a body as received, wrapped by a proxy, double-encoded as a
// JSON string, printed as a Python repr or prefixed by an SDK, into one
// lower-case line without quotes, so one set of patterns reads them all.
func normalize(body string) string {
	s := body
	// Each layer of JSON-in-JSON doubles the backslashes; three layers is
	// more than any body we have seen.
	for i := 0; i < 3 && strings.Contains(s, `\\`); i++ {
		s = strings.ReplaceAll(s, `\\`, `\`)
	}
	s = unicodeEscape.ReplaceAllStringFunc(s, func(m string) string {
		n, err := strconv.ParseUint(m[2:], 16, 32)
		if err != nil {
			return m
		}
		return string(rune(n))
	})
	s = unquote.Replace(s)
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}

var (
	// Go's encoder writes > as \u003e, which would hide Anthropic's
	// "211180 tokens > 200000 maximum" behind a Go proxy.
	unicodeEscape = regexp.MustCompile(`\\u[0-9a-fA-F]{4}`)
	unquote       = strings.NewReplacer(`\n`, " ", `\r`, " ", `\t`, " ",
		`\"`, "", `\'`, "", `"`, "", "'", "", "`", "", `\`, "")
)

// vetoed names the look-alike a body is (a rate limit, a quota, an output
// cap, a content filter, a field-length check, a payload size), "" for none.
func vetoed(text string) string {
	for _, w := range lookAlikeWords {
		if strings.Contains(text, w) {
			return w
		}
	}
	for _, re := range lookAlikeRes {
		if re.MatchString(text) {
			return re.String()
		}
	}
	return ""
}

// Plain substrings are checked with strings.Contains: one alternation of
// thirty words cost the regexp engine most of the detector's time.
var lookAlikeWords = []string{
	// rate limits and throttling
	"rate limit", "rate_limit", "ratelimit", "rate-limit", "too many requests", "throttl",
	"please wait before trying again",
	// quota and money
	"quota", "billing", "credit balance", "can only afford", "monthly limit",
	// content filters
	"content_filter", "content filter", "content management policy", "content_policy", "responsibleaipolicy",
	// output caps: the answer room asked for is over the model's own output
	// limit, whatever the input. (vLLM's "max_tokens … is too large: N. This
	// model's maximum context length is …" is a window refusal, see below;
	// OpenAI's output cap is caught by "supports at most N completion tokens".)
	"maximum allowed number of output tokens", "maximum tokens you requested exceed",
	// per-field string checks
	"string too long", "string_above_max_length", "expected a string with maximum length",
	// payload sizes in bytes: a proxy's page, Bedrock's 25 MB body limit
	"request entity too large", "member must have length less than or equal to",
	// a tokenizer's warning in a server log, not a refusal
	"token indices sequence length",
	// TGI's own cap on max_new_tokens, whatever the input
	"validation error: max_new_tokens must be",
}

var lookAlikeRes = []*regexp.Regexp{
	regexp.MustCompile(`per (?:minute|min|hour|day)\b`),
	regexp.MustCompile(`\b(?:tpm|rpm|tpd|rpd)\b`),
	regexp.MustCompile(`again in \d|retry in \d`),
	regexp.MustCompile(`credits\b|flagged\b`),
	regexp.MustCompile(`supports at most \d+ completion tokens`),
}

// rule is one wording: when re matches, the body is about the window (if
// trigger) and set reads the figures it names.
type rule struct {
	re *regexp.Regexp
	// lits, when re is nil: any of these substrings is a hit.
	lits    []string
	trigger bool
	set     func(f *facts, n []int)
	// raw reads what is not a plain count (a breakdown in parentheses).
	raw func(f *facts, m []string)
}

func (r rule) apply(text string, f *facts) {
	if r.re == nil {
		for _, l := range r.lits {
			if strings.Contains(text, l) {
				f.hit = true
				f.rules = append(f.rules, "phrase "+strconv.Quote(l))
				return
			}
		}
		return
	}
	m := r.re.FindStringSubmatch(text)
	if m == nil {
		return
	}
	f.rules = append(f.rules, "wording "+strconv.Quote(strings.ReplaceAll(r.re.String(), num, "{n}")))
	if r.trigger {
		f.hit = true
	}
	if r.set != nil {
		n := make([]int, len(m))
		for i := 1; i < len(m); i++ {
			n[i] = atoi(m[i])
		}
		r.set(f, n)
	}
	if r.raw != nil {
		r.raw(f, m)
	}
}

// num matches a token count, with or without thousands commas.
const num = `(\d{1,3}(?:,\d{3})+|\d+)`

func atoi(s string) int {
	n, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	if err != nil || n < 0 || n > 1<<40 {
		return 0
	}
	return int(n)
}

// words compiles a pattern where {n} stands for a token count.
func words(p string) *regexp.Regexp {
	return regexp.MustCompile(strings.ReplaceAll(p, "{n}", num))
}

// onlyHit marks the body as too long without reading figures.
func onlyHit(p string) rule { return rule{re: words(p), trigger: true} }

// anyOf marks the body as too long when it holds any of the phrases.
func anyOf(phrases ...string) rule { return rule{lits: phrases, trigger: true} }

var breakdownPart = words(`^{n} (?:in|of|for) (?:the |your )?(.*)$`)

// readBreakdown reads OpenAI's "you requested N tokens (A in the messages, B in
// the completion)" and OpenRouter's "(A of text input, B in the output)":
// parts about the completion or output are answer room, the rest input.
func readBreakdown(f *facts, m []string) {
	for _, part := range strings.FieldsFunc(m[2], func(r rune) bool { return r == ',' || r == ';' }) {
		m := breakdownPart.FindStringSubmatch(strings.TrimSpace(part))
		if m == nil {
			continue
		}
		n := atoi(m[1])
		if strings.Contains(m[2], "completion") || strings.Contains(m[2], "output") {
			f.output += n
		} else {
			f.input += n
		}
	}
}

// sharedRules are the wordings of every provider we know, most specific
// first. Sources are in testdata/too_long.jsonl.
var sharedRules = []rule{
	// vLLM 0.10–0.17 when the prompt fits but prompt + max_tokens does not
	// (template in vllm/entrypoints/openai/serving_engine.py of those releases).
	{re: words(`is too large: {n}\. this models maximum context length is {n} tokens and your request has {n} input tokens`), trigger: true,
		set: func(f *facts, n []int) { setOnce(&f.output, n[1]); setOnce(&f.window, n[2]); setOnce(&f.input, n[3]) }},
	// OpenAI, Azure, DeepSeek, vLLM, OpenRouter, textgen
	{re: words(`maximum context length is {n}`), trigger: true, set: func(f *facts, n []int) { setOnce(&f.window, n[1]) }},
	{re: words(`you requested {n} output tokens and your prompt contains (?:at least )?{n} input tokens(?:, for a total of (?:at least )?{n} tokens)?`), trigger: true,
		set: func(f *facts, n []int) { setOnce(&f.output, n[1]); setOnce(&f.input, n[2]); setOnce(&f.total, n[3]) }},
	{re: words(`you requested (?:about )?{n} tokens(?: \(([^)]*)\))?`), trigger: true,
		set: func(f *facts, n []int) { setOnce(&f.total, n[1]) }, raw: readBreakdown},
	{re: words(`your messages resulted in (?:over )?{n} tokens`), trigger: true, set: inputOnly(1, 0)},
	{re: words(`however, your request has {n} input tokens`), trigger: true, set: inputOnly(1, 0)},
	// Anthropic
	{re: words(`prompt is too long: {n} tokens > {n} maximum`), trigger: true, set: inputOnly(1, 2)},
	{re: words(`exceed context limit: {n} \+ {n} > {n}`), trigger: true,
		set: func(f *facts, n []int) { setOnce(&f.input, n[1]); setOnce(&f.output, n[2]); setOnce(&f.window, n[3]) }},
	{re: words(`input length and max_tokens exceed context limit`), trigger: true, set: func(f *facts, _ []int) { f.countsOutput = true }},
	anyOf("request_too_large", "request exceeds the maximum allowed number of bytes"),
	// Google (Gemini API and Vertex)
	{re: words(`input token count(?: \({n}\))? exceeds the maximum number of tokens allowed(?: \({n}\)| {n})?`), trigger: true,
		set: func(f *facts, n []int) {
			f.inputOnly = true
			setOnce(&f.input, n[1])
			setOnce(&f.window, n[2])
			setOnce(&f.window, n[3])
		}},
	anyOf("request payload size exceeds the limit"),
	// GitHub Copilot, SiliconFlow, DashScope, Volcano Ark, old LM Studio
	{re: words(`prompt token count of {n} exceeds the limit of {n}`), trigger: true, set: inputOnly(1, 2)},
	{re: words(`number of input tokens \({n}\) has exceeded max_prompt_tokens \({n}\)`), trigger: true, set: inputOnly(1, 2)},
	{re: words(`range of input length should be \[\d+, ?{n}\]`), trigger: true, set: inputOnly(0, 1)},
	{re: words(`input length {n} exceeds (?:the maximum length|context length) {n}`), trigger: true, set: inputOnly(1, 2)},
	// llama.cpp server
	{re: words(`request \({n} tokens\) exceeds the available context size \({n} tokens\)`), trigger: true, set: inputOnly(1, 2)},
	anyOf("exceeds the available context size", "exceed the available context size", "exceed_context_size_error"),
	{re: words(`n_prompt_tokens: ?{n}`), set: func(f *facts, n []int) { setOnce(&f.input, n[1]) }},
	{re: words(`n_ctx: ?{n}`), set: func(f *facts, n []int) { setOnce(&f.window, n[1]) }},
	// LM Studio
	{re: words(`trying to keep the first {n} tokens when (?:the )?context (?:the )?overflows`), trigger: true, set: inputOnly(1, 0)},
	{re: words(`loaded with context length of only {n} tokens`), trigger: true, set: func(f *facts, n []int) { setOnce(&f.window, n[1]) }},
	{re: words(`reached context length of {n} tokens`), trigger: true, set: func(f *facts, n []int) { setOnce(&f.window, n[1]) }},
	// Ollama (server/routes.go, runner/*/runner.go; Ollama cloud)
	onlyHit(`input (?:length )?(?:after truncation )?exceeds (?:the |maximum )?context length`),
	onlyHit(`prompt too long; exceeded max context length by {n} tokens`),
	// Fireworks, Mistral, xAI, Zhipu, Moonshot
	{re: words(`prompt is too long: {n}, model maximum context length: {n}`), trigger: true, set: inputOnly(1, 2)},
	{re: words(`prompt contains {n} tokens(?: and {n} draft tokens)?, too large for model with {n} maximum context length`), trigger: true,
		set: func(f *facts, n []int) { f.inputOnly = true; setOnce(&f.input, n[1]); setOnce(&f.window, n[3]) }},
	{re: words(`maximum prompt length is {n} but the request contains {n} tokens`), trigger: true, set: inputOnly(2, 1)},
	{re: words(`current message \({n} tokens\) exceeds budget \({n} tokens\)`), trigger: true, set: inputOnly(1, 2)},
	anyOf("input_too_large", "sent message larger than max", "prompt exceeds max length"),
	{re: words(`model max length exceeded,? max length: ?{n}`), trigger: true, set: func(f *facts, n []int) { setOnce(&f.window, n[1]) }},
	{re: words(`exceeded model token limit:? {n}`), trigger: true, set: func(f *facts, n []int) { setOnce(&f.window, n[1]) }},
	// Text Generation Inference (Hugging Face, Together in 2024)
	{re: words(`inputs tokens \+ max_new_tokens must be <= {n}\. given: {n} inputs tokens and {n} max_new_tokens`), trigger: true,
		set: func(f *facts, n []int) { setOnce(&f.window, n[1]); setOnce(&f.input, n[2]); setOnce(&f.output, n[3]) }},
	{re: words(`inputs must have less than {n} tokens\. given: {n}`), trigger: true, set: inputOnly(2, 1)},
	// Cohere, Bedrock
	anyOf("too many tokens: size limit exceeded", "input is too long for requested model", "too many input tokens"),
	// llama-cpp-python, ctransformers, watsonx, vLLM's scheduler
	{re: words(`requested tokens(?: \({n}\))? exceed context window of {n}`), trigger: true, set: inputOnly(1, 2)},
	{re: words(`number of tokens \({n}\) exceeded maximum context length \({n}\)`), trigger: true, set: inputOnly(1, 2)},
	{re: words(`\btoken sequence length is longer than the specified maximum sequence length for this model \({n} > {n}\)`), trigger: true, set: inputOnly(1, 2)},
	{re: words(`input prompt \({n} tokens\) is too long and exceeds limit of {n}`), trigger: true, set: inputOnly(1, 2)},
	// Ollama's runner log line
	{re: words(`input exceeds context length prompt={n} limit={n}`), trigger: true, set: inputOnly(1, 2)},
	// SGLang
	{re: words(`maximum context length of {n} tokens\. you requested a total of {n} tokens: {n} tokens from the input messages and {n} tokens for the completion`), trigger: true,
		set: func(f *facts, n []int) {
			setOnce(&f.window, n[1])
			setOnce(&f.total, n[2])
			setOnce(&f.input, n[3])
			setOnce(&f.output, n[4])
		}},
	{re: words(`the input \({n} tokens\) is longer than the models context length \({n} tokens\)`), trigger: true, set: inputOnly(1, 2)},
	{re: words(`input length \({n} tokens\) exceeds the maximum allowed length \({n} tokens\)`), trigger: true, set: inputOnly(1, 2)},
	// vLLM since vllm-project/vllm#36197 (and NVIDIA NIM, which runs it)
	{re: words(`you passed {n} input tokens and requested {n} output tokens\. however, the models context length is only {n} tokens`), trigger: true,
		set: func(f *facts, n []int) { setOnce(&f.input, n[1]); setOnce(&f.output, n[2]); setOnce(&f.window, n[3]) }},
	// Cerebras, SambaNova, Cohere
	{re: words(`current length is {n} while limit is {n}`), trigger: true,
		set: func(f *facts, n []int) { setOnce(&f.input, n[1]); setOnce(&f.window, n[2]) }},
	{re: words(`the maximum context length of \S+ is {n}\. however, answering your request will take {n} tokens`), trigger: true,
		set: func(f *facts, n []int) { setOnce(&f.window, n[1]); setOnce(&f.total, n[2]); f.countsOutput = true }},
	{re: words(`total number of tokens \(prompt and prediction\) cannot exceed {n} - received {n}`), trigger: true,
		set: func(f *facts, n []int) { setOnce(&f.window, n[1]); setOnce(&f.total, n[2]); f.countsOutput = true }},
	// TGI when the counts are left out
	{re: words(`inputs tokens \+ max_new_tokens must be <= {n}`), trigger: true, set: func(f *facts, n []int) { setOnce(&f.window, n[1]) }},
	// vLLM before 0.5 derived max_tokens = window - prompt, negative when
	// the prompt alone was over (vllm-project/vllm#4667).
	onlyHit(`max_tokens must be at least 1, got -\d`),
	// codes and general wordings, last
	anyOf("context_length_exceeded", "context_window_exceeded", "prompt is too long", "prompt too long",
		"input is too long", "input too long", "too many tokens", "reduce the length of the messages", "maximum context length"),
	onlyHit(`exceed[a-z ,]{0,40}context (?:length|window|size|limit)`),
	onlyHit(`context (?:length|window|size|limit)[a-z ,]{0,20}exceed`),
}

// windowShapes read the window of a refusal no specific wording knew, in
// the shapes windows are named in; they run only once the body is known to
// be about the window and no rule read its window, most telling first.
var windowShapes = []rule{
	{re: words(`context (?:length|window|size|limit) (?:is |of )?(?:only )?\(?{n}(?: tokens)?`), set: setWindow(1)},
	{re: words(`{n} tokens? > {n}`), set: setWindow(2)},
	{re: words(`\bn_ctx(?:_slot)?[:= ]+{n}`), set: setWindow(1)},
	{re: words(`(?:token )?limit (?:is |of ){n}(?: tokens)?`), set: setWindow(1)},
	{re: words(`exceeds? (?:the )?(?:maximum |max )?(?:context |input )?(?:length|limit|window|size) (?:of )?\(?{n}`), set: setWindow(1)},
	{re: words(`maximum (?:context |input |prompt )?(?:length |tokens? )?(?:is |of )?{n}(?: tokens)?`), set: setWindow(1)},
}

func setWindow(group int) func(f *facts, n []int) {
	return func(f *facts, n []int) { setOnce(&f.window, n[group]) }
}

// inputOnly records an input-only limit: the input figure is group in, the
// window group win (0 for none).
func inputOnly(in, win int) func(f *facts, n []int) {
	return func(f *facts, n []int) {
		f.inputOnly = true
		if in > 0 {
			setOnce(&f.input, n[in])
		}
		if win > 0 {
			setOnce(&f.window, n[win])
		}
	}
}

// providerRules are hints too weak to trust from anyone else.
var providerRules = map[string][]rule{
	// LiteLLM maps this Bedrock validation text to a context-window error.
	"bedrock": {anyOf("expected maxlength:")},
	// Zhipu's code for "Prompt exceeds max length".
	"zhipu": {onlyHit(`\bcode: ?1261\b`)},
}
