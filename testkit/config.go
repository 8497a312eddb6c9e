package testkit

import "github.com/agentd/agentd/configs"

// Config is agentd's configuration for one OpenAI-style fake: provider
// "fake" at baseURL serving model "m" with the given window, data in dir,
// defaults applied, except that chats fill the fake's window
// (limits.compact_threshold -1) and folds go as lines (fold_as_lines): the
// tests were written for those.
func Config(dir, baseURL string, window int) configs.Config {
	cfg := configs.Config{DataDir: dir, DefaultModel: "fake/m", Providers: []configs.Provider{{
		Name: "fake", Kind: "openai", Company: "vllm", BaseURL: baseURL,
		Models: []configs.Model{{ID: "m", Window: window}},
	}}, Limits: configs.Limits{CompactThreshold: -1, FoldAsLines: true}}
	cfg.ApplyDefaults()
	return cfg
}
