// Package openai is agentd's adapter for OpenAI-style chat completions: one
// client, configured by a row per company (OpenAI, Azure, OpenRouter, Groq,
// Together, Fireworks, DeepSeek, Mistral, xAI, Zhipu, Moonshot, vLLM,
// llama.cpp server, LM Studio, or any compatible server), that streams one
// request and lists the models with their windows.
//
// It uses github.com/openai/openai-go/v3 to send the request and for the SSE
// framing; the request body it writes itself (request.go), because the SDK's
// reflective encoder re-encoded every kept message on every call, and it
// decodes the stream's chunks itself, once each (chunk.go, chunkStream),
// because the SDK's reflective decoder cost more than the rest of reading
// an answer and its stream decoded each event twice.
// Measured gaps of the SDK, and what this package does about them:
//   - its stream ends the same way on "data: [DONE]" and on a bare EOF, so a
//     cut stream would look like a success: a per-request middleware watches
//     the body for [DONE] (doneWatcher);
//   - on a non-2xx body without an "error" key (vLLM's {"object":"error",…},
//     plain-text proxy pages) it returns a JSON decoding error instead of its
//     API error: the raw response is taken with option.WithResponseInto and
//     classified from its status and body;
//   - reasoning deltas (reasoning_content, reasoning) and DeepSeek's
//     prompt_cache_hit_tokens are not fields of its chunk type; chunk.go
//     reads them.
//
// Model lists are fetched with plain net/http because the windows live in
// fields the SDK's Model type drops, and LM Studio's and llama.cpp's endpoints
// are not OpenAI paths.
package openai

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentd/agentd/providers"
)

// Config configures one OpenAI-style provider.
type Config struct {
	// Name is the provider's name in agentd's config (e.g. "work-openai").
	Name string
	// Company selects the row of behaviours: openai, azure, openrouter, groq,
	// together, fireworks, deepseek, mistral, xai, zhipu, moonshot, vllm,
	// llamacpp, lmstudio (and the aliases of providers.LookupCompany); empty
	// guesses from BaseURL; an unknown name is a generic compatible server.
	Company string
	// BaseURL is the API root (…/v1). Empty takes the company's default.
	// For Azure: https://RESOURCE.openai.azure.com/openai/v1 (the v1 API), or
	// https://RESOURCE.openai.azure.com with an optional ?api-version=… (the
	// deployments API; the model name is the deployment).
	BaseURL string
	APIKey  string
	// Models are the models to offer; empty offers what the list returns.
	Models []string
	// Windows are context windows from the config, used when the provider's
	// own list does not say.
	Windows map[string]int
	// HTTPClient is used for every call; nil takes a fresh client (never
	// http.DefaultClient, so nothing global is shared or changed).
	HTTPClient *http.Client
	// PromptCacheKey sends Request.CacheKey as prompt_cache_key; nil takes
	// the company's default (on for OpenAI itself).
	PromptCacheKey *bool
}

// company is how one company's server differs from the OpenAI protocol. The
// company names, default base URLs and the local flag come from the shared
// table (providers.LookupCompany, providers.CompanyFromBaseURL); this row
// holds only the wire quirks.
type company struct {
	name  string
	local bool
	// maxCompletion: the answer room goes in max_completion_tokens (OpenAI
	// proper deprecated max_tokens and its reasoning models refuse it).
	maxCompletion bool
	// noStreamOptions: the server rejects stream_options; it reports usage
	// on its last chunk by itself.
	noStreamOptions bool
	// replayField is the assistant field thinking is sent back in, "" for
	// none; replayToolTurnsOnly keeps it only for turns with tool calls.
	replayField         string
	replayToolTurnsOnly bool
	azure               bool
	// listPaths are model-list paths relative to the base URL, tried in
	// order before the OpenAI-compatible "models".
	listPaths []string
	// propsPath, when set, is fetched after the list for the window the
	// server was started with (llama.cpp's n_ctx) and its slot count.
	propsPath string
	// promptCacheKey: the API takes prompt_cache_key.
	promptCacheKey bool
	// llamaCache: llama.cpp's cache_prompt and id_slot are sent.
	llamaCache bool
}

