//go:build !race

// Built without -race, as the in-process cluster tests are: protoactor's
// remote sets gRPC's global logger as it starts, while the etcd client's
// gRPC goroutines read it (docs/cluster.md, "Data races in its cluster
// code").

package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/etcdtest"
)

// Records under the cluster's etcd key that are not members' (not JSON,
// JSON without an id, a host or a port) no longer keep every node out:
// each join skips them, warning once per key with what is wrong, and the
// nodes see each other. One put while they are members is skipped too. A
// valid copy of a known member's record under another key, at another
// address, changes nothing: protoactor's member list knows members by id
// and keeps the address it has. Leaving, the nodes deregister and close
// their etcd clients.
func TestClusterJoinSkipsRecordsThatAreNotMembers(t *testing.T) {
	endpoints := etcdtest.Endpoints(t)
	name := etcdtest.ClusterName()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := etcdClient(t, endpoints)
	prefix := "/agentd/" + name + "/"
	t.Cleanup(func() { _, _ = cli.Delete(context.Background(), prefix, clientv3.WithPrefix()) })
	before := etcdConns(t, endpoints[0])
	bad := map[string]struct{ value, why string }{
		prefix + "not-json": {"not json", "not a member's JSON"},
		prefix + "empty":    {"{}", "the member has no id"},
		prefix + "no-host":  {`{"id":"x@1","port":7000}`, "member x@1 has no host"},
		prefix + "no-port":  {`{"id":"x@2","host":"127.0.0.1"}`, "member x@2 has no port (0)"},
	}
	for key, rec := range bad {
		if _, err := cli.Put(ctx, key, rec.value); err != nil {
			t.Fatal(err)
		}
	}

	var logs testkit.LogBuffer
	cc := configs.Cluster{Enabled: true, Name: name, Provider: configs.ClusterEtcd, EtcdEndpoints: endpoints}
	a, leaveA := joinOn(ctx, t, cc, Config{Log: zerolog.New(&logs)})
	b, leaveB := joinOn(ctx, t, cc, Config{Log: zerolog.Nop()})
	for key, rec := range bad {
		if n := strings.Count(logs.String(), `"key":"`+key+`"`); n != 1 || !strings.Contains(logs.String(), rec.why) {
			t.Fatalf("the join's warnings for %s (%s): %d in %s; want one saying %q", key, rec.value, n, logs.String(), rec.why)
		}
	}
	waitMembers(t, 2, a, b)
	wantState(t, a, 2, true, int64(len(bad)))

	late := prefix + "late"
	if _, err := cli.Put(ctx, late, "[]"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a warning for "+late, func() bool { return strings.Contains(logs.String(), `"key":"`+late+`"`) })
	waitMembers(t, 2, a, b)

	bID := name + "@" + b.c.ActorSystem.ID
	bAt := func(host string, port int32) func() bool {
		return func() bool {
			m := members(a)
			i := slices.IndexFunc(m, func(m *pcluster.Member) bool { return m.Id == bID })
			return len(m) == 2 && i >= 0 && m[i].Host == host && m[i].Port == port
		}
	}
	host, port, err := splitAddress(b.Address())
	if err != nil {
		t.Fatal(err)
	}
	copied := prefix + "~copy"
	if _, err := cli.Put(ctx, copied, fmt.Sprintf(`{"id":%q,"host":"127.0.0.2","port":1,"kinds":["chat"],"alive":true}`, bID)); err != nil {
		t.Fatal(err)
	}
	// Watch events come in order: once the record put after the copy is
	// warned of, a has taken the copy in.
	after := prefix + "after-the-copy"
	if _, err := cli.Put(ctx, after, "{"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a warning for "+after, func() bool { return strings.Contains(logs.String(), `"key":"`+after+`"`) })
	if !bAt(host, int32(port))() {
		t.Fatalf("a's members after a copy of b's record at another address: %v; want b at %s", members(a), b.Address())
	}
	// The late record and the one after the copy; the copy is a member's.
	wantState(t, a, 2, true, int64(len(bad))+2)

	leaveA()
	leaveB()
	if r := a.State().Registered; r == nil || *r {
		t.Fatalf("a's state after it left: registered %s; want false", said(r))
	}
	waitFor(t, "this process's connections to etcd back to those before the joins", func() bool { return etcdConns(t, endpoints[0]) <= before })
	for _, n := range []*Node{a, b} {
		key := prefix + name + "@" + n.c.ActorSystem.ID
		if res, err := cli.Get(ctx, key, clientv3.WithCountOnly()); err != nil || res.Count != 0 {
			t.Fatalf("%s after its node left: %v %v; want it gone", key, res, err)
		}
	}
}

// wantState waits a minute at most until n's state says members
// members, registered or not, and skipped records skipped.
func wantState(t *testing.T, n *Node, members int, registered bool, skipped int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		got := n.State()
		if got.Members == members && got.Registered != nil && *got.Registered == registered && got.RecordsSkipped == skipped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s's state: %d members, registered %s, %d records skipped; want %d, %v, %d",
				n.Address(), got.Members, said(got.Registered), got.RecordsSkipped, members, registered, skipped)
		}
	}
}

