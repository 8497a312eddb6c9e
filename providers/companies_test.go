package providers

import (
	"net/url"
	"testing"
)

func TestCompanyFromBaseURL(t *testing.T) {
	cases := map[string]struct {
		url   string
		name  string
		kind  string
		local bool
	}{
		"openai":                            {"https://api.openai.com/v1", "openai", KindOpenAI, false},
		"groq":                              {"https://api.groq.com/openai/v1", "groq", KindOpenAI, false},
		"azure resource":                    {"https://my-res.openai.azure.com/openai/v1", "azure", KindOpenAI, false},
		"anthropic":                         {"https://api.anthropic.com", "anthropic", KindAnthropic, false},
		"gemini openai endpoint":            {"https://generativelanguage.googleapis.com/v1beta/openai/", "gemini", KindOpenAI, false},
		"openrouter":                        {"https://openrouter.ai/api/v1", "openrouter", KindOpenAI, false},
		"together new host":                 {"https://api.together.ai/v1", "together", KindOpenAI, false},
		"deepseek without v1":               {"https://api.deepseek.com", "deepseek", KindOpenAI, false},
		"xai":                               {"https://api.x.ai/v1", "xai", KindOpenAI, false},
		"zhipu international":               {"https://api.z.ai/api/paas/v4", "zhipu", KindOpenAI, false},
		"moonshot china":                    {"https://api.moonshot.cn/v1", "moonshot", KindOpenAI, false},
		"mixed case host":                   {"HTTPS://API.MISTRAL.AI/v1", "mistral", KindOpenAI, false},
		"lm studio port":                    {"http://localhost:1234/v1", "lmstudio", KindOpenAI, true},
		"ollama port":                       {"http://127.0.0.1:11434", "ollama", KindOllama, true},
		"llama.cpp port":                    {"http://[::1]:8080/v1", "llamacpp", KindOpenAI, true},
		"vllm port on the LAN":              {"http://192.168.1.20:8000/v1", "vllm", KindOpenAI, true},
		"no scheme":                         {"localhost:1234/v1", "lmstudio", KindOpenAI, true},
		"ollama cloud is remote":            {"https://ollama.com", "ollama", KindOllama, false},
		"own server, other port":            {"http://localhost:5000/v1", GenericCompany, KindOpenAI, true},
		"remote port 8080 is not llama.cpp": {"https://llm.example.com:8080/v1", GenericCompany, KindOpenAI, false},
		"lookalike host":                    {"https://api.openai.com.evil.example/v1", GenericCompany, KindOpenAI, false},
		"empty":                             {"", GenericCompany, KindOpenAI, false},
		"garbage":                           {"::not a url::", GenericCompany, KindOpenAI, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := CompanyFromBaseURL(c.url)
			if got.Name != c.name || got.Kind != c.kind || got.Local != c.local {
				t.Errorf("got %s/%s local=%v, want %s/%s local=%v", got.Name, got.Kind, got.Local, c.name, c.kind, c.local)
			}
			if c.name != GenericCompany && got.BaseURL != c.url {
				t.Errorf("BaseURL = %q, want the configured %q", got.BaseURL, c.url)
			}
		})
	}
}

func TestLookupCompanyAliases(t *testing.T) {
	cases := map[string]string{
		"openai": "openai", "Google": "gemini", "vertex": "gemini", "azure_openai": "azure",
		"llama.cpp": "llamacpp", "LM-Studio": "lmstudio", "z.ai": "zhipu", "kimi": "moonshot",
		"x-ai": "xai", " ollama ": "ollama",
	}
	for in, want := range cases {
		t.Run(in, func(t *testing.T) {
			c, ok := LookupCompany(in)
			if !ok || c.Name != want {
				t.Errorf("LookupCompany(%q) = %q, %v; want %q", in, c.Name, ok, want)
			}
		})
	}
	if _, ok := LookupCompany("no-such-company"); ok {
		t.Error("an unknown name must not be found")
	}
}

// TestCompanyTable checks the table's own promises, row by row.
func TestCompanyTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range companies {
		t.Run(c.Name, func(t *testing.T) {
			if seen[c.Name] {
				t.Fatal("duplicate row")
			}
			seen[c.Name] = true
			switch c.Kind {
			case KindOpenAI, KindAnthropic, KindOllama:
			default:
				t.Errorf("kind %q", c.Kind)
			}
			// Remote companies name both models; local rows and Azure
			// (deployment names are the operator's) leave them to the
			// chat's own model or the yaml.
			remoteWithModels := !c.Local && c.Name != "azure" && c.Name != GenericCompany
			if remoteWithModels && (c.Cheapest == "" || c.Small == "") {
				t.Errorf("remote company without cheapest/small models: %+v", c)
			}
			if c.Local && (c.Cheapest != "" || c.Small != "") {
				t.Errorf("a local row must not name a second model to load: %+v", c)
			}
			if c.BaseURL == "" {
				return
			}
			if _, err := url.Parse(c.BaseURL); err != nil {
				t.Fatalf("BaseURL: %v", err)
			}
			// The row's own URL must lead back to the row.
			back := CompanyFromBaseURL(c.BaseURL)
			if back.Name != c.Name || back.Local != c.Local {
				t.Errorf("CompanyFromBaseURL(%q) = %s local=%v", c.BaseURL, back.Name, back.Local)
			}
		})
	}
	for _, want := range []string{"openai", "azure", "anthropic", "gemini", "openrouter", "groq", "together",
		"fireworks", "deepseek", "mistral", "xai", "zhipu", "moonshot", "vllm", "llamacpp", "lmstudio", "ollama", GenericCompany} {
		if !seen[want] {
			t.Errorf("table lacks %s", want)
		}
	}
}
