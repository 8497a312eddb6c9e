package openai

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"

	"github.com/agentd/agentd/providers"
)

// TestModelsLocalServers: LM Studio's window is the one a model is LOADED
// with, and an unloaded model counts as small; llama.cpp's is the n_ctx it
// runs with, from /props.
func TestModelsLocalServers(t *testing.T) {
	lmBody, err := os.ReadFile("testdata/lmstudio_api_v1_models.json")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/models", func(w http.ResponseWriter, r *http.Request) { w.Write(lmBody) })
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		// llama.cpp's list names its model and the trained maximum only.
		fmt.Fprint(w, `{"object":"list","data":[{"id":"qwen2.5-7b-instruct-q4_k_m.gguf","object":"model","owned_by":"llamacpp","meta":{"n_ctx_train":131072}}]}`)
	})
	mux.HandleFunc("GET /props", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"default_generation_settings":{"n_ctx":32768}}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	gemma := providers.ModelInfo{Provider: "p", ID: "gemma-3-270m-it-qat", Window: 4096, WindowSource: providers.SourceList, Local: true, Loaded: true}
	cases := []struct {
		company string
		cfg     Config
		want    []providers.ModelInfo
	}{
		{company: "lmstudio", want: []providers.ModelInfo{gemma}},
		{company: "lmstudio", cfg: Config{Models: []string{"gemma-3-270m-it-qat", "not-loaded"}},
			want: []providers.ModelInfo{gemma, {Provider: "p", ID: "not-loaded", Window: providers.DefaultLocalWindow, WindowSource: providers.SourceDefault, Local: true}}},
		{company: "llamacpp", want: []providers.ModelInfo{{Provider: "p", ID: "qwen2.5-7b-instruct-q4_k_m.gguf", Window: 32768, WindowSource: providers.SourceList, Local: true, Loaded: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.company, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Name, cfg.Company, cfg.BaseURL = "p", tc.company, srv.URL+"/v1"
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Models(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
