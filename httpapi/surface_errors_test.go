package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd/agentd/testkit/daemontest"
)

// errorShape reads an error body and names its shape: "openai" for
// {"error": {"message", "type", "param", "code"}} with a type, "native"
// for {"error": "…", "kind": "…"}; code is OpenAI's code or the kind.
func errorShape(t *testing.T, body string) (shape, code string) {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	var o struct {
		Message *string `json:"message"`
		Type    *string `json:"type"`
		Param   json.RawMessage
		Code    *string `json:"code"`
	}
	if json.Unmarshal(raw["error"], &o) == nil && o.Message != nil && o.Type != nil && o.Param != nil && len(raw) == 1 {
		if o.Code != nil {
			code = *o.Code
		}
		return "openai", code
	}
	var n struct {
		Error string `json:"error"`
		Kind  string `json:"kind"`
	}
	if json.Unmarshal([]byte(body), &n) == nil && n.Error != "" && n.Kind != "" {
		return "native", n.Kind
	}
	return "neither", ""
}

// TestEachSurfaceAnswersInItsOwnErrorShape: under /v1 both surfaces live;
// what no route answers, and what the web guard refuses, is in OpenAI's
// shape on OpenAI's paths (an SDK reads type and code from it) and in the
// native shape on the native API's.
func TestEachSurfaceAnswersInItsOwnErrorShape(t *testing.T) {
	fake := newFake(t, echoScript)
	cfg := baseConfig(t, fake.URL())
	cfg.HTTP.AllowedHosts = []string{"agentd.lan"}
	d := daemontest.Start(t, cfg, nil)
	port := d.Server.URL[strings.LastIndex(d.Server.URL, ":"):]
	foreign := map[string]string{"Origin": "https://attacker.example"}
	cases := []struct {
		method, path, host string
		header             map[string]string
		status             int
		shape, code        string
	}{
		{"POST", "/v1/embeddings", "", nil, 404, "openai", "unknown_url"},
		{"GET", "/v1/files", "", nil, 404, "openai", "unknown_url"},
		{"GET", "/v1/chat/completions", "", nil, 404, "openai", "unknown_url"},
		{"DELETE", "/v1/models/fake/m", "", nil, 404, "openai", "unknown_url"},
		{"GET", "/v1/models/fake/none", "", nil, 404, "openai", "model_not_found"},
		{"GET", "/v1/chats/x/nothing", "", nil, 404, "native", "not_found"},
		{"GET", "/v1/toolsets/x/y", "", nil, 404, "native", "not_found"},
		{"PUT", "/v1/chats/x", "", nil, 405, "native", "method_not_allowed"},
		{"DELETE", "/v1/chats/x/messages", "", nil, 405, "native", "method_not_allowed"},
		{"POST", "/v1/chat/completions", "", foreign, 403, "openai", "cross_origin"},
		{"POST", "/v1/responses", "", foreign, 403, "openai", "cross_origin"},
		{"POST", "/v1/chats", "", foreign, 403, "native", "cross_origin"},
		{"POST", "/v1/models/refresh", "", foreign, 403, "native", "cross_origin"},
		{"GET", "/v1/models", "attacker.example" + port, nil, 421, "openai", "misdirected"},
		{"GET", "/v1/chats", "attacker.example" + port, nil, 421, "native", "misdirected"},
	}
	for _, c := range cases {
		a := browserCall(t, c.method, d.Server.URL+c.path, c.host, "application/json", []byte(`{}`), c.header)
		if shape, code := errorShape(t, a.body); a.status != c.status || shape != c.shape || code != c.code {
			t.Errorf("%s %s (host %q): %d %s %q; want %d %s %q: %s", c.method, c.path, c.host, a.status, shape, code, c.status, c.shape, c.code, a.body)
		}
		if allow := a.header.Get("Allow"); (c.status == 405) != (allow != "") || c.path == "/v1/chats/x" && allow != "GET, PATCH, DELETE" {
			t.Errorf("%s %s: Allow %q", c.method, c.path, allow)
		}
	}
}
