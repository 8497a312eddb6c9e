//go:build !race

// Built without -race, as the in-process cluster tests are: protoactor's
// remote sets gRPC's global logger as it starts, while the etcd client's
// gRPC goroutines read it (docs/cluster.md, "Data races in its cluster
// code").

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
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

	// A port another process's socket takes between FreeAddr and the bind
	// (CI runs other packages' cluster tests, which dial out, alongside)
	// fails the join before the provider is asked: that join proves
	// nothing, and another port is tried.
	var bind string
	var sys *actor.ActorSystem
	for try := 0; ; try++ {
		bind, sys = testkit.FreeAddr(t), actors.NewSystem(zerolog.Nop())
		cc := configs.Cluster{Enabled: true, Name: name, Provider: configs.ClusterEtcd, EtcdEndpoints: endpoints, Bind: bind}
		_, err := Join(ctx, sys, cc, Config{Log: zerolog.Nop()})
		if err != nil && strings.Contains(err.Error(), "failed to listen") && try < 3 {
			sys.Shutdown()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "join cluster "+name) {
			t.Fatalf("join with a member record that is not one: %v; want the join refused", err)
		}
		break
	}
	// No socket listens on the cluster port: this process's listener is
	// closed, and a start retried in the process can bind the port. (A
	// bind would also fail on another process's outgoing connection given
	// the port since.)
	if listening(t, bind) {
		t.Fatalf("the cluster port %s still listens after a failed join; want it closed", bind)
	}
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

// listening says whether a TCP socket listens on addr's port, from
// /proc/net/tcp and tcp6 (local address and port in hex, state 0A).
func listening(t *testing.T, addr string) bool {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprintf(":%04X", n)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Skipf("no %s to read listening sockets from: %v", f, err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) > 3 && strings.HasSuffix(fields[1], suffix) && fields[3] == "0A" {
				return true
			}
		}
	}
	return false
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
