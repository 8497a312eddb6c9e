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
	if ts := c.Toolsets; ts.MaxPerTenant != 100 || ts.MaxToolsPerTenant != 20000 || c.Attachments.MaxBytesPerTenant != 0 {
		t.Fatalf("toolsets %+v, attachments.max_bytes_per_tenant %d; want 100 toolsets and 20000 tools per tenant, and no share", ts, c.Attachments.MaxBytesPerTenant)
	}
	if c.Limits.MemoriesPerTenant != 10000 {
		t.Fatalf("limits.memories_per_tenant %d, want 10000", c.Limits.MemoriesPerTenant)
	}
	if c.Limits.IngestBytesPerSecond != DefaultIngestBytesPerSecond {
		t.Fatalf("limits.ingest_bytes_per_second %d, want %d", c.Limits.IngestBytesPerSecond, DefaultIngestBytesPerSecond)
	}
	if c.Store.Kind != StoreBadger || c.Store.DSNEnv != "" {
		t.Fatalf("store default = %+v, want badger", c.Store)
	}
	t.Setenv("AGENTD_STORE", "postgres")
	if c, err = Load(""); err != nil || c.Store.Kind != StorePostgres || c.Store.DSNEnv != "AGENTD_PG_DSN" || c.Store.FailingAfter.Duration != 2*time.Minute || c.Store.CloseWait.Duration != 10*time.Second {
		t.Fatalf("AGENTD_STORE=postgres: %+v, %v; want postgres from $AGENTD_PG_DSN, failing after 2m, closing within 10s", c.Store, err)
	}
}

// TestStoreFailingAfterIsRead: how long Postgres may not answer before
// /healthz says failing was a constant (2 minutes), which an operator whose
// server fails over slower, or whose probes restart sooner, could not set.
func TestStoreFailingAfterIsRead(t *testing.T) {
	st, err := loadStore(t, "store: {kind: postgres, failing_after: 5m}")
	if err != nil || st.FailingAfterOrDefault() != 5*time.Minute {
		t.Fatalf("store.failing_after 5m: %+v, %v", st, err)
	}
	if d := (Store{Kind: StorePostgres}).FailingAfterOrDefault(); d != DefaultFailingAfter {
		t.Fatalf("a Store built in code, failing_after unset: %v; want the default %v", d, DefaultFailingAfter)
	}
}

// TestStoreCloseWaitIsRead: how long a stopping node's store may take to
// commit what its sessions queued was a constant (10 s), which an operator
// could not set for a server that commits slower or a pod that must stop
// sooner.
func TestStoreCloseWaitIsRead(t *testing.T) {
	st, err := loadStore(t, "store: {kind: postgres, close_wait: 45s}")
	if err != nil || st.CloseWaitOrDefault() != 45*time.Second {
		t.Fatalf("store.close_wait 45s: %+v, %v", st, err)
	}
	if d := (Store{Kind: StorePostgres}).CloseWaitOrDefault(); d != DefaultCloseWait {
		t.Fatalf("a Store built in code, close_wait unset: %v; want the default %v", d, DefaultCloseWait)
	}
}

// loadStore loads and validates a config file holding yaml and returns its
// store section.
func loadStore(t *testing.T, yaml string) (Store, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err == nil {
		err = c.Validate()
	}
	return c.Store, err
}

