package modelcatalog

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/providers"
)

// listed is a provider client whose model list says one window.
type listed struct{ info providers.ModelInfo }

func (l listed) Stream(context.Context, providers.Request, func(providers.Event)) (providers.Response, error) {
	return providers.Response{}, nil
}

func (l listed) Models(context.Context) ([]providers.ModelInfo, error) {
	return []providers.ModelInfo{l.info}, nil
}

// Issue 16: the window a server on this computer says it runs bounds a
// configured one; a remote list does not (there the config overrides it).
func TestListedWindowBoundsConfiguredOnLocalServers(t *testing.T) {
	tests := map[string]struct {
		company            string
		configured, listed int
		want               int
		source             string
	}{
		"local server runs less than configured": {"llamacpp", 32768, 2048, 2048, providers.SourceList},
		"configured under the local server's":    {"llamacpp", 1024, 2048, 1024, providers.SourceConfig},
		"remote list is overridden by config":    {"openai", 1047576, 128000, 1047576, providers.SourceConfig},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			company, ok := providers.LookupCompany(tc.company)
			if !ok {
				t.Fatalf("no company %s", tc.company)
			}
			c, err := New(context.Background(), nil, nil, nil, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			cfg := configs.Provider{Name: "p", Kind: "openai", Models: []configs.Model{{ID: "m", Window: tc.configured}}}
			c.entries["p"] = &entry{cfg: cfg, company: company, client: listed{providers.ModelInfo{ID: "m", Window: tc.listed, WindowSource: providers.SourceList, Local: company.Local}}}
			c.order = []string{"p"}
			c.Refresh(context.Background())
			_, mi, err := c.Resolve("p/m")
			if err != nil {
				t.Fatal(err)
			}
			if mi.Window != tc.want || mi.WindowSource != tc.source {
				t.Errorf("window %d (%s), want %d (%s)", mi.Window, mi.WindowSource, tc.want, tc.source)
			}
		})
	}
}
