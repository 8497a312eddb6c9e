package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdProvider is agentd's etcd membership provider, in place of
// protoactor's (clusterproviders/etcd), which fails every node's join on
// one record under the cluster's key that is not a member's, and never
// closes its etcd client (docs/cluster.md). It keeps that provider's
// layout, so both read each other's members: a member's record is
// protoactor's etcd.Node in JSON at /agentd/<cluster>/<its id>, on a 3 s
// lease kept alive.
//
// A node whose lease was lost registers again under a new member id
// (<cluster>@<system id>#<n>): protoactor's member list blocks, for good,
// every id it saw leave, so the others would never take the node back
// under its old one.
//
// StartMember runs on the joining goroutine; it then leaves the member
// list to one goroutine (run), which Shutdown stops before it closes the
// client. Shutdown is also what undoes a join that failed at any step.
type etcdProvider struct {
	cli *clientv3.Client
	log zerolog.Logger
	// failStart, set by tests only, fails StartMember once it has
	// registered this node and started watching.
	failStart error
	// endWatch, set by tests only, ends the watch of the cluster's key
	// at each receive.
	endWatch <-chan struct{}
	// keepAliveFault, set by tests only, is asked before each keep-alive
	// run starts after a lost lease: an error fails it, as the client's
	// can; closed has its channel close at once, as the client's does
	// when it hears nothing of the lease for its TTL.
	keepAliveFault func() (closed bool, err error)

	c      *pcluster.Cluster
	prefix string // /agentd/<cluster>/
	base   string // <cluster>@<system id>, this node's first member id
	gen    int    // registrations after a lost lease
	self   *etcd.Node
	key    string
	// lease holds key while registered is set; run renews both.
	lease      clientv3.LeaseID
	registered bool
	members    map[string]*etcd.Node // by key, this node's own left out

	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
	closed bool

	// alive says this node's record is in etcd on a lease kept alive;
	// skipped counts the records put skipped. Node.State reads both from
	// any goroutine.
	alive   atomic.Bool
	skipped atomic.Int64
}

var _ pcluster.ClusterProvider = (*etcdProvider)(nil)

const (
	etcdBaseKey = "/agentd"
	// leaseTTL is how long a node that died stays a member (seconds).
	leaseTTL = 3
	// etcdRetry is how soon a lost lease or watch is tried again.
	etcdRetry = time.Second
)

// newEtcdProvider connects to etcd and checks that it answers, bounded:
// the client dials lazily, so an etcd that does not answer would
// otherwise hang the join's first read instead of failing it.
func newEtcdProvider(ctx context.Context, endpoints []string, log zerolog.Logger) (*etcdProvider, error) {
	// The client's own log (zap) is off: the provider logs its failures.
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: etcdWait, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("cluster provider etcd at %v: %w", endpoints, err)
	}
	rctx, cancel := context.WithTimeout(ctx, etcdWait)
	defer cancel()
	if _, err := cli.Get(rctx, etcdBaseKey, clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("cluster provider etcd at %v does not answer: %w", endpoints, err)
	}
	return &etcdProvider{cli: cli, log: log}, nil
}

// StartMember reads the members, registers this node and watches the
// cluster's key.
func (p *etcdProvider) StartMember(c *pcluster.Cluster) error {
	host, port, err := splitAddress(c.ActorSystem.Address())
	if err != nil {
		return fmt.Errorf("etcd member address: %w", err)
	}
	p.c, p.prefix = c, etcdBaseKey+"/"+c.Config.Name+"/"
	p.base = c.Config.Name + "@" + c.ActorSystem.ID
	p.self, p.key = etcd.NewNode(p.base, host, port, c.GetClusterKinds()), p.prefix+p.base
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	rev, err := p.list(ctx)
	if err != nil {
		close(p.done)
		return err
	}
	if err := p.register(ctx); err != nil {
		close(p.done)
		return err
	}
	ka, err := p.cli.KeepAlive(ctx, p.lease)
	if err != nil {
		close(p.done)
		return fmt.Errorf("keep the etcd lease of %s alive: %w", p.key, err)
	}
	p.alive.Store(true)
	p.publish()
	go p.run(ctx, rev, ka)
	return p.failStart
}

// StartClient is not used: every agentd node is a member.
func (p *etcdProvider) StartClient(*pcluster.Cluster) error {
	return errors.New("agentd's etcd provider joins members only")
}