// said prints what a state says of its registration.
func said(registered *bool) string {
	if registered == nil {
		return "unsaid"
	}
	return strconv.FormatBool(*registered)
}

// waitFor waits a minute at most for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a minute without %s", what)
		}
	}
}

// A Join that fails — the cluster port taken before anything started, or
// midway: the listener bound, gossip and the identity lookup started, the
// provider registered and watching, then refusing — stops what it started:
// the etcd client it opened is closed (this process has no more
// connections to etcd than before), this node's record is gone, the
// cluster port is free again, so a start retried in the process can bind
// it, and neither the gRPC server nor the gossip loop runs on.
func TestClusterJoinThatFailsReleasesWhatItStarted(t *testing.T) {
	endpoints := etcdtest.Endpoints(t)
	cli := etcdClient(t, endpoints)
	for what, tc := range map[string]struct {
		cfg  Config
		bind func(t *testing.T) string
	}{
		"midway": {cfg: Config{Log: zerolog.Nop(), failProviderStart: errors.New("etcd refused")}},
		"port taken": {cfg: Config{Log: zerolog.Nop()}, bind: func(t *testing.T) string {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			return l.Addr().String()
		}},
	} {
		t.Run(what, func(t *testing.T) {
			name := etcdtest.ClusterName()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			before := etcdConns(t, endpoints[0])
			cc := configs.Cluster{Enabled: true, Name: name, Provider: configs.ClusterEtcd, EtcdEndpoints: endpoints}
			var sys *actor.ActorSystem
			var err error
			// A port another process's socket takes between FreeAddr and
			// the bind (CI runs other packages' cluster tests, which dial
			// out, alongside) fails the join before the provider is asked:
			// for the midway case that join proves nothing, and another
			// port is tried.
			for try := 0; ; try++ {
				if tc.bind != nil {
					cc.Bind = tc.bind(t)
				} else {
					cc.Bind = testkit.FreeAddr(t)
				}
				sys = actors.NewSystem(zerolog.Nop())
				_, err = Join(ctx, sys, cc, tc.cfg)
				if err != nil && strings.Contains(err.Error(), "failed to listen") && tc.bind == nil && try < 3 {
					sys.Shutdown()
					continue
				}
				break
			}
			if err == nil || !strings.Contains(err.Error(), "join cluster "+name) {
				t.Fatalf("join %s: %v; want the join refused", what, err)
			}
			for deadline := time.Now().Add(time.Minute); etcdConns(t, endpoints[0]) > before; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("this process has %d connections to etcd a minute after a failed join, %d before; want its client closed", etcdConns(t, endpoints[0]), before)
				}
			}
			res, err := cli.Get(ctx, "/agentd/"+name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil || res.Count != 0 {
				t.Fatalf("records under the cluster's key after a failed join: %v %v; want none", res, err)
			}
			// No socket listens on the cluster port: this process's listener
			// is closed, and a start retried in the process can bind the
			// port. (A bind would also fail on another process's outgoing
			// connection given the port since.)
			if tc.bind == nil && listening(t, cc.Bind) {
				t.Fatalf("the cluster port %s still listens after a failed join; want it closed", cc.Bind)
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
		})
	}
}

// joinOn joins a node of its own actor system, on a free port: one
// another process's socket took between FreeAddr and the bind is tried
// again on another. The node leaves by the func returned, or when t ends.
func joinOn(ctx context.Context, t *testing.T, cc configs.Cluster, cfg Config) (*Node, func()) {
	t.Helper()
	for try := 0; ; try++ {
		cc.Bind = testkit.FreeAddr(t)
		sys := actors.NewSystem(zerolog.Nop())
		watchMembers(t, sys)
		n, err := Join(ctx, sys, cc, cfg)
		if err != nil && strings.Contains(err.Error(), "failed to listen") && try < 3 {
			continue
		}
		if err != nil {
			t.Fatalf("join: %v", err)
		}
		leave := sync.OnceFunc(n.Leave)
		t.Cleanup(leave)
		return n, leave
	}
}

