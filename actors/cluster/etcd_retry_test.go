//go:build !race

// Built without -race, as join_test.go is (docs/cluster.md, "Data races in
// its cluster code").

package cluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
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
	return slices.ContainsFunc(members(n), func(m *pcluster.Member) bool { return m.Address() == addr })
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

// A node registered again after a lost lease whose keep-alive then fails
// leaves no lease of its own behind to linger until its TTL: one whose
// keep-alive did not start is kept alive on the next try, not replaced
// by a new one; one whose keep-alive ended (as when the client hears
// nothing of it for its TTL, etcd holding it still) is revoked, its
// record with it, before the node registers again, so no other node lists
// it twice meanwhile. Each was left to expire, a new lease taken beside.
func TestEtcdMemberWhoseKeepAliveFailsLeavesNoLeaseBehind(t *testing.T) {
	endpoints := etcdtest.Endpoints(t)
	cli := etcdClient(t, endpoints)
	for name, closed := range map[string]bool{"fails to start": false, "ends at once": true} {
		t.Run(name, func(t *testing.T) {
			cluster := etcdtest.ClusterName()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cc := configs.Cluster{Enabled: true, Name: cluster, Provider: configs.ClusterEtcd, EtcdEndpoints: endpoints}
			var faults atomic.Int32 // the provider's run asks, the test reads
			fault := func() (bool, error) {
				if faults.Add(1) > 1 {
					return false, nil
				}
				if closed {
					return true, nil
				}
				return false, errors.New("keep-alive refused")
			}
			a, _ := joinOn(ctx, t, cc, Config{Log: zerolog.Nop(), keepAliveFault: fault})
			b, _ := joinOn(ctx, t, cc, Config{Log: zerolog.Nop()})
			waitMembers(t, 2, a, b)

			key := "/agentd/" + cluster + "/" + cluster + "@" + a.c.ActorSystem.ID
			now, err := cli.Get(ctx, key)
			if err != nil || len(now.Kvs) == 0 {
				t.Fatalf("%s: %v, %v", key, now, err)
			}
			// What a's records go through from here, in etcd's order.
			wctx, endWatch := context.WithCancel(ctx)
			defer endWatch()
			events := cli.Watch(wctx, key, clientv3.WithPrefix(), clientv3.WithRev(now.Header.Revision+1))
			if _, err := cli.Revoke(ctx, clientv3.LeaseID(now.Kvs[0].Lease)); err != nil {
				t.Fatal(err)
			}
			if closed {
				// Its keep-alive ended at once: #1's record is gone, its
				// lease revoked, before #2's is put.
				var lease int64
				gone := false
				for res := range events {
					for _, ev := range res.Events {
						switch k := string(ev.Kv.Key); {
						case k == key+"#1" && ev.Type == clientv3.EventTypePut:
							lease = ev.Kv.Lease
						case k == key+"#1" && ev.Type == clientv3.EventTypeDelete:
							gone = true
						case k == key+"#2" && ev.Type == clientv3.EventTypePut && !gone:
							t.Fatalf("%s#2 was put while %s#1 was still there; want #1's lease revoked first", key, key)
						case k == key+"#2" && ev.Type == clientv3.EventTypePut:
							if res, err := cli.TimeToLive(ctx, clientv3.LeaseID(lease)); err != nil || lease == 0 || res.TTL > 0 {
								t.Fatalf("the lease of %s#1 (%x): %+v, %v; want it revoked", key, lease, res, err)
							}
							endWatch()
						}
					}
				}
				if wctx.Err() == nil || ctx.Err() != nil {
					t.Fatalf("the watch of a's records ended before %s#2 was put", key)
				}
				waitFor(t, "b to see a once", func() bool { return hasMember(b, a.Address()) && len(members(b)) == 2 })
			} else {
				var lease int64
				waitFor(t, key+"#1 registered", func() bool { lease = leaseOf(ctx, t, cli, key+"#1"); return lease != 0 })
				wantState(t, a, 2, true, 0)
				if l := leaseOf(ctx, t, cli, key+"#1"); l != lease {
					t.Fatalf("%s is on lease %x once kept alive, %x before; want the lease whose keep-alive failed kept", key+"#1", l, lease)
				}
			}
			if faults.Load() < 2 {
				t.Fatalf("the keep-alive was asked for %d times; want the fault, then once more", faults.Load())
			}
			wantState(t, a, 2, true, 0)
		})
	}
}
