package providers

import (
	"net"
	"net/url"
	"strings"
)

// Protocol kinds a Company speaks.
const (
	KindOpenAI    = "openai"
	KindAnthropic = "anthropic"
	KindOllama    = "ollama"
)

// GenericCompany names the fallback row for an OpenAI-style server nobody
// recognised (a server of your own).
const GenericCompany = "openai-compatible"

// Company is one row of the OpenAI-style company table (plus anthropic and
// ollama rows). Cheapest and Small name the models the summariser tries
// (ADR 0055 §3); the yaml can override both. A local row leaves them empty on
// purpose: on this computer the summariser uses the chat's own model, already
// in memory, because loading a second one would evict it.
type Company struct {
	Name     string
	Kind     string
	BaseURL  string
	Cheapest string
	Small    string
	Local    bool
}

// companies is the table. Model names are current as of late 2025; they
// are defaults, not promises.
var companies = []Company{
	{Name: "openai", Kind: KindOpenAI, BaseURL: "https://api.openai.com/v1", Cheapest: "gpt-4.1-nano", Small: "gpt-4.1-mini"},
	// Azure serves deployments the operator names, so no model name here
	// can be right; the yaml supplies them.
	{Name: "azure", Kind: KindOpenAI, BaseURL: ""},
	{Name: "anthropic", Kind: KindAnthropic, BaseURL: "https://api.anthropic.com", Cheapest: "claude-haiku-4-5", Small: "claude-haiku-4-5"},
	{Name: "gemini", Kind: KindOpenAI, BaseURL: "https://generativelanguage.googleapis.com/v1beta/openai", Cheapest: "gemini-2.5-flash-lite", Small: "gemini-2.5-flash"},
	{Name: "openrouter", Kind: KindOpenAI, BaseURL: "https://openrouter.ai/api/v1", Cheapest: "google/gemini-2.5-flash-lite", Small: "openai/gpt-4.1-mini"},
	{Name: "groq", Kind: KindOpenAI, BaseURL: "https://api.groq.com/openai/v1", Cheapest: "llama-3.1-8b-instant", Small: "openai/gpt-oss-20b"},
	{Name: "together", Kind: KindOpenAI, BaseURL: "https://api.together.xyz/v1", Cheapest: "meta-llama/Llama-3.2-3B-Instruct-Turbo", Small: "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"},
	{Name: "fireworks", Kind: KindOpenAI, BaseURL: "https://api.fireworks.ai/inference/v1", Cheapest: "accounts/fireworks/models/llama-v3p1-8b-instruct", Small: "accounts/fireworks/models/gpt-oss-20b"},
	{Name: "deepseek", Kind: KindOpenAI, BaseURL: "https://api.deepseek.com/v1", Cheapest: "deepseek-chat", Small: "deepseek-chat"},
	{Name: "mistral", Kind: KindOpenAI, BaseURL: "https://api.mistral.ai/v1", Cheapest: "ministral-3b-latest", Small: "mistral-small-latest"},
	{Name: "xai", Kind: KindOpenAI, BaseURL: "https://api.x.ai/v1", Cheapest: "grok-3-mini", Small: "grok-3-mini"},
	{Name: "zhipu", Kind: KindOpenAI, BaseURL: "https://open.bigmodel.cn/api/paas/v4", Cheapest: "glm-4-flash", Small: "glm-4.5-air"},
	{Name: "moonshot", Kind: KindOpenAI, BaseURL: "https://api.moonshot.ai/v1", Cheapest: "moonshot-v1-8k", Small: "moonshot-v1-8k"},
	{Name: "vllm", Kind: KindOpenAI, BaseURL: "http://localhost:8000/v1", Local: true},
	{Name: "llamacpp", Kind: KindOpenAI, BaseURL: "http://localhost:8080/v1", Local: true},
	{Name: "lmstudio", Kind: KindOpenAI, BaseURL: "http://localhost:1234/v1", Local: true},
	{Name: "ollama", Kind: KindOllama, BaseURL: "http://localhost:11434", Local: true},
	{Name: GenericCompany, Kind: KindOpenAI},
}

