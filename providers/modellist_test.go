package providers

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// listing is one line of testdata/model_lists.jsonl.
type listing struct {
	ID       string  `json:"id"`
	Provider string  `json:"provider"`
	Endpoint string  `json:"endpoint"`
	Body     string  `json:"body"`
	ModelID  *string `json:"model_id"`
	Window   *int    `json:"window"`
	Kind     *string `json:"window_kind"`
	Source   string  `json:"source"`
	BodyForm string  `json:"body_form"`
}

// closeFragment turns a recorded fragment back into the JSON the server
// sent, as far as the fragment goes: it drops a trailing comma, opens an
// object a fragment starts inside, closes what was left open and, when the
// fragment held several items of a list, makes them a list again. It never
// changes a value.
func closeFragment(s string) string {
	s = strings.TrimRight(strings.TrimSpace(s), ",")
	if strings.HasPrefix(s, `"`) {
		s = "{" + s
	}
	var stack []byte
	inStr, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{':
			stack = append(stack, '}')
		case c == '[':
			stack = append(stack, ']')
		case (c == '}' || c == ']') && len(stack) > 0:
			stack = stack[:len(stack)-1]
		}
	}
	for i := len(stack) - 1; i >= 0; i-- {
		s = strings.TrimRight(strings.TrimSpace(s), ",") + string(stack[i])
	}
	if !json.Valid([]byte(s)) && json.Valid([]byte("["+s+"]")) {
		s = "[" + s + "]"
	}
	return s
}

// Figures read off the same bodies for models other than the record's own
// (the bodies list several), checked so a reader cannot pass by taking the
// first or the largest number. 0 means: must be absent.
var alsoInBody = map[string]map[string]int{
	"B021": {"claude-opus-4-8": 1000000, "claude-opus-4-5-20251101": 200000},
	"B025": {"llama-3.1-8b-instant": 131072, "moonshotai/kimi-k2-instruct": 131072},
	// Mistral lists aliases: open-mixtral-8x7b answers to mistral-small.
	"B028": {"open-mixtral-8x7b": 32768, "mistral-small": 32768, "open-mistral-nemo": 131072},
	// An embedding model with no loaded instance: only its maximum is known.
	"B007": {"text-embedding-nomic-embed-text-v1.5-embedding": 0},
	// Gemini ids carry "models/"; callers use the bare name.
	"B030": {"gemini-1.0-pro": 30720},
	"M001": {"qwen2-vl-7b-instruct": 0, "text-embedding-nomic-embed-text-v1.5": 0},
}

func TestWindowsFromRealModelLists(t *testing.T) {
	recs := loadJSONL[listing](t, "testdata/model_lists.jsonl")
	if len(recs) < 15 {
		t.Fatalf("only %d model-list bodies", len(recs))
	}
	for _, r := range recs {
		t.Run(r.ID+"_"+r.Provider, func(t *testing.T) {
			if r.Source == "" {
				t.Error("no source")
			}
			body := r.Body
			if !json.Valid([]byte(body)) {
				body = closeFragment(body)
			}
			got, err := WindowsFromModelList(r.Provider, []byte(body))
			if err != nil {
				t.Fatalf("WindowsFromModelList: %v (body %s)", err, body)
			}
			id := UnnamedModel
			if r.ModelID != nil && !describesOneModel(r.Endpoint) {
				id = *r.ModelID
			}
			w, ok := got[id]
			switch {
			case r.Window == nil && ok:
				t.Errorf("%q got window %d, want none (the body gives no usable figure)", id, w)
			case r.Window == nil && got[UnnamedModel] != 0:
				t.Errorf("an unnamed window %d appeared", got[UnnamedModel])
			case r.Window != nil && w != *r.Window:
				t.Errorf("%q window = %d (present %v), want %d; all: %v", id, w, ok, *r.Window, got)
			}
			for other, want := range alsoInBody[r.ID] {
				if g := got[other]; g != want {
					t.Errorf("%q window = %d, want %d", other, g, want)
				}
			}
		})
	}
}

