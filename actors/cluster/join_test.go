//go:build !race

// Built without -race, as the in-process cluster tests are: protoactor's
// remote sets gRPC's global logger as it starts, while the etcd client's
// gRPC goroutines read it (docs/cluster.md, "Data races in its cluster
// code").

package cluster

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/etcdtest"
)

// A Join that fails midway — the listener bound, gossip and the identity
// lookup started, then the membership provider refusing (here: etcd holds
// a member record that is not one) — stops what it started: the cluster
// port is free again, so a start retried in the process can bind it, and
// neither the gRPC server nor the gossip loop runs on.
func TestClusterJoinThatFailsMidwayReleasesWhatItStarted(t *testing.T) {
	endpoints := etcdtest.Endpoints(t)
	name := etcdtest.ClusterName()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	bad := "/agentd/" + name + "/not-a-member"
	if _, err := cli.Put(ctx, bad, "not json"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = cli.Delete(context.Background(), bad) }()

	bind := testkit.FreeAddr(t)
	sys := actors.NewSystem(zerolog.Nop())
	cc := configs.Cluster{Enabled: true, Name: name, Provider: configs.ClusterEtcd, EtcdEndpoints: endpoints, Bind: bind}
	if _, err := Join(ctx, sys, cc, Config{Log: zerolog.Nop()}); err == nil || !strings.Contains(err.Error(), "join cluster "+name) {
		t.Fatalf("join with a member record that is not one: %v; want the join refused", err)
	}
	l, err := net.Listen("tcp", bind)
	if err != nil {
		t.Fatalf("the cluster port after a failed join: %v; want it free", err)
	}
	_ = l.Close()
	// What the hub does after a failed start: the system is its own.
	sys.Shutdown()
	for _, left := range []string{"grpc.(*Server).Serve", "(*Gossiper).gossipLoop"} {
		deadline := time.Now().Add(time.Minute)
		for running(left) {
			if time.Now().After(deadline) {
				t.Fatalf("%s still runs a minute after a failed join", left)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// running says whether any goroutine's stack names fn.
func running(fn string) bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Contains(string(buf[:n]), fn)
		}
		buf = make([]byte, 2*len(buf))
	}
}
