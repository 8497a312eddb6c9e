package hub

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/modelcatalog"
)

// With no model to take a turn, the help names the provider that does not
// answer and why; only when nothing was configured does it say how to set
// one up.
func TestNoModelHelp(t *testing.T) {
	down := "http://127.0.0.1:1"
	tests := map[string]struct {
		providers []configs.Provider
		want      []string
		not       []string
	}{
		"configured provider down": {
			[]configs.Provider{{Name: "mine", Kind: "ollama", BaseURL: down}},
			[]string{"Provider mine does not answer", "connection refused", "POST /v1/models/refresh"},
			[]string{"Configure a model provider"},
		},
		"nothing configured": {
			nil,
			[]string{"Configure a model provider"},
			nil,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cat, err := modelcatalog.New(context.Background(), tc.providers, nil, nil, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			cat.Refresh(context.Background())
			h := &Hub{cfg: configs.Config{Providers: tc.providers}, catalog: cat}
			got := h.noModelHelp()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("help %q lacks %q", got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("help %q says %q", got, n)
				}
			}
		})
	}
	if !onlyDefaultOllama([]configs.Provider{{Name: "ollama", Kind: "ollama", BaseURL: configs.DefaultOllamaURL}}) {
		t.Error("the default Ollama is not recognised")
	}
}