func TestValidateRejects(t *testing.T) {
	cases := map[string]struct {
		yaml string
		want string
	}{
		"bad kind":               {"providers: [{name: x, kind: gemini}]", "kind must be"},
		"duplicate name":         {"providers: [{name: x, kind: openai}, {name: x, kind: ollama}]", "used twice"},
		"unauthenticated public": {"listen: 0.0.0.0:8420", "refusing to serve without authentication"},
		"listen a bare port":     {"listen: 8420", "listen \"8420\": want host:port, such as 127.0.0.1:8420"},
		"listen no port, tokens": {"listen: localhost\nauth: {tokens: [{tenant: a, token_env: T}]}", "listen \"localhost\": want host:port"},
		"default model form":     {"default_model: gpt", "provider/model"},
		"token without env":      {"auth: {tokens: [{tenant: a}]}", "token_env"},
		"tenant with a slash":    {"auth: {tokens: [{tenant: a/b, token_env: T}]}", "must not contain"},
		"unknown store":          {"store: {kind: mysql}", "store.kind must be badger or postgres"},
		"log level":              {"log_level: loud", "log_level \"loud\": use debug, info, warn or error"},
		"compact threshold":      {"limits: {compact_threshold: 500}", "limits.compact_threshold 500: use at least 1000"},
		"negative turn timeout":  {"limits: {turn_timeout: -1s}", "limits.turn_timeout -1s: must not be negative"},
		"negative limit":         {"limits: {turns_per_chat: -2}", "limits.turns_per_chat -2: must not be negative"},
		"negative http timeout":  {"http: {write_timeout: -5s}", "http.write_timeout -5s: must not be negative"},
		"negative idle after":    {"idle_after: -1m", "idle_after -1m0s: must not be negative"},
		"negative toolsets":      {"toolsets: {max_per_tenant: -1}", "toolsets.max_per_tenant -1: must not be negative"},
		"negative tenant share":  {"attachments: {max_bytes_per_tenant: -1}", "attachments.max_bytes_per_tenant -1: must not be negative"},
		"ingest rate below -1":   {"limits: {ingest_bytes_per_second: -2}", "limits.ingest_bytes_per_second -2: must not be negative"},
		"memories below -1":      {"limits: {memories_per_tenant: -2}", "limits.memories_per_tenant -2: must not be negative"},
		"negative failing after": {"store: {kind: postgres, failing_after: -1m}", "store.failing_after -1m0s: must not be negative"},
		"negative close wait":    {"store: {kind: postgres, close_wait: -5s}", "store.close_wait -5s: must not be negative"},
		"model without id":       {"providers: [{name: x, kind: openai, base_url: \"http://h/v1\", models: [{window: 8192}]}]", "providers[0] \"x\": models[0] has no id"},
		"negative window":        {"providers: [{name: x, kind: openai, base_url: \"http://h/v1\", models: [{id: m, window: -5}]}]", "model \"m\": window -5"},
		"base url no scheme":     {"providers: [{name: x, kind: anthropic, base_url: \"localhost:8080\", models: [m]}]", "base_url \"localhost:8080\": want an http:// or https:// URL"},
		"base url other scheme":  {"providers: [{name: x, kind: openai, base_url: \"ftp://h/v1\", models: [m]}]", "base_url \"ftp://h/v1\": want an http:// or https:// URL"},
		"anthropic base with v1": {"providers: [{name: a, kind: anthropic, base_url: \"http://127.0.0.1:8080/v1/\", models: [m]}]", "base_url \"http://127.0.0.1:8080/v1/\": kind anthropic takes the server's root without /v1 (agentd adds /v1/messages): use http://127.0.0.1:8080"},
		"ollama base with v1":    {"providers: [{name: o, kind: ollama, base_url: \"http://127.0.0.1:11434/v1\"}]", "kind ollama takes the server's root without /v1 (agentd adds /api/chat): use http://127.0.0.1:11434"},
		"ollama base with api":   {"providers: [{name: o, kind: ollama, base_url: \"http://127.0.0.1:11434/api\"}]", "kind ollama takes the server's root without /api"},
		"cluster on badger":      {"cluster: {enabled: true, etcd_endpoints: [http://127.0.0.1:2379]}", "cluster.enabled needs store.kind postgres"},
		"cluster provider":       {"store: {kind: postgres}\ncluster: {enabled: true, provider: consul}", "cluster.provider must be etcd or kubernetes"},
		"cluster no endpoints":   {"store: {kind: postgres}\ncluster: {enabled: true}", "cluster.etcd_endpoints: provider etcd needs"},
		"cluster bad endpoint":   {"store: {kind: postgres}\ncluster: {enabled: true, etcd_endpoints: [127.0.0.1:2379]}", "cluster.etcd_endpoints[0]"},
		"cluster name":           {"store: {kind: postgres}\ncluster: {enabled: true, name: a/b, etcd_endpoints: [http://e:2379]}", "cluster.name"},
		"cluster bind form":      {"store: {kind: postgres}\ncluster: {enabled: true, bind: nowhere, etcd_endpoints: [http://e:2379]}", "cluster.bind \"nowhere\": want host:port"},
		"cluster bind wildcard":  {"store: {kind: postgres}\ncluster: {enabled: true, bind: \"0.0.0.0:7000\", etcd_endpoints: [http://e:2379]}", "cluster.bind \"0.0.0.0:7000\": the other nodes dial"},
		"cluster advertise":      {"store: {kind: postgres}\ncluster: {enabled: true, advertise_http: \"10.0.0.5:8420\", etcd_endpoints: [http://e:2379]}", "cluster.advertise_http \"10.0.0.5:8420\""},
		"cluster no advertise":   {"listen: \"0.0.0.0:8420\"\nauth: {tokens: [{tenant: a, token_env: T}]}\nstore: {kind: postgres}\ncluster: {enabled: true, etcd_endpoints: [http://e:2379]}", "cluster.advertise_http: required"},
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

func TestClusterFromFileAndEnvironment(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte("store: {kind: postgres}\ncluster: {enabled: true, etcd_endpoints: [http://10.0.0.1:2379]}\n"), 0o600)
	c, err := Load(p)
	if err == nil {
		err = c.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	if cl := c.Cluster; cl.Name != "agentd" || cl.Provider != ClusterEtcd || cl.Bind != "127.0.0.1:0" || cl.EtcdEndpoints[0] != "http://10.0.0.1:2379" {
		t.Fatalf("cluster defaults = %+v", cl)
	}
	t.Setenv("AGENTD_STORE", "postgres")
	t.Setenv("AGENTD_CLUSTER_ENABLED", "true")
	t.Setenv("AGENTD_CLUSTER_NAME", "blue")
	t.Setenv("AGENTD_CLUSTER_ETCD_ENDPOINTS", "http://a:2379, http://b:2379")
	t.Setenv("AGENTD_CLUSTER_BIND", "10.0.0.5:7000")
	t.Setenv("AGENTD_CLUSTER_ADVERTISE_HTTP", "http://10.0.0.5:8420")
	if c, err = Load(""); err == nil {
		err = c.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Cluster
	if !cl.Enabled || cl.Name != "blue" || strings.Join(cl.EtcdEndpoints, ",") != "http://a:2379,http://b:2379" || cl.Bind != "10.0.0.5:7000" || cl.AdvertiseHTTP != "http://10.0.0.5:8420" {
		t.Fatalf("cluster from the environment = %+v", cl)
	}
	t.Setenv("AGENTD_CLUSTER_ENABLED", "sure")
	if _, err := Load(""); err == nil || !strings.Contains(err.Error(), `AGENTD_CLUSTER_ENABLED="sure"`) {
		t.Fatalf("AGENTD_CLUSTER_ENABLED=sure: %v", err)
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

func TestBadEnvironmentValuesAreErrorsNamingTheVariable(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"AGENTD_IDLE_AFTER", "soon", `AGENTD_IDLE_AFTER="soon": want a positive duration`},
		{"AGENTD_IDLE_AFTER", "-5m", `AGENTD_IDLE_AFTER="-5m"`},
		{"AGENTD_MAX_BODY_BYTES", "1MB", `AGENTD_MAX_BODY_BYTES="1MB": want a positive whole number`},
		{"AGENTD_MAX_BODY_BYTES", "0", `AGENTD_MAX_BODY_BYTES="0"`},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.key, tc.value)
			if _, err := Load(""); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load with %s=%q: %v, want an error with %q", tc.key, tc.value, err, tc.want)
			}
		})
	}
	t.Run("bad log level", func(t *testing.T) {
		t.Setenv("AGENTD_LOG_LEVEL", "verbose")
		c, err := Load("")
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "AGENTD_LOG_LEVEL") {
			t.Fatalf("AGENTD_LOG_LEVEL=verbose: %v", err)
		}
	})
	t.Run("good values apply", func(t *testing.T) {
		t.Setenv("AGENTD_IDLE_AFTER", "90s")
		t.Setenv("AGENTD_MAX_BODY_BYTES", "2048")
		c, err := Load("")
		if err != nil || c.IdleAfter.Duration != 90*time.Second || c.Limits.MaxBodyBytes != 2048 {
			t.Fatalf("idle %v, body %d, %v", c.IdleAfter, c.Limits.MaxBodyBytes, err)
		}
	})
}

