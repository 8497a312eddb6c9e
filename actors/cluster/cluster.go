// Package cluster is agentd's cluster mode on protoactor-go's cluster
// (docs/cluster.md, "Cluster mode"): it joins this node's actor system to
// the other nodes through a membership provider (etcd or Kubernetes),
// places each chat on one node as a virtual actor of kind "chat" (its
// identity the chat's id, placed by rendezvous hashing over the members:
// disthash), answers where a chat lives, and carries the notices every
// node must hear (a toolset changed). The messages that cross nodes are
// in clusterpb; the chat's session itself stays a local actor of the
// node, woken and passivated by its grain through the callbacks the hub
// gives.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/k8s"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/actors/cluster/clusterpb"
	"github.com/agentd/agentd/configs"
)

// Kind is the cluster kind of a chat's grain.
const Kind = "chat"

// noticesName is the name of every node's notices actor, reached at each
// member's address.
const noticesName = "agentd-notices"

// ErrUnavailable: the cluster could not say where a chat lives (no member
// answered in time, or this node is leaving).
var ErrUnavailable = errors.New("cluster unavailable")

// Config is what Join needs beyond the configuration's cluster section.
type Config struct {
	// AdvertiseHTTP is this node's HTTP base URL, which Locate answers.
	AdvertiseHTTP string
	// Log receives the node's own lines; protoactor's go through the
	// actor system's logger factory (actors.NewSystem).
	Log zerolog.Logger
	// IdleAfter passivates a grain nobody asked for this long.
	IdleAfter time.Duration
	// Woken is called from a grain's Receive when it activates, Moved when
	// it stops for any reason but its own idleness (placed on another
	// node, this node leaving): they must only send (wake or stop the
	// chat's local session), never block. An idle grain leaves the session
	// to its own idleness rule (a running turn or a watcher keeps it).
	Woken, Moved func(chatID string)
	// ToolsetChanged is called from the notices actor when another node
	// put or deleted a toolset; it must not block (start the reload in a
	// goroutine it owns).
	ToolsetChanged func(tenant, name string)

	// failProviderStart, set by tests only, fails the etcd provider's
	// StartMember once it has registered this node and started watching.
	failProviderStart error
	// endWatch, set by tests only, ends the etcd provider's watch of the
	// members at each receive.
	endWatch <-chan struct{}
	// keepAliveFault, set by tests only, is the etcd provider's
	// (etcdProvider.keepAliveFault).
	keepAliveFault func() (closed bool, err error)
}

// Node is this process's membership of the cluster.
type Node struct {
	c       *pcluster.Cluster
	cfg     Config
	notices *actor.PID
	etcd    *etcdProvider // the provider when it is etcd's, else nil
	// members counts the last topology's members, kept from the event
	// stream: protoactor's MemberList.Members reads without its lock.
	members  atomic.Int64
	topology *eventstream.Subscription
}

// State is what a node says of its membership (/healthz, /metrics).
type State struct {
	// Members counts the members this node's member list holds, itself
	// included.
	Members int
	// Registered says whether this node's record is in etcd on a lease
	// kept alive; nil where the provider does not say (Kubernetes).
	Registered *bool
	// RecordsSkipped counts the records under the cluster's etcd key
	// skipped as not a member's since the join, each time one is read.
	RecordsSkipped int64
}

// State answers this node's view of the cluster; safe from any goroutine.
func (n *Node) State() State {
	s := State{Members: int(n.members.Load())}
	if n.etcd != nil {
		s.Registered = new(n.etcd.alive.Load())
		s.RecordsSkipped = n.etcd.skipped.Load()
	}
	return s
}

