package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/httpapi/oai"
)

var updateOpenAPI = flag.Bool("update", false, "rewrite openapi.json's component schemas from the api package's types")

// notAPIRoutes are registered patterns that are not the native API: the
// console's pages and the catch-all that answers 404 under /v1/.
var notAPIRoutes = []string{"/", "/v1/"}

// wireTypes are the api types the document's components describe; the
// types they hold come along.
var wireTypes = []any{
	api.Error{}, api.CreateChatRequest{}, api.Chat{}, api.ChatList{}, api.PatchChatRequest{},
	api.SendMessageRequest{}, api.CompactRequest{}, api.Compacted{}, api.Message{}, api.TurnResult{},
	api.Context{}, api.Event{}, api.Models{}, api.Memory{}, api.MemoryRun{}, api.Health{},
	api.PutToolsetRequest{}, api.Toolset{}, api.ToolResultsRequest{}, api.Attachment{},
	api.ActivityPage{}, api.Waiting{}, api.ToolProgress{}, api.MemoriesLearned{}, api.ChatExport{}, api.EditMemoryRequest{},
}

type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas   map[string]json.RawMessage `json:"schemas"`
		Responses map[string]json.RawMessage `json:"responses"`
	} `json:"components"`
}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc
}

// registeredRoutes lists the server's patterns as "METHOD /path", with
// every route a configuration can add (/metrics on the API's port).
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	var cfg configs.Config
	cfg.ApplyDefaults()
	cfg.Metrics.Listen = ""
	s := New(brokenHub{}, cfg, nil, zerolog.Nop())
	var out []string
	for _, p := range s.mux.patterns {
		if !slices.Contains(notAPIRoutes, p) {
			// OpenAPI has no wildcard of several segments: {x...} is {x}.
			out = append(out, strings.ReplaceAll(p, "...}", "}"))
		}
	}
	return out
}

func TestOpenAPIDocumentsExactlyTheRegisteredRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("openapi %q, want 3.1.x", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	registered := map[string]bool{}
	for _, p := range registeredRoutes(t) {
		method, path, ok := strings.Cut(p, " ")
		if !ok || method == "" {
			t.Errorf("route %q has no method: give it one, or list it in notAPIRoutes with why", p)
			continue
		}
		registered[p] = true
		if !documented[method+" "+path] {
			t.Errorf("route %s is registered but not in httpapi/openapi.json", p)
		}
	}
	for op := range documented {
		if !registered[op] {
			t.Errorf("openapi.json documents %s, which the server does not register", op)
		}
	}
}

// TestOpenAPIIsWellFormed checks what a client generator needs: every
// operation answers something, every path parameter is declared, and every
// $ref leads to a schema.
func TestOpenAPIIsWellFormed(t *testing.T) {
	doc := loadOpenAPI(t)
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			var op struct {
				OperationID string                     `json:"operationId"`
				Responses   map[string]json.RawMessage `json:"responses"`
				Parameters  []struct {
					Name string `json:"name"`
					In   string `json:"in"`
				} `json:"parameters"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			if op.OperationID == "" || len(op.Responses) == 0 {
				t.Errorf("%s %s: needs an operationId and at least one response", method, path)
			}
			for _, seg := range strings.Split(path, "/") {
				name, ok := strings.CutPrefix(seg, "{")
				if !ok {
					continue
				}
				name = strings.TrimSuffix(name, "}")
				if !slices.ContainsFunc(op.Parameters, func(p struct {
					Name string `json:"name"`
					In   string `json:"in"`
				}) bool {
					return p.Name == name && p.In == "path"
				}) {
					t.Errorf("%s %s: path parameter %q is not declared", method, path, name)
				}
			}
		}
	}
	var refs []string
	collectRefs(t, openAPI, &refs)
	for _, ref := range refs {
		var found bool
		if name, ok := strings.CutPrefix(ref, "#/components/schemas/"); ok {
			_, found = doc.Components.Schemas[name]
		} else if name, ok := strings.CutPrefix(ref, "#/components/responses/"); ok {
			_, found = doc.Components.Responses[name]
		}
		if !found {
			t.Errorf("$ref %q leads nowhere", ref)
		}
	}
}

func collectRefs(t *testing.T, raw []byte, refs *[]string) {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && k == "$ref" {
					*refs = append(*refs, s)
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
}

// wireSchemas reflects wireTypes into OpenAPI component schemas.
func wireSchemas(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	r := jsonschema.Reflector{Anonymous: true}
	out := map[string]json.RawMessage{}
	for _, v := range wireTypes {
		for name, s := range r.Reflect(v).Definitions {
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = bytes.ReplaceAll(b, []byte(`"#/$defs/`), []byte(`"#/components/schemas/`))
		}
	}
	return out
}

func TestOpenAPISchemasAreTheWireTypes(t *testing.T) {
	want := wireSchemas(t)
	if *updateOpenAPI {
		var doc map[string]any
		if err := json.Unmarshal(openAPI, &doc); err != nil {
			t.Fatal(err)
		}
		doc["components"].(map[string]any)["schemas"] = want
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("openapi.json", append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got := loadOpenAPI(t).Components.Schemas
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if !jsonEqual(t, got[n], want[n]) {
			t.Errorf("component %s differs from api.%s; run go test ./httpapi -run TestOpenAPISchemas -update", n, n)
		}
	}
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func TestOpenAPIIsServedWithoutAToken(t *testing.T) {
	var cfg configs.Config
	cfg.ApplyDefaults()
	s := New(brokenHub{}, cfg, map[string]string{"secret": "acme"}, zerolog.Nop())
	req := httptest.NewRequest(http.MethodGet, "/openapi.json", nil)
	req.Host = "127.0.0.1"
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || !bytes.Equal(rec.Body.Bytes(), openAPI) {
		t.Fatalf("status %d, type %q: want 200 and the embedded document", rec.Code, rec.Header().Get("Content-Type"))
	}
}

// TestOpenAIPathsAreTheOpenAIRoutes: every route the OpenAI surface mounts
// is in OpenAI's namespace and every native route under /v1/ is not, so a
// refusal before a handler runs is in the shape of the route's own errors.
// A native route under a new prefix fails here until nativePrefixes has it.
func TestOpenAIPathsAreTheOpenAIRoutes(t *testing.T) {
	var cfg configs.Config
	cfg.ApplyDefaults()
	surface := oai.New(brokenHub{}, cfg, zerolog.Nop())
	openAI := map[string]bool{}
	for _, rt := range append(surface.Routes(), surface.HistoryRoutes()...) {
		openAI[strings.ReplaceAll(rt.Pattern, "...}", "}")] = true
	}
	for _, p := range registeredRoutes(t) {
		_, path, _ := strings.Cut(p, " ")
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		concrete := regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, "x")
		if got := openAIPath(concrete); got != openAI[p] {
			t.Errorf("route %s: openAIPath(%q) is %v; the route is OpenAI's: %v", p, concrete, got, openAI[p])
		}
	}
}