func TestWarnings(t *testing.T) {
	env := map[string]string{"SET_KEY": "sk-1"}
	get := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"none", "default_model: a/m\nproviders: [{name: a, kind: openai, api_key_env: SET_KEY, models: [m]}]", nil},
		{"unset key", "providers: [{name: a, kind: openai, api_key_env: NOT_SET}]", []string{"provider a: api_key_env names NOT_SET, which is not set"}},
		{"default not listed", "default_model: a/x\nproviders: [{name: a, kind: openai, models: [m, n]}]", []string{"default_model a/x is not in provider a's models: (a/m, a/n)"}},
		{"default of a provider that lists its own", "default_model: a/x\nproviders: [{name: a, kind: ollama}]", nil},
		{"default of no provider", "default_model: b/x\nproviders: [{name: a, kind: ollama}]", []string{`default_model b/x names no configured provider "b"`}},
		{"tenants of tokens", "auth: {tokens: [{tenant: alice, token_env: A}, {tenant: bob, token_env: B}]}\ntenants: {alice: {instructions: hi}, bob: {allowed_env: [X]}}", nil},
		{"a tenant no token is of", "auth: {tokens: [{tenant: alice, token_env: A}]}\ntenants: {alice: {instructions: hi}, zed: {}, alcie: {instructions: hi}}",
			[]string{"tenants.alcie: no auth.tokens entry is of tenant", "tenants.zed: no auth.tokens entry"}},
		{"without tokens, the default tenant", "tenants: {default: {instructions: hi}}", nil},
		{"without tokens, another tenant", "tenants: {alice: {instructions: hi}}", []string{"tenants.alice: no auth.tokens entry"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Load(p)
			if err != nil {
				t.Fatal(err)
			}
			got := c.Warnings(get)
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("warning %q, want it to start %q", got[i], w)
				}
			}
		})
	}
}