// describesOneModel: these endpoints answer about the model the request
// named (or the one loaded) and do not repeat its id.
func describesOneModel(endpoint string) bool {
	return strings.Contains(endpoint, "/api/show") || strings.Contains(endpoint, "/props")
}

func TestWindowsFromModelListShapes(t *testing.T) {
	cases := map[string]struct {
		provider string
		body     string
		want     map[string]int
	}{
		"openrouter without top provider": {"openrouter",
			`{"data":[{"id":"a/b","context_length":65536,"top_provider":null}]}`, map[string]int{"a/b": 65536}},
		"openrouter top provider smaller wins": {"openrouter",
			`{"data":[{"id":"a/b","context_length":1048576,"top_provider":{"context_length":131072}}]}`, map[string]int{"a/b": 131072}},
		"lm studio v0 loaded": {"lmstudio",
			`{"data":[{"id":"m","state":"loaded","max_context_length":131072,"loaded_context_length":8192},{"id":"n","state":"not-loaded","max_context_length":32768}]}`,
			map[string]int{"m": 8192}},
		"lm studio v0 loaded without a figure is unknown": {"lmstudio",
			`{"data":[{"id":"m","state":"loaded","max_context_length":131072}]}`, map[string]int{}},
		"lm studio max is ignored even if the provider name is wrong": {"openai-compatible",
			`{"models":[{"key":"m","loaded_instances":[],"max_context_length":32768}]}`, map[string]int{}},
		"llama.cpp meta n_ctx, router placeholder 0 skipped": {"llamacpp",
			`{"data":[{"id":"q","meta":{"n_ctx":40192,"n_ctx_train":262144}},{"id":"idle","meta":{"n_ctx":0}}]}`, map[string]int{"q": 40192}},
		"llama.cpp newer top-level n_ctx in /props": {"llamacpp", `{"n_ctx":16384,"default_generation_settings":{"n_ctx":16384}}`, map[string]int{"": 16384}},
		"ollama show without general.architecture": {"ollama",
			`{"model_info":{"qwen3.context_length":40960,"qwen3.block_count":36}}`, map[string]int{"": 40960}},
		"ollama tags carry no window": {"ollama",
			`{"models":[{"name":"llama3:8b","model":"llama3:8b","size":4661224676}]}`, map[string]int{}},
		"copilot item with id": {"github_copilot",
			`{"data":[{"id":"gpt-4.1","capabilities":{"family":"gpt-4.1","limits":{"max_context_window_tokens":128000,"max_prompt_tokens":111616,"max_output_tokens":16384}}}]}`,
			map[string]int{"gpt-4.1": 111616}},
		"alias never overrides a listed id": {"mistral",
			`{"data":[{"id":"a","max_context_length":32768,"aliases":["b"]},{"id":"b","max_context_length":131072}]}`,
			map[string]int{"a": 32768, "b": 131072}},
		"numbers as strings, junk ignored": {"openai-compatible",
			`{"data":[{"id":"s","context_length":"32768"},{"id":"neg","context_length":-1},{"id":"nan","context_length":"lots"}]}`,
			map[string]int{"s": 32768}},
		"empty list": {"openai", `{"object":"list","data":[]}`, map[string]int{}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := WindowsFromModelList(c.provider, []byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
			for k, w := range c.want {
				if got[k] != w {
					t.Errorf("%q = %d, want %d (all %v)", k, got[k], w, got)
				}
			}
		})
	}
}

func TestWindowsFromModelListRejectsNonJSON(t *testing.T) {
	for name, body := range map[string]string{
		"html":  "<html>502 Bad Gateway</html>",
		"empty": "",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := WindowsFromModelList("vllm", []byte(body))
			if !errors.Is(err, ErrNotJSON) {
				t.Errorf("err = %v, want ErrNotJSON", err)
			}
		})
	}
}
