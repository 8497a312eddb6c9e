package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// UnnamedModel is the key WindowsFromModelList uses for a model-info body
// that does not name its model (Ollama /api/show, llama.cpp /props): the
// caller asked about one model and knows which.
const UnnamedModel = ""

// ErrNotJSON means a model-list body could not be read as JSON.
var ErrNotJSON = errors.New("model list is not JSON")

// WindowsFromModelList reads per-model context windows from a model-list or
// model-info body of that company: context_length and cousins, OpenRouter
// context_length (+top_provider), Anthropic max_input_tokens, vLLM
// max_model_len, LM Studio loaded_context_length (the LOADED window; an
// unloaded model gets no figure, so the caller uses the small default),
// llama.cpp n_ctx (from /props or /v1/models meta), Groq context_window,
// Mistral max_context_length, Ollama /api/show model_info
// "<arch>.context_length", Gemini inputTokenLimit, Copilot
// capabilities.limits.max_prompt_tokens.
//
// Where an entry names several figures the smallest wins: each is a limit the
// server enforces on the same request (OpenRouter's top provider may serve
// less than the model reads; Copilot caps the prompt below its window).
// Trained maxima that the server does not run at are never taken: LM Studio
// max_context_length, llama.cpp n_ctx_train. A model with no figure is left
// out of the map; a body with no model at all gives an empty map, not an error.
func WindowsFromModelList(provider string, body []byte) (map[string]int, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("%s model list: %w: %v", provider, ErrNotJSON, err)
	}
	lmstudio := canonicalName(provider) == "lmstudio"
	out := map[string]int{}
	aliasOf := map[string]int{}
	for _, e := range entries(root) {
		w := entryWindow(e, lmstudio)
		if w <= 0 {
			continue
		}
		id := entryID(e)
		out[id] = w
		for _, a := range entryAliases(e, id) {
			aliasOf[a] = w
		}
	}
	// An alias never overrides a model listed under that id itself.
	for a, w := range aliasOf {
		if _, ok := out[a]; !ok {
			out[a] = w
		}
	}
	return out, nil
}

// entries finds the model objects: data[] (OpenAI style), models[] (LM
// Studio v1, Ollama /api/ps and /api/tags, llama.cpp), a bare array, or the
// body itself when it describes one model.
func entries(root any) []map[string]any {
	var out []map[string]any
	add := func(v any) {
		for _, item := range asSlice(v) {
			if m, ok := item.(map[string]any); ok {
				out = append(out, m)
			}
		}
	}
	switch r := root.(type) {
	case []any:
		add(r)
	case map[string]any:
		_, hasData := r["data"].([]any)
		_, hasModels := r["models"].([]any)
		if !hasData && !hasModels {
			return []map[string]any{r}
		}
		add(r["data"])
		add(r["models"])
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// entryID names the model an entry is about.
func entryID(e map[string]any) string {
	if _, isChat := e["choices"]; isChat {
		// An LM Studio chat response: id is the completion's, model the model's.
		return str(e["model"])
	}
	for _, k := range []string{"id", "key", "name", "model", "model_alias"} {
		if s := str(e[k]); s != "" {
			return s
		}
	}
	if caps, ok := e["capabilities"].(map[string]any); ok {
		return str(caps["family"])
	}
	return UnnamedModel
}

// entryAliases lists other names the same entry answers to: Mistral's
// aliases, and Gemini's "models/x" without its prefix.
func entryAliases(e map[string]any, id string) []string {
	var out []string
	for _, a := range asSlice(e["aliases"]) {
		if s := str(a); s != "" && s != id {
			out = append(out, s)
		}
	}
	if rest, ok := strings.CutPrefix(id, "models/"); ok && rest != "" {
		out = append(out, rest)
	}
	return out
}

// windowKeys are the top-level cousins of context_length that name the
// window a server enforces.
var windowKeys = []string{
	"context_length", "context_window", "max_context_length", "max_model_len",
	"max_input_tokens", "inputTokenLimit", "input_token_limit", "n_ctx",
	"contextLength", "context_size", "max_prompt_tokens", "loaded_context_length",
}

// entryWindow is the smallest window an entry names, 0 when it names none.
func entryWindow(e map[string]any, lmstudio bool) int {
	// LM Studio lists every downloaded model with the maximum it could be
	// loaded with; only a loaded instance says what it runs with now.
	if _, v1 := e["loaded_instances"]; v1 {
		lmstudio = true
	}
	if _, v0 := e["state"]; v0 {
		// v0 lists loaded_context_length only for a loaded model.
		lmstudio = true
	}
	var ws []int
	for _, k := range windowKeys {
		if lmstudio && k == "max_context_length" {
			continue
		}
		ws = append(ws, intOf(e[k]))
	}
	ws = append(ws, intOf(dig(e, "top_provider", "context_length")))
	for _, inst := range asSlice(e["loaded_instances"]) {
		ws = append(ws, intOf(dig(inst, "config", "context_length")))
	}
	ws = append(ws, intOf(dig(e, "default_generation_settings", "n_ctx")), intOf(dig(e, "meta", "n_ctx")))
	ws = append(ws, intOf(dig(e, "capabilities", "limits", "max_prompt_tokens")),
		intOf(dig(e, "capabilities", "limits", "max_context_window_tokens")))
	ws = append(ws, modelInfoWindow(e["model_info"]))
	return smallestPositive(ws)
}

// modelInfoWindow reads Ollama /api/show "<arch>.context_length" (any arch
// when general.architecture is missing) and LM Studio's model_info.
func modelInfoWindow(v any) int {
	mi, ok := v.(map[string]any)
	if !ok {
		return 0
	}
	if n := intOf(mi["context_length"]); n > 0 {
		return n
	}
	if arch := str(mi["general.architecture"]); arch != "" {
		if n := intOf(mi[arch+".context_length"]); n > 0 {
			return n
		}
	}
	var ws []int
	for k, x := range mi {
		if strings.HasSuffix(k, ".context_length") {
			ws = append(ws, intOf(x))
		}
	}
	return smallestPositive(ws)
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func str(v any) string {
	s, _ := v.(string)
	return strings.TrimSpace(s)
}

// intOf reads a JSON number (or a numeric string) as a token count; anything
// else, negative or absurd is 0.
func intOf(v any) int {
	var f float64
	switch x := v.(type) {
	case json.Number:
		g, err := x.Float64()
		if err != nil {
			return 0
		}
		f = g
	case string:
		var g float64
		if _, err := fmt.Sscanf(strings.TrimSpace(x), "%g", &g); err != nil {
			return 0
		}
		f = g
	default:
		return 0
	}
	if math.IsNaN(f) || f < 1 || f > maxPlausibleWindow {
		return 0
	}
	return int(f)
}

func smallestPositive(ws []int) int {
	best := 0
	for _, w := range ws {
		if w > 0 && (best == 0 || w < best) {
			best = w
		}
	}
	return best
}