// TestAValueOfTheWrongTypeNamesItsKey: yaml's type errors said the line
// and a Go type ("line 2: cannot unmarshal !!str `abc` into int"); each
// now names the key, a list's item and a map or list given in place of
// the other too.
func TestAValueOfTheWrongTypeNamesItsKey(t *testing.T) {
	cases := map[string]struct{ yaml, key string }{
		"a scalar":            {"limits:\n  turns_per_chat: abc\n", "line 2: limits.turns_per_chat: cannot unmarshal"},
		"a list's item's key": {"providers:\n  - name: x\n    kind: ollama\n    models: qwen\n", "line 4: providers[0].models: cannot unmarshal"},
		"a map for a list":    {"providers:\n  name: x\n", "line 2: providers: cannot unmarshal !!map"},
		"a bool":              {"cluster:\n  enabled: yes please\n", "line 2: cluster.enabled: cannot unmarshal"},
		"an unknown key":      {"limits:\n  max_body: 5\n", "line 2: limits.max_body: field max_body not found"},
		"a list for a map":    {"tenants:\n  - a\n", "line 2: tenants: cannot unmarshal !!seq"},
		"a duration":          {"store:\n  failing_after: soon\n", "store.failing_after"},
		"a close wait":        {"store:\n  close_wait: 10\n", "line 2: store.close_wait"},
		"a second list item":  {"auth:\n  tokens:\n    - tenant: a\n      token_env: A\n    - tenant: [b]\n", "line 5: auth.tokens[1].tenant: cannot unmarshal !!seq"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agentd.yaml")
			if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("error %v; want %q in it", err, c.key)
			}
		})
	}
}
