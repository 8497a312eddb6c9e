package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExampleConfigLoadsAndValidates(t *testing.T) {
	c, err := Load("agentd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.DefaultModel != "local/qwen3:4b" || len(c.Providers) != 4 {
		t.Fatalf("default %q, %d providers", c.DefaultModel, len(c.Providers))
	}
	if c.Providers[2].Models[1].Window != 1047576 || c.Providers[2].Models[0].ID != "gpt-4.1" {
		t.Fatalf("models = %+v", c.Providers[2].Models)
	}
	if c.Limits.ToolTimeout.Duration != time.Minute {
		t.Fatalf("tool timeout = %v", c.Limits.ToolTimeout)
	}
}

func TestDefaultsAndEnvironment(t *testing.T) {
	t.Setenv("AGENTD_LISTEN", "127.0.0.1:9999")
	t.Setenv("AGENTD_DATA_DIR", "/tmp/x")
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9999" || c.DataDir != "/tmp/x" {
		t.Fatalf("env not applied: %+v", c)
	}
	if len(c.Providers) != 1 || c.Providers[0].Kind != "ollama" || c.Providers[0].BaseURL != DefaultOllamaURL {
		t.Fatalf("no-provider default = %+v", c.Providers)
	}
	if c.Store.Kind != StoreBadger || c.Store.DSNEnv != "" {
		t.Fatalf("store default = %+v, want badger", c.Store)
	}
	t.Setenv("AGENTD_STORE", "postgres")
	if c, err = Load(""); err != nil || c.Store.Kind != StorePostgres || c.Store.DSNEnv != "AGENTD_PG_DSN" {
		t.Fatalf("AGENTD_STORE=postgres: %+v, %v; want postgres from $AGENTD_PG_DSN", c.Store, err)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := map[string]struct {
		yaml string
		want string
	}{
		"bad kind":               {"providers: [{name: x, kind: gemini}]", "kind must be"},
		"duplicate name":         {"providers: [{name: x, kind: openai}, {name: x, kind: ollama}]", "used twice"},
		"unauthenticated public": {"listen: 0.0.0.0:8420", "refusing to serve without authentication"},
		"default model form":     {"default_model: gpt", "provider/model"},
		"token without env":      {"auth: {tokens: [{tenant: a}]}", "token_env"},
		"unknown store":          {"store: {kind: mysql}", "store.kind must be badger or postgres"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.yaml")
			os.WriteFile(p, []byte(tc.yaml), 0o600)
			c, err := Load(p)
			if err == nil {
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestUnknownKeyIsAnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte("listne: 1.2.3.4:1\n"), 0o600)
	if _, err := Load(p); err == nil {
		t.Fatal("a misspelt key was accepted")
	}
}

func TestTokensNeedTheirEnvironment(t *testing.T) {
	c := Config{Auth: Auth{Tokens: []Token{{Tenant: "a", TokenEnv: "TOK_A"}}}}
	if _, err := c.Tokens(func(string) string { return "" }); err == nil {
		t.Fatal("empty token env accepted")
	}
	m, err := c.Tokens(func(k string) string { return map[string]string{"TOK_A": "s3cret"}[k] })
	if err != nil || m["s3cret"] != "a" {
		t.Fatalf("tokens = %v, %v", m, err)
	}
}

func TestTwoTenantsWithOneTokenAreRefused(t *testing.T) {
	c := Config{Auth: Auth{Tokens: []Token{{Tenant: "a", TokenEnv: "TOK_A"}, {Tenant: "b", TokenEnv: "TOK_B"}}}}
	env := map[string]string{"TOK_A": "same-s3cret", "TOK_B": "same-s3cret"}
	_, err := c.Tokens(func(k string) string { return env[k] })
	if err == nil {
		t.Fatal("two tenants with the same token value were accepted")
	}
	msg := err.Error()
	if !strings.Contains(msg, `"a"`) || !strings.Contains(msg, `"b"`) || !strings.Contains(msg, "same token") {
		t.Fatalf("the error does not name both tenants: %v", err)
	}
	if strings.Contains(msg, "same-s3cret") {
		t.Fatalf("the error shows the token: %v", err)
	}
}

func TestBareMetricsPortBindsLoopback(t *testing.T) {
	c := Config{Metrics: Metrics{Listen: ":9464"}}
	c.ApplyDefaults()
	if c.Metrics.Listen != "127.0.0.1:9464" {
		t.Fatalf("metrics.listen = %q, want loopback", c.Metrics.Listen)
	}
}
