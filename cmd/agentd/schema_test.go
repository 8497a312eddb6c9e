package main

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/agentd/agentd/configs"
)

// exampleYAML is the documented example configuration.
const exampleYAML = "../../configs/agentd.yaml"

// resolvedSchema is what `agentd schema` prints, ready to validate with.
func resolvedSchema(t *testing.T) (*jsonschema.Resolved, map[string]any) {
	t.Helper()
	b, err := json.Marshal(configSchema())
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	return rs, raw
}

// asJSON reads yaml into the values JSON would give (numbers as float64).
func asJSON(t *testing.T, text string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// schemaKeys lists every property name of the schema, following $refs.
func schemaKeys(node map[string]any, defs map[string]any, seen map[string]bool, out map[string]bool) {
	if ref, ok := node["$ref"].(string); ok {
		name := ref[strings.LastIndex(ref, "/")+1:]
		if !seen[name] {
			seen[name] = true
			schemaKeys(defs[name].(map[string]any), defs, seen, out)
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if sub, ok := node[k].(map[string]any); ok {
			schemaKeys(sub, defs, seen, out)
		}
	}
	if alts, ok := node["oneOf"].([]any); ok {
		for _, a := range alts {
			schemaKeys(a.(map[string]any), defs, seen, out)
		}
	}
	props, _ := node["properties"].(map[string]any)
	for k, v := range props {
		out[k] = true
		schemaKeys(v.(map[string]any), defs, seen, out)
	}
}

// The example configuration and the schema are held together: the yaml
// validates, loads, and names every key the schema has (commented-out
// examples count: they show the key).
func TestExampleConfigDocumentsEveryKeyAndValidates(t *testing.T) {
	b, err := os.ReadFile(exampleYAML)
	if err != nil {
		t.Fatal(err)
	}
	rs, raw := resolvedSchema(t)
	if err := rs.Validate(asJSON(t, string(b))); err != nil {
		t.Fatalf("%s does not validate against `agentd schema`: %v", exampleYAML, err)
	}
	if _, err := configs.Load(exampleYAML); err != nil {
		t.Fatalf("agentd does not load %s: %v", exampleYAML, err)
	}
	keys := map[string]bool{}
	schemaKeys(raw, raw["$defs"].(map[string]any), map[string]bool{}, keys)
	if len(keys) < 50 {
		t.Fatalf("found only %d keys in the schema: the walk is broken", len(keys))
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !regexp.MustCompile(`(?m)^[\s#-]*` + regexp.QuoteMeta(k) + `:`).Match(b) {
			t.Errorf("%s does not document the key %q", exampleYAML, k)
		}
	}
	// The check can fail: a misspelt key or a wrong type does not validate.
	for _, bad := range []string{"listn: 127.0.0.1:8420\n", "idle_after: soon\n", "limits:\n  turns_per_chat: four\n"} {
		if rs.Validate(asJSON(t, bad)) == nil {
			t.Errorf("%q validates", bad)
		}
	}
}

func TestStartWarnsOfAnUnsetKeyAndAnUnlistedDefaultModel(t *testing.T) {
	cfg := configs.Config{DefaultModel: "cloud/gpt-x", Providers: []configs.Provider{{Name: "cloud", Kind: "openai",
		APIKeyEnv: "AGENTD_TEST_NO_SUCH_KEY", Models: []configs.Model{{ID: "gpt-4.1"}}}}}
	cfg.ApplyDefaults()
	var buf strings.Builder
	logConfig(zerolog.New(&buf), cfg, 1, func(string) string { return "" })
	var warned []string
	for line := range strings.Lines(buf.String()) {
		var ev struct{ Level, Message string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if ev.Level == "warn" {
			warned = append(warned, ev.Message)
		}
	}
	if len(warned) != 2 || !strings.Contains(warned[0], "AGENTD_TEST_NO_SUCH_KEY, which is not set") || !strings.Contains(warned[1], "default_model cloud/gpt-x is not in provider cloud's models") {
		t.Fatalf("warnings at start: %q", warned)
	}
}

// A provider configured without models: and no default_model is a working
// setup (a new chat takes the first listed model), and the start says so.
func TestStartSaysWhereANewChatsModelComesFrom(t *testing.T) {
	cfg := configs.Config{Providers: []configs.Provider{{Name: "ol", Kind: "ollama", BaseURL: "http://127.0.0.1:11434"}}}
	cfg.ApplyDefaults()
	var buf strings.Builder
	logConfig(zerolog.New(&buf), cfg, 1, func(string) string { return "" })
	if out := buf.String(); strings.Contains(out, "must name one") || !strings.Contains(out, "takes the first one a provider lists") {
		t.Fatalf("start log: %s", out)
	}
}