// aliases maps other spellings (and the names SDKs and issue trackers use)
// to a row's name.
var aliases = map[string]string{
	"google": "gemini", "vertex": "gemini", "vertex_ai": "gemini", "vertexai": "gemini",
	"azure_openai": "azure", "azure-openai": "azure", "azureopenai": "azure",
	"claude": "anthropic",
	"x-ai":   "xai", "grok": "xai",
	"zai": "zhipu", "z.ai": "zhipu", "z-ai": "zhipu", "glm": "zhipu", "bigmodel": "zhipu",
	"kimi": "moonshot", "moonshotai": "moonshot",
	"together_ai": "together", "togetherai": "together",
	"mistralai": "mistral",
	"llama.cpp": "llamacpp", "llama-cpp": "llamacpp", "llama_cpp": "llamacpp", "llama-server": "llamacpp",
	"lm-studio": "lmstudio", "lm_studio": "lmstudio",
	"openai_compatible": GenericCompany, "openai-compat": GenericCompany, "generic": GenericCompany,
}

// canonicalName lower-cases a provider or company name and resolves aliases.
func canonicalName(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	if a, ok := aliases[n]; ok {
		return a
	}
	return n
}

// LookupCompany returns the row for a company name or one of its aliases.
func LookupCompany(name string) (Company, bool) {
	n := canonicalName(name)
	for _, c := range companies {
		if c.Name == n {
			return c, true
		}
	}
	return Company{}, false
}

// hostSuffixes recognise a company from its API host.
var hostSuffixes = []struct{ suffix, name string }{
	{"api.openai.com", "openai"},
	{".openai.azure.com", "azure"},
	{".cognitiveservices.azure.com", "azure"},
	{".services.ai.azure.com", "azure"},
	{"api.anthropic.com", "anthropic"},
	{"generativelanguage.googleapis.com", "gemini"},
	{"aiplatform.googleapis.com", "gemini"},
	{"openrouter.ai", "openrouter"},
	{"api.groq.com", "groq"},
	{"api.together.xyz", "together"},
	{"api.together.ai", "together"},
	{"api.fireworks.ai", "fireworks"},
	{"api.deepseek.com", "deepseek"},
	{"api.mistral.ai", "mistral"},
	{"api.x.ai", "xai"},
	{"open.bigmodel.cn", "zhipu"},
	{"api.z.ai", "zhipu"},
	{"api.moonshot.ai", "moonshot"},
	{"api.moonshot.cn", "moonshot"},
	{"ollama.com", "ollama"},
}

// defaultPorts recognise the local servers by the port each listens on
// unless told otherwise.
var defaultPorts = map[string]string{
	"11434": "ollama",
	"1234":  "lmstudio",
	"8080":  "llamacpp",
	"8000":  "vllm",
}

// CompanyFromBaseURL guesses the company from a configured base URL
// (api.groq.com → groq, :1234 → lmstudio, :11434 → ollama, :8080 →
// llamacpp, :8000 → vllm, …), falling back to the generic
// "openai-compatible" row. The row returned carries the configured URL, and
// Local says whether that URL points at this computer or its network, which
// is what decides the default window.
func CompanyFromBaseURL(baseURL string) Company {
	raw := strings.TrimSpace(baseURL)
	if raw != "" && !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		c, _ := LookupCompany(GenericCompany)
		return c
	}
	host := strings.ToLower(u.Hostname())
	name := GenericCompany
	for _, h := range hostSuffixes {
		if host == strings.TrimPrefix(h.suffix, ".") || strings.HasSuffix(host, "."+strings.TrimPrefix(h.suffix, ".")) {
			name = h.name
			break
		}
	}
	local := isLocalHost(host)
	if name == GenericCompany && local {
		if n, ok := defaultPorts[u.Port()]; ok {
			name = n
		}
	}
	c, _ := LookupCompany(name)
	c.BaseURL = strings.TrimSpace(baseURL)
	// ollama.com is Ollama's cloud, a remote API; a vLLM or "own" server
	// elsewhere on the internet is remote too.
	c.Local = local
	return c
}

// isLocalHost reports loopback, private and link-local addresses and the
// names that mean this computer or its network.
func isLocalHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") ||
		strings.HasSuffix(host, ".local") || strings.HasSuffix(host, ".lan") ||
		host == "host.docker.internal" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified())
}
