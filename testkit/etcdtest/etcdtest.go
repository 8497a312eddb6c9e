// Package etcdtest gives a cluster test the etcd endpoints that
// AGENTD_TEST_ETCD_ENDPOINTS names (testkit/etcd/etcd.sh starts one) and a
// cluster name of its own, and skips the test, saying so, when the
// variable is unset.
package etcdtest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// Env names the variable that holds the test etcd's client endpoints,
// comma-separated.
const Env = "AGENTD_TEST_ETCD_ENDPOINTS"

// Endpoints returns the test etcd's endpoints, or skips t.
func Endpoints(t testing.TB) []string {
	t.Helper()
	v := os.Getenv(Env)
	if v == "" {
		t.Skipf("%s is unset: cluster mode is not tested (testkit/etcd/etcd.sh start DIR prints an endpoint)", Env)
	}
	return strings.Split(v, ",")
}

// ClusterName is a cluster name no other test uses, so tests sharing one
// etcd never see each other's nodes.
func ClusterName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "test-" + hex.EncodeToString(b[:])
}
