//go:build !race

// Built without -race, as join_test.go is (docs/cluster.md, "Data races in
// its cluster code").

package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/etcdtest"
)

// A node whose etcd lease is lost (revoked here, as etcd does when it
// expires) registers again on a new lease, under a new member id, and the
// other node, which saw it leave (and so blocks its first id for good),
// sees it a member again.
func TestEtcdMemberWhoseLeaseIsLostRegistersAgain(t *testing.T) {
	endpoints := etcdtest.Endpoints(t)
	name := etcdtest.ClusterName()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := etcdClient(t, endpoints)
	cc := configs.Cluster{Enabled: true, Name: name, Provider: configs.ClusterEtcd, EtcdEndpoints: endpoints}
	a, _ := joinOn(ctx, t, cc, Config{Log: zerolog.Nop()})
	b, _ := joinOn(ctx, t, cc, Config{Log: zerolog.Nop()})
	waitMembers(t, 2, a, b)
	left := topologies(t, b)

	key := "/agentd/" + name + "/" + name + "@" + a.c.ActorSystem.ID
	lease := leaseOf(ctx, t, cli, key)
	if lease == 0 {
		t.Fatalf("%s has no lease", key)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to see a leave", func() bool { return slices.Contains(left(), a.Address()) })
	waitFor(t, key+"#1 registered on a new lease", func() bool {
		l := leaseOf(ctx, t, cli, key+"#1")
		return l != 0 && l != lease
	})
	waitFor(t, "b to see a a member again", func() bool { return hasMember(b, a.Address()) })
	waitMembers(t, 2, a, b)
	wantState(t, a, 2, true, 0)
	wantState(t, b, 2, true, 0)
}

// topologies records the addresses of the members n's member list saw
// leave, from its event stream; the func returned reads them.
func topologies(t *testing.T, n *Node) func() []string {
	t.Helper()
	seen := make(chan []string, 1)
	seen <- nil
	sub := n.c.ActorSystem.EventStream.Subscribe(func(evt any) {
		if top, ok := evt.(*pcluster.ClusterTopology); ok {
			left := <-seen
			for _, m := range top.Left {
				left = append(left, m.Address())
			}
			seen <- left
		}
	})
	t.Cleanup(func() { n.c.ActorSystem.EventStream.Unsubscribe(sub) })
	return func() []string {
		left := <-seen
		seen <- left
		return slices.Clone(left)
	}
}

// leaseOf answers the lease key is on, 0 when there is no key.
func leaseOf(ctx context.Context, t *testing.T, cli *clientv3.Client, key string) int64 {
	t.Helper()
	res, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Kvs) == 0 {
		return 0
	}
	return res.Kvs[0].Lease
}

// hasMember says whether n's member list has a member at addr.
func hasMember(n *Node, addr string) bool {
	return slices.ContainsFunc(n.c.MemberList.Members().Members(), func(m *pcluster.Member) bool { return m.Address() == addr })
}

// A node whose watch of the members ends (as when etcd compacts past it or
// cancels it) reads the members afresh and watches again: a node that
// joins after, and leaves again, is seen doing both.
func TestEtcdMemberWhoseWatchEndsWatchesAgain(t *testing.T) {
	endpoints := etcdtest.Endpoints(t)
	name := etcdtest.ClusterName()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cc := configs.Cluster{Enabled: true, Name: name, Provider: configs.ClusterEtcd, EtcdEndpoints: endpoints}
	var logs testkit.LogBuffer
	end := make(chan struct{})
	a, _ := joinOn(ctx, t, cc, Config{Log: zerolog.New(&logs), endWatch: end})
	b, _ := joinOn(ctx, t, cc, Config{Log: zerolog.Nop()})
	waitMembers(t, 2, a, b)

	end <- struct{}{}
	waitFor(t, "a's watch to end", func() bool { return strings.Contains(logs.String(), "etcd watch of the members ended") })
	c, leaveC := joinOn(ctx, t, cc, Config{Log: zerolog.Nop()})
	waitFor(t, "a to see c join", func() bool { return hasMember(a, c.Address()) })
	leaveC()
	waitFor(t, "a to see c leave", func() bool { return !hasMember(a, c.Address()) })
	waitMembers(t, 2, a, b)
}