// quirks is the table of differences, keyed by the canonical company name.
//
// Sources: DeepSeek keeps reasoning_content only for turns that called tools
// and ignores it otherwise (https://api-docs.deepseek.com/guides/thinking_mode);
// Moonshot's Kimi thinking models and Zhipu's GLM preserved thinking ask the
// same (https://platform.moonshot.ai/docs/guide/use-kimi-k2-thinking-model,
// https://docs.z.ai/guides/capabilities/thinking-mode); OpenRouter takes
// `reasoning` back on assistant messages
// (https://openrouter.ai/docs/use-cases/reasoning-tokens); Mistral validates
// its body strictly and sends usage on its final chunk
// (https://docs.mistral.ai/api/); LM Studio's native list says the window a
// model is loaded with (https://lmstudio.ai/docs/developer/rest/list; before
// 0.4 only its beta /api/v0/models did,
// https://lmstudio.ai/docs/developer/rest/endpoints);
// llama.cpp's /props carries n_ctx and total_slots, and its completion
// takes cache_prompt and id_slot
// (https://github.com/ggml-org/llama.cpp/tree/master/tools/server); OpenAI
// takes prompt_cache_key
// (https://platform.openai.com/docs/guides/prompt-caching).
var quirks = map[string]company{
	"openai":     {maxCompletion: true, promptCacheKey: true},
	"azure":      {maxCompletion: true, azure: true},
	"openrouter": {replayField: "reasoning"},
	"deepseek":   {replayField: "reasoning_content", replayToolTurnsOnly: true},
	"zhipu":      {replayField: "reasoning_content", replayToolTurnsOnly: true},
	"moonshot":   {replayField: "reasoning_content", replayToolTurnsOnly: true},
	"mistral":    {noStreamOptions: true},
	"llamacpp":   {propsPath: "../props", llamaCache: true},
	"lmstudio":   {listPaths: []string{"../api/v1/models", "../api/v0/models"}},
}

// resolve picks the company row: the configured name, else a guess from the
// base URL. Local is the company's (vLLM, llama.cpp, LM Studio run on this
// computer); only a server of one's own is judged by where its URL points.
func resolve(cfg Config) (company, string) {
	var pc providers.Company
	if strings.TrimSpace(cfg.Company) == "" {
		pc = providers.CompanyFromBaseURL(cfg.BaseURL)
	} else if known, ok := providers.LookupCompany(cfg.Company); ok {
		pc = known
	} else {
		pc, _ = providers.LookupCompany(providers.GenericCompany)
	}
	co := quirks[pc.Name]
	co.name = pc.Name
	if co.name == "" {
		co.name = providers.GenericCompany
	}
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		base = pc.BaseURL
	}
	co.local = pc.Local
	if co.name == providers.GenericCompany && base != "" {
		co.local = providers.CompanyFromBaseURL(base).Local
	}
	return co, base
}

// Client is one configured OpenAI-style provider. It is immutable after New
// (but for the slot count a model list reads) and safe for concurrent use.
type Client struct {
	cfg   Config
	co    company
	base  *url.URL
	http  *http.Client
	local bool
	// api sends requests: only its Options are set (see Stream).
	api     openai.Client
	azureV1 bool   // Azure's /openai/v1 API: model = deployment, no api-version
	apiVer  string // Azure deployments API version
	// slots is llama.cpp's total_slots as its /props last said (0: not
	// read): with more than one, a chat keeps its own slot.
	slots atomic.Int64
	// enc keeps encoded messages and tool lists between requests.
	enc *encoder
}

// azureDefaultAPIVersion is the GA data-plane version of Azure OpenAI's
// deployments API (https://learn.microsoft.com/azure/ai-services/openai/reference).
const azureDefaultAPIVersion = "2024-10-21"

// New checks cfg and builds a client. It makes no network call.
func New(cfg Config) (*Client, error) {
	co, base := resolve(cfg)
	if base == "" {
		return nil, fmt.Errorf("openai provider %q (%s): base_url is required", cfg.Name, co.name)
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("openai provider %q: base_url %q is not an absolute URL", cfg.Name, base)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		// A client of our own: SDK and stdlib defaults stay untouched. No
		// overall timeout, since a stream may last minutes; the caller's
		// context bounds each call.
		hc = &http.Client{}
	}
	c := &Client{cfg: cfg, co: co, http: hc, local: co.local, enc: newEncoder()}
	if cfg.PromptCacheKey != nil {
		c.co.promptCacheKey = *cfg.PromptCacheKey
	}

	if co.azure {
		q := u.Query()
		c.apiVer = q.Get("api-version")
		q.Del("api-version")
		u.RawQuery = q.Encode()
		c.azureV1 = strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/openai/v1")
		if !c.azureV1 && c.apiVer == "" {
			c.apiVer = azureDefaultAPIVersion
		}
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	c.base = u

	opts := []option.RequestOption{
		option.WithBaseURL(u.String()),
		option.WithHTTPClient(hc),
		// agentd retries by itself, knowing what a refusal means.
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		if co.azure {
			// Azure authenticates with an api-key header, not a bearer token.
			opts = append(opts, option.WithHeader("api-key", cfg.APIKey))
		} else {
			opts = append(opts, option.WithAPIKey(cfg.APIKey))
		}
	}
	// A Client of these options alone, unlike openai.NewClient, reads no
	// OPENAI_* environment variables: a key for one company never leaks
	// into another's requests.
	c.api = openai.Client{Options: opts}
	return c, nil
}

// Company is the normalised company name this client behaves as.
func (c *Client) Company() string { return c.co.name }

// provider names the client in errors and model infos.
func (c *Client) provider() string {
	if c.cfg.Name != "" {
		return c.cfg.Name
	}
	return c.co.name
}
