package configs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// clusterExamples is the folder of docs/cluster.md's examples.
const clusterExamples = "../docs/examples/cluster"

// interpolation is compose's ${VAR…} in a value.
var interpolation = regexp.MustCompile(`\$\{[^}]*\}`)

// TestClusterComposeExampleMakesAValidCluster reads the compose example as
// compose would (anchors and merge keys included) and loads the agentd.yaml
// it mounts with each node's environment: every node must come out a valid
// cluster member on Postgres, with addresses of its own.
func TestClusterComposeExampleMakesAValidCluster(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(clusterExamples, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
			DependsOn   map[string]any    `yaml:"depends_on"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for _, s := range []string{"postgres", "etcd"} {
		if _, ok := compose.Services[s]; !ok {
			t.Errorf("compose.yaml has no %s service", s)
		}
	}
	binds := map[string]bool{}
	for _, name := range []string{"agentd-1", "agentd-2", "agentd-3"} {
		s, ok := compose.Services[name]
		if !ok {
			t.Errorf("compose.yaml has no %s service", name)
			continue
		}
		if !slices.Contains(s.Command, "/etc/agentd/agentd.yaml") || !slices.Contains(s.Volumes, "./agentd.yaml:/etc/agentd/agentd.yaml:ro") {
			t.Errorf("%s does not run the agentd.yaml beside compose.yaml: %v, %v", name, s.Command, s.Volumes)
		}
		if _, ok := s.DependsOn["postgres"]; !ok {
			t.Errorf("%s does not wait for postgres", name)
		}
		for k, v := range s.Environment {
			t.Setenv(k, interpolation.ReplaceAllString(v, "from-the-shell"))
		}
		c := loadValid(t, filepath.Join(clusterExamples, "agentd.yaml"))
		if !c.Cluster.Enabled || c.Store.Kind != StorePostgres || c.Cluster.Provider != ClusterEtcd {
			t.Errorf("%s: cluster %+v on store %q; want cluster mode with etcd on postgres", name, c.Cluster, c.Store.Kind)
		}
		if binds[c.Cluster.Bind] || !strings.HasPrefix(c.Cluster.Bind, name+":") {
			t.Errorf("%s binds the cluster at %q: want an address of its own", name, c.Cluster.Bind)
		}
		binds[c.Cluster.Bind] = true
		for k := range s.Environment {
			t.Setenv(k, "") // the next node sets its own
		}
	}
}

// TestClusterKubernetesSketchIsValid parses every document of the
// Kubernetes sketch, checks its Role grants what protoactor-go's
// Kubernetes provider calls (get its pod, patch its labels, watch the
// cluster's pods), and loads the ConfigMap's agentd.yaml with the
// variables the Deployment sets.
func TestClusterKubernetesSketchIsValid(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(clusterExamples, "kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type doc struct {
		Kind  string `yaml:"kind"`
		Rules []struct {
			Resources []string `yaml:"resources"`
			Verbs     []string `yaml:"verbs"`
		} `yaml:"rules"`
		Data map[string]string `yaml:"data"`
	}
	kinds := map[string]doc{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d doc
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("kubernetes.yaml: %v", err)
		}
		kinds[d.Kind] = d
	}
	for _, k := range []string{"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment", "Service"} {
		if _, ok := kinds[k]; !ok {
			t.Errorf("kubernetes.yaml has no %s", k)
		}
	}
	granted := map[string]bool{}
	for _, r := range kinds["Role"].Rules {
		if slices.Contains(r.Resources, "pods") {
			for _, v := range r.Verbs {
				granted[v] = true
			}
		}
	}
	for _, v := range []string{"get", "watch", "patch"} {
		if !granted[v] {
			t.Errorf("the Role does not grant %s on pods, which the provider needs", v)
		}
	}
	path := filepath.Join(t.TempDir(), "agentd.yaml")
	if err := os.WriteFile(path, []byte(kinds["ConfigMap"].Data["agentd.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTD_CLUSTER_BIND", "10.1.2.3:4020")
	t.Setenv("AGENTD_CLUSTER_ADVERTISE_HTTP", "http://10.1.2.3:8420")
	t.Setenv("AGENTD_TOKEN", "from-a-secret")
	if c := loadValid(t, path); !c.Cluster.Enabled || c.Cluster.Provider != ClusterKubernetes {
		t.Errorf("the ConfigMap's cluster is %+v; want cluster mode on the kubernetes provider", c.Cluster)
	}
}

// loadValid loads the yaml at path with the environment and validates it.
func loadValid(t *testing.T, path string) Config {
	t.Helper()
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}