// Shutdown stops watching, deregisters this node and closes the client;
// safe on a provider whose StartMember never ran or failed midway, and
// once only.
func (p *etcdProvider) Shutdown(bool) error {
	if p.closed {
		return nil
	}
	p.closed = true
	if p.cancel != nil {
		p.cancel()
		<-p.done
	}
	p.alive.Store(false)
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), etcdWait)
	defer cancel()
	if p.registered {
		if _, err := p.cli.Delete(ctx, p.key); err != nil {
			errs = append(errs, fmt.Errorf("deregister %s from etcd: %w", p.key, err))
		}
		// The lease would take the key with it, had the delete failed.
		if _, err := p.cli.Revoke(ctx, p.lease); err != nil {
			errs = append(errs, fmt.Errorf("revoke the etcd lease of %s: %w", p.key, err))
		}
	} else if p.lease != 0 {
		_, _ = p.cli.Revoke(ctx, p.lease) // a lost lease's, as register does
	}
	if err := p.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		errs = append(errs, fmt.Errorf("close the etcd client: %w", err))
	}
	return errors.Join(errs...)
}

// list reads every member under the cluster's key afresh and answers the
// revision it read at.
func (p *etcdProvider) list(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdWait)
	defer cancel()
	res, err := p.cli.Get(ctx, p.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("read the members under %s from etcd: %w", p.prefix, err)
	}
	p.members = map[string]*etcd.Node{}
	for _, kv := range res.Kvs {
		p.put(string(kv.Key), kv.Value)
	}
	return res.Header.Revision, nil
}

// put takes the record at key in as a member. One that is not a member's
// (hand-written, left by another program, from a version that wrote
// something else) is skipped with a warning, never failing the read: one
// bad key would keep every node out of the cluster.
func (p *etcdProvider) put(key string, value []byte) {
	n, err := memberOf(value)
	if err != nil {
		delete(p.members, key)
		p.skipped.Add(1)
		p.log.Warn().Str("key", key).Err(err).Msg("skipped a record under the cluster's etcd key that is not a member")
		return
	}
	if n.ID == p.base || strings.HasPrefix(n.ID, p.base+"#") {
		return // this node's own record, or one of an id it had: itself
	}
	p.members[key] = n
}

// memberOf decodes a member's record: protoactor's etcd.Node with an id
// and an address the other members can dial.
func memberOf(value []byte) (*etcd.Node, error) {
	n, err := etcd.NewNodeFromBytes(value)
	if err != nil {
		return nil, fmt.Errorf("not a member's JSON: %w", err)
	}
	host, port := n.GetAddress()
	switch {
	case n.ID == "":
		return nil, errors.New("the member has no id")
	case host == "":
		return nil, fmt.Errorf("member %s has no host", n.ID)
	case port <= 0 || port > 65535:
		return nil, fmt.Errorf("member %s has no port (%d)", n.ID, port)
	}
	return n, nil
}

// register puts this node's record on a new lease. The previous lease,
// whose keep-alive ended, is revoked first, as far as etcd answers: its
// keep-alive also ends when the client hears nothing of it for its TTL,
// while etcd may still hold it and this node's previous record on it,
// listing the node twice until it expires. (One already expired answers
// not found; one etcd cannot revoke now expires within its TTL.)
func (p *etcdProvider) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, etcdWait)
	defer cancel()
	data, err := p.self.Serialize()
	if err != nil {
		return fmt.Errorf("encode member %s: %w", p.self.ID, err)
	}
	if p.lease != 0 {
		_, _ = p.cli.Revoke(ctx, p.lease)
		p.lease = 0
	}
	lease, err := p.cli.Grant(ctx, leaseTTL)
	if err != nil {
		return fmt.Errorf("grant an etcd lease for %s: %w", p.key, err)
	}
	if _, err := p.cli.Put(ctx, p.key, string(data), clientv3.WithLease(lease.ID)); err != nil {
		_, _ = p.cli.Revoke(ctx, lease.ID)
		return fmt.Errorf("register %s in etcd: %w", p.key, err)
	}
	p.lease, p.registered = lease.ID, true
	return nil
}