// waitMembers waits until every node sees want members.
func waitMembers(t *testing.T, want int, nodes ...*Node) {
	t.Helper()
	for _, n := range nodes {
		for deadline := time.Now().Add(time.Minute); len(members(n)) != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("node %s sees %d members; want %d", n.Address(), len(members(n)), want)
			}
		}
	}
}

// memberViews holds, by actor system, the members of each node joinOn
// joined, as its member list last published them: MemberList.Members
// reads without the list's lock, a race with the goroutine updating it.
var memberViews sync.Map // *actor.ActorSystem → *memberView

type memberView struct {
	mu      sync.Mutex
	members []*pcluster.Member
}

// watchMembers keeps sys's members in memberViews from its member list's
// topologies, from before the node joins.
func watchMembers(t *testing.T, sys *actor.ActorSystem) {
	v := &memberView{}
	memberViews.Store(sys, v)
	sub := sys.EventStream.Subscribe(func(evt any) {
		if top, ok := evt.(*pcluster.ClusterTopology); ok {
			v.mu.Lock()
			v.members = top.Members
			v.mu.Unlock()
		}
	})
	t.Cleanup(func() { sys.EventStream.Unsubscribe(sub); memberViews.Delete(sys) })
}

// members answers n's members as its member list last published them.
func members(n *Node) []*pcluster.Member {
	v, _ := memberViews.Load(n.c.ActorSystem)
	mv := v.(*memberView)
	mv.mu.Lock()
	defer mv.mu.Unlock()
	return mv.members
}

func etcdClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	// Connected now, not in the background: etcdConns counts it from here.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.Get(ctx, "/agentd", clientv3.WithCountOnly()); err != nil {
		t.Fatal(err)
	}
	return cli
}

// etcdConns counts this process's established TCP connections to the
// endpoint's port: its sockets (/proc/self/fd) matched by inode in
// /proc/net/tcp and tcp6 (remote address and port in hex, state 01).
func etcdConns(t *testing.T, endpoint string) int {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to read this process's sockets from: %v", err)
	}
	mine := map[string]bool{}
	for _, fd := range fds {
		if link, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil {
			if inode, ok := strings.CutPrefix(link, "socket:["); ok {
				mine[strings.TrimSuffix(inode, "]")] = true
			}
		}
	}
	suffix := fmt.Sprintf(":%04X", port)
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Skipf("no %s to read sockets from: %v", f, err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) > 9 && strings.HasSuffix(fields[2], suffix) && fields[3] == "01" && mine[fields[9]] {
				n++
			}
		}
	}
	return n
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
	return strings.Contains(allStacks(), fn)
}

// allStacks is every goroutine's stack, as runtime.Stack prints them.
func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// goroutines are the goroutines running now, their stacks by id.
func goroutines() map[string]string {
	gs := map[string]string{}
	for _, g := range strings.Split(allStacks(), "\n\n") {
		if f := strings.Fields(g); len(f) > 1 && f[0] == "goroutine" {
			gs[f[1]] = g
		}
	}
	return gs
}

// throttle says whether a goroutine is a protoactor throttle's timer.
func throttle(stack string) bool {
	return strings.Contains(stack, "asynkron/protoactor-go") && strings.Contains(stack, "/actor/throttler.go:")
}

// Two nodes that join and leave leave no goroutine running but
// protoactor's throttles' (docs/cluster.md, "Goroutines after Leave"):
// each waits out one 60 s tick with nothing to stop it. Everything else
// — the etcd client's and provider's, gRPC's, the gossip loop, the
// grains' timers — has ended.
func TestClusterLeaveStopsEveryGoroutineButProtoactorsThrottles(t *testing.T) {
	endpoints := etcdtest.Endpoints(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := goroutines()
	cc := configs.Cluster{Enabled: true, Name: etcdtest.ClusterName(), Provider: configs.ClusterEtcd, EtcdEndpoints: endpoints}
	a, leaveA := joinOn(ctx, t, cc, Config{Log: zerolog.Nop()})
	b, leaveB := joinOn(ctx, t, cc, Config{Log: zerolog.Nop()})
	waitMembers(t, 2, a, b)
	leaveA()
	leaveB()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		var left []string
		for id, g := range goroutines() {
			if _, ok := before[id]; !ok && !throttle(g) {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after both nodes left, %d goroutines they started still run:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
	}
}
