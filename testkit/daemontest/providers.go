package daemontest

import (
	"fmt"

	"github.com/agentd/agentd/configs"
)

// Kinds are the three protocols a provider may speak, in the order tests
// that run through each of them use.
var Kinds = []string{"openai", "anthropic", "ollama"}

// company is the row of the company table each kind's fake stands for: an
// OpenAI-style server of the operator's own (vLLM, as Config uses), Anthropic
// itself, and an Ollama on this computer.
var company = map[string]string{"openai": "vllm", "anthropic": "anthropic", "ollama": "ollama"}

// ConfigFor returns a configuration with one provider of the given kind
// ("openai", "anthropic" or "ollama") named "fake" at baseURL, serving model
// "m" with the given window (0: none configured), data in dir. More models
// may be appended to Providers[0].Models before Start. Chats fill their
// window and fold as lines, as with testkit.Config.
func ConfigFor(kind, dir, baseURL string, window int) (configs.Config, error) {
	comp, ok := company[kind]
	if !ok {
		return configs.Config{}, fmt.Errorf("daemontest: kind %q is not openai, anthropic or ollama", kind)
	}
	cfg := configs.Config{DataDir: dir, DefaultModel: "fake/m", Providers: []configs.Provider{{
		Name: "fake", Kind: kind, Company: comp, BaseURL: baseURL,
		Models: []configs.Model{{ID: "m", Window: window}},
	}}, Limits: configs.Limits{CompactThreshold: -1, FoldAsLines: true}} // as testkit.Config
	cfg.ApplyDefaults()
	return cfg, nil
}