// publish tells protoactor's member list who the members are: this node
// and each other id once. Two valid records of one id are one member, the
// later key's in etcd's key order, as protoactor's provider read them (the
// member list itself keeps the address of an id it already knows).
func (p *etcdProvider) publish() {
	at := map[string]int{}
	list := pcluster.Members{p.self.MemberStatus()}
	for _, k := range slices.Sorted(maps.Keys(p.members)) {
		n := p.members[k]
		if i, ok := at[n.ID]; ok {
			list[i] = n.MemberStatus()
			continue
		}
		at[n.ID] = len(list)
		list = append(list, n.MemberStatus())
	}
	p.c.MemberList.UpdateClusterTopology(list)
}

// run keeps this node's lease alive and the member list current until
// ctx ends: a lease lost (etcd away longer than its TTL) is granted and
// this node registered again, a watch that failed is started again after
// the members are read afresh, each retried every etcdRetry.
func (p *etcdProvider) run(ctx context.Context, rev int64, ka <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(p.done)
	watch, endWatch := p.watch(ctx, rev)
	defer func() { endWatch() }()
	var retryLease, retryWatch <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ka:
			if !ok {
				if ctx.Err() != nil {
					return // Shutdown's: the record is still there for it to delete
				}
				ka, retryLease = nil, time.After(0)
				p.alive.Store(false)
				p.renew()
			}
		case <-retryLease:
			retryLease = nil
			// Registered, its keep-alive failed to start: the lease is
			// kept alive on the next try, not left to linger beside a new
			// one (if it has expired meanwhile, its keep-alive ends at
			// once, and the node registers again).
			if !p.registered {
				if err := p.register(ctx); err != nil {
					if ctx.Err() != nil {
						return
					}
					p.log.Warn().Err(err).Dur("retry_in", etcdRetry).Msg("etcd lease lost; register again")
					retryLease = time.After(etcdRetry)
					continue
				}
			}
			var err error
			if ka, err = p.keepAlive(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				p.log.Warn().Err(err).Dur("retry_in", etcdRetry).Msg("keep the etcd lease alive")
				ka, retryLease = nil, time.After(etcdRetry)
				continue
			}
			p.alive.Store(true)
		case res, ok := <-watch:
			if !ok || res.Err() != nil {
				if ctx.Err() == nil {
					p.log.Warn().Err(res.Err()).Dur("retry_in", etcdRetry).Msg("etcd watch of the members ended; read them again")
				}
				watch, retryWatch = nil, time.After(etcdRetry)
				continue
			}
			p.apply(res.Events)
		case <-p.endWatch:
			endWatch() // the watch's channel closes, as when etcd ends it
		case <-retryWatch:
			retryWatch = nil
			rev, err := p.list(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				p.log.Warn().Err(err).Dur("retry_in", etcdRetry).Msg("read the members again")
				retryWatch = time.After(etcdRetry)
				continue
			}
			p.publish()
			endWatch()
			watch, endWatch = p.watch(ctx, rev)
		}
	}
}

// keepAlive keeps the lease of this node's registration alive, once it
// was registered again after a lost lease.
func (p *etcdProvider) keepAlive(ctx context.Context) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	if p.keepAliveFault != nil {
		switch closed, err := p.keepAliveFault(); {
		case err != nil:
			return nil, err
		case closed:
			ka := make(chan *clientv3.LeaseKeepAliveResponse)
			close(ka)
			return ka, nil
		}
	}
	return p.cli.KeepAlive(ctx, p.lease)
}

// watch watches the cluster's key from the revision after rev, until ctx
// ends or the func returned is called.
func (p *etcdProvider) watch(ctx context.Context, rev int64) (clientv3.WatchChan, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	return p.cli.Watch(ctx, p.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)), cancel
}

// renew gives this node its next member id, for the registration after a
// lost lease; the old record went with the lease.
func (p *etcdProvider) renew() {
	p.gen++
	host, port := p.self.GetAddress()
	id := fmt.Sprintf("%s#%d", p.base, p.gen)
	p.self, p.key, p.registered = etcd.NewNode(id, host, port, p.self.Kinds), p.prefix+id, false
}

// apply takes a watch's events in and publishes the members.
func (p *etcdProvider) apply(events []*clientv3.Event) {
	for _, ev := range events {
		key := string(ev.Kv.Key)
		switch ev.Type {
		case clientv3.EventTypePut:
			p.put(key, ev.Kv.Value)
		case clientv3.EventTypeDelete:
			delete(p.members, key)
		}
	}
	p.publish()
}

// splitAddress splits an actor system's host:port address.
func splitAddress(addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portText)
	return host, port, err
}
