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

// TestModelsOlderLMStudio: LM Studio before 0.4 has no /api/v1/models and
// answers a path it does not serve with 200 and an error object
// (lmstudio-ai/lmstudio-bug-tracker#618). Its /api/v0/models then says which
// model is loaded and with what window
// (https://lmstudio.ai/docs/developer/rest/endpoints), its embedding model
// no chat model; with neither native list the OpenAI-compatible one still
// names the models.
func TestModelsOlderLMStudio(t *testing.T) {
	unknown := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		fmt.Fprintf(w, `{"error":"Unexpected endpoint or method. (%s %s)"}`, r.Method, r.URL.Path)
	}
	v0 := `{"object":"list","data":[
		{"id":"qwen2-vl-7b-instruct","object":"model","type":"vlm","publisher":"mlx-community","arch":"qwen2_vl","compatibility_type":"mlx","quantization":"4bit","state":"loaded","max_context_length":32768,"loaded_context_length":16384},
		{"id":"meta-llama-3.1-8b-instruct","object":"model","type":"llm","publisher":"lmstudio-community","arch":"llama","compatibility_type":"gguf","quantization":"Q4_K_M","state":"not-loaded","max_context_length":131072},
		{"id":"text-embedding-nomic-embed-text-v1.5","object":"model","type":"embeddings","publisher":"nomic-ai","arch":"nomic-bert","compatibility_type":"gguf","quantization":"Q4_0","state":"loaded","max_context_length":2048,"loaded_context_length":2048}]}`
	openAIList := `{"object":"list","data":[{"id":"qwen2-vl-7b-instruct","object":"model","owned_by":"organization_owner"},{"id":"meta-llama-3.1-8b-instruct","object":"model","owned_by":"organization_owner"}]}`
	qwen := providers.ModelInfo{Provider: "p", ID: "qwen2-vl-7b-instruct", Local: true}
	llama := providers.ModelInfo{Provider: "p", ID: "meta-llama-3.1-8b-instruct", Window: providers.DefaultLocalWindow, WindowSource: providers.SourceDefault, Local: true}
	cases := map[string]struct {
		v0   bool
		want []providers.ModelInfo
	}{
		"0.3 with /api/v0": {v0: true, want: []providers.ModelInfo{llama, func() providers.ModelInfo {
			m := qwen
			m.Window, m.WindowSource, m.Loaded = 16384, providers.SourceList, true
			return m
		}()}},
		"OpenAI-compatible list only": {want: []providers.ModelInfo{func() providers.ModelInfo {
			m := llama
			m.Loaded = true
			return m
		}(), func() providers.ModelInfo {
			m := qwen
			m.Window, m.WindowSource, m.Loaded = providers.DefaultLocalWindow, providers.SourceDefault, true
			return m
		}()}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("/", unknown)
			if tc.v0 {
				mux.HandleFunc("GET /api/v0/models", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, v0) })
			}
			mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, openAIList) })
			srv := httptest.NewServer(mux)
			defer srv.Close()
			c, err := New(Config{Name: "p", Company: "lmstudio", BaseURL: srv.URL + "/v1"})
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