// Join starts this node's remote listener on cc.Bind, registers it with
// the membership provider and returns once it is a member.
func Join(ctx context.Context, system *actor.ActorSystem, cc configs.Cluster, cfg Config) (n *Node, err error) {
	host, portText, err := net.SplitHostPort(cc.Bind)
	if err != nil {
		return nil, fmt.Errorf("cluster.bind %q: %w", cc.Bind, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("cluster.bind %q: %w", cc.Bind, err)
	}
	provider, err := newProvider(ctx, cc, cfg)
	if err != nil {
		return nil, err
	}
	n = &Node{cfg: cfg}
	n.etcd, _ = provider.(*etcdProvider)
	kind := pcluster.NewKind(Kind, actors.Props(cfg.Log, func() actor.Actor { return &grain{node: n} }))
	pc := pcluster.Configure(cc.Name, provider, disthash.New(), remote.Configure(host, port),
		pcluster.WithKinds(kind), pcluster.WithRequestTimeout(askTimeout))
	n.c = pcluster.New(system, pc)
	// The notices actor is there before the other nodes can see this one.
	if n.notices, err = system.Root.SpawnNamed(actors.Props(cfg.Log, func() actor.Actor { return &notices{node: n} }), noticesName); err != nil {
		n.release(provider)
		return nil, fmt.Errorf("join cluster %s: %w", cc.Name, err)
	}
	// The member list publishes each topology it takes in, on the
	// goroutine that updates it.
	n.topology = system.EventStream.Subscribe(func(evt any) {
		if t, ok := evt.(*pcluster.ClusterTopology); ok {
			n.members.Store(int64(len(t.Members)))
		}
	})
	// protoactor panics where it cannot start (a port taken, etcd refusing):
	// agentd reports that as an error at start instead, having stopped
	// what the start got to.
	defer func() {
		if r := recover(); r != nil {
			system.EventStream.Unsubscribe(n.topology)
			system.Root.Stop(n.notices)
			n.stopStarted(provider)
			err = fmt.Errorf("join cluster %s: %v", cc.Name, r)
		}
	}()
	n.c.StartMember()
	cfg.Log.Info().Str("cluster", cc.Name).Str("address", n.Address()).Str("http", cfg.AdvertiseHTTP).Msg("joined the cluster")
	return n, nil
}

// noAddress is an actor system's address until its remote listener binds.
const noAddress = "nonhost"

// stopStarted stops what a StartMember that panicked midway started, in
// Leave's order: the provider's watch and registration, the identity
// lookup's actors, the gossip loop, then the remote listener, so the
// cluster port is free and no goroutine of the member runs on. Unlike
// Leave, it leaves the actor system to its caller (the hub shuts it down
// after a failed start). StartMember binds the listener first and sets
// the identity lookup up right after it: an address still unset means it
// started nothing.
func (n *Node) stopStarted(provider pcluster.ClusterProvider) {
	c := n.c
	if c.Remote == nil || c.ActorSystem.Address() == noAddress {
		n.release(provider)
		return
	}
	// A provider StartMember never reached (gossip or pubsub failed first)
	// panics on Shutdown, knowing no member: it has nothing to undo.
	func() {
		defer func() { _ = recover() }()
		if err := provider.Shutdown(false); err != nil {
			n.cfg.Log.Warn().Err(err).Msg("leave the membership after a failed join")
		}
	}()
	c.IdentityLookup.Shutdown()
	c.Gossip.Shutdown()
	c.Remote.Shutdown(true)
}

// release closes what a provider StartMember never reached holds: etcd's
// has its client open from the start (newProvider). Kubernetes' holds
// nothing yet, and is not shut down: its Shutdown reads the cluster its
// StartMember keeps (a nil pointer before), and its client (client-go's,
// which dials at its first request and has no Close) has dialled nothing.
func (n *Node) release(provider pcluster.ClusterProvider) {
	if p, ok := provider.(*etcdProvider); ok {
		if err := p.Shutdown(false); err != nil {
			n.cfg.Log.Warn().Err(err).Msg("close the etcd client after a failed join")
		}
	}
}

// askTimeout bounds a question to a chat's grain, activation included.
const askTimeout = 10 * time.Second

// newProvider builds the membership provider cc names. etcd's is
// agentd's own (etcd.go), connected and checked to answer.
func newProvider(ctx context.Context, cc configs.Cluster, cfg Config) (pcluster.ClusterProvider, error) {
	switch cc.Provider {
	case configs.ClusterKubernetes:
		p, err := k8s.New()
		if err != nil {
			return nil, fmt.Errorf("cluster provider kubernetes (in-cluster config): %w", err)
		}
		return p, nil
	case configs.ClusterEtcd:
		p, err := newEtcdProvider(ctx, cc.EtcdEndpoints, cfg.Log)
		if err != nil {
			return nil, err
		}
		p.failStart, p.endWatch, p.keepAliveFault = cfg.failProviderStart, cfg.endWatch, cfg.keepAliveFault
		return p, nil
	}
	return nil, fmt.Errorf("cluster.provider %q: want etcd or kubernetes", cc.Provider)
}

// etcdWait bounds each of the etcd provider's requests: the check that
// etcd answers before joining, the join's reads and writes, the leave's
// deregistration.
const etcdWait = 10 * time.Second

// Address is this node's cluster (gRPC) address.
func (n *Node) Address() string { return n.c.ActorSystem.Address() }

// Locate asks the chat's grain where the chat lives, activating it on the
// node that owns its identity: that node's HTTP URL, and whether it is
// this one.
func (n *Node) Locate(ctx context.Context, chatID string) (url string, local bool, err error) {
	timeout := askTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	res, err := n.c.Request(chatID, Kind, &clusterpb.Locate{}, pcluster.WithTimeout(timeout))
	if err != nil {
		return "", false, fmt.Errorf("locate chat %s: %w: %v", chatID, ErrUnavailable, err)
	}
	at, ok := res.(*clusterpb.Located)
	if !ok {
		return "", false, fmt.Errorf("locate chat %s: %w: the grain answered %T", chatID, ErrUnavailable, res)
	}
	return at.HttpUrl, at.Address == n.Address(), nil
}

// ToolsetChanged tells every other member that a tenant's toolset was put
// or deleted (fire and forget: a node that misses it reloads the toolset
// from the store when it next starts).
func (n *Node) ToolsetChanged(tenant, name string) {
	msg := &clusterpb.ToolsetChanged{Tenant: tenant, Name: name}
	for _, m := range n.c.MemberList.Members().Members() {
		if addr := m.Address(); addr != n.Address() {
			n.c.ActorSystem.Root.Send(actor.NewPID(addr, noticesName), msg)
		}
	}
}

// Leave leaves the cluster gracefully: the node leaves the membership
// first (so its chats' grains activate on the others at once), its grains
// deactivate (passivating their sessions), then its listener stops. It
// also ends the actor system's own loops (protoactor's Shutdown closes
// it), so the hub must not Shutdown the system again.
func (n *Node) Leave() {
	_ = n.c.ActorSystem.Root.StopFuture(n.notices).Wait()
	n.c.Shutdown(true)
	n.c.ActorSystem.EventStream.Unsubscribe(n.topology)
}

// grain is a chat's virtual actor: while it lives on this node, so does
// the chat's session.
type grain struct {
	node   *Node
	chatID string
	last   time.Time
	stop   func()
	idled  bool // it stopped itself, idle: the chat did not move
}

// idleTick makes a grain check whether it has been idle long enough.
type idleTick struct{}

func (g *grain) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *pcluster.ClusterInit:
		g.chatID = pcluster.GetClusterIdentity(ctx).Identity
		g.last = time.Now()
		g.node.cfg.Woken(g.chatID)
		g.stop = everyTick(ctx, g.node.cfg.IdleAfter)
	case *clusterpb.Locate:
		g.last = time.Now()
		ctx.Respond(&clusterpb.Located{HttpUrl: g.node.cfg.AdvertiseHTTP, Address: g.node.Address()})
	case *idleTick:
		if time.Since(g.last) >= g.node.cfg.IdleAfter {
			g.idled = true
			ctx.Poison(ctx.Self())
		}
	case *actor.Stopping:
		if g.stop != nil {
			g.stop()
		}
		if g.chatID != "" && !g.idled {
			g.node.cfg.Moved(g.chatID)
		}
	}
}

// everyTick sends the actor an idleTick every half of idle (at least a
// second), from the scheduler's goroutine through the root context; the
// returned func stops it.
func everyTick(ctx actor.Context, idle time.Duration) func() {
	every := max(idle/2, time.Second)
	return scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendRepeatedly(every, every, ctx.Self(), &idleTick{})
}

// notices receives what other nodes tell every node.
type notices struct{ node *Node }

func (a *notices) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*clusterpb.ToolsetChanged); ok {
		a.node.cfg.ToolsetChanged(m.Tenant, m.Name)
	}
}
