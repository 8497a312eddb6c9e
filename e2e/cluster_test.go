package e2e

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/etcdtest"
	"github.com/agentd/agentd/testkit/openaifake"
	"github.com/agentd/agentd/testkit/pgtest"
)

// cluster is agentd nodes in cluster mode on one Postgres schema and one
// etcd. Each node has a fake model of its own, all running one brain, so
// the test knows on which node a chat's model call runs.
type cluster struct {
	nodes    []*daemon
	clients  []*api.Client
	inflight []atomic.Int32 // model calls running, per node

	mu   sync.Mutex
	last map[int]int // chat index → the node of its latest model call
}

// saw records that node i runs a model call of the chat the person's last
// message names ("chat N message M", as drive sends).
func (c *cluster) saw(i int, r testkit.Received) {
	var chatN int
	if _, err := fmt.Sscanf(r.Messages[len(r.Messages)-1].Content, "chat %d ", &chatN); err != nil {
		return // a summarising request
	}
	c.mu.Lock()
	c.last[chatN] = i
	c.mu.Unlock()
}

// on returns the chats whose latest model call ran on node i.
func (c *cluster) on(i int) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var chats []int
	for chatN, node := range c.last {
		if node == i {
			chats = append(chats, chatN)
		}
	}
	sort.Ints(chats)
	return chats
}

// newCluster starts n nodes of a cluster of their own on a fresh Postgres
// schema, or skips without AGENTD_TEST_ETCD_ENDPOINTS or
// AGENTD_TEST_PG_DSN. limits go under each node's limits:.
func newCluster(t testing.TB, n int, b *brain, window int, limits map[string]string) *cluster {
	t.Helper()
	endpoints := etcdtest.Endpoints(t)
	dsn := pgtest.DSN(t)
	extra := fmt.Sprintf("store:\n  kind: postgres\n  dsn_env: AGENTD_PG_DSN\ncluster:\n  enabled: true\n  name: %s\n  provider: etcd\n  etcd_endpoints: [%s]\n  bind: 127.0.0.1:0\n",
		etcdtest.ClusterName(), strings.Join(endpoints, ", "))
	c := &cluster{inflight: make([]atomic.Int32, n), last: map[int]int{}}
	for i := range n {
		fake := openaifake.New(openaifake.Options{Window: window, Script: func(r testkit.Received) testkit.Reply {
			c.inflight[i].Add(1)
			defer c.inflight[i].Add(-1)
			c.saw(i, r)
			return b.Script(r)
		}})
		t.Cleanup(fake.Close)
		d := newDaemon(t, daemonConfig{FakeURL: fake.URL(), Window: window, Extra: extra, Limits: limits,
			Env: []string{"AGENTD_PG_DSN=" + dsn}})
		c.nodes = append(c.nodes, d)
		c.clients = append(c.clients, d.Client)
	}
	for _, d := range c.nodes {
		d.start()
	}
	return c
}

// createChats makes n chats, spread over the nodes.
func (c *cluster) createChats(t testing.TB, n int) []*chatLog {
	t.Helper()
	logs := make([]*chatLog, n)
	for i := range logs {
		ctx, cancel := withTimeout(30 * time.Second)
		ch, err := c.clients[i%len(c.clients)].CreateChat(ctx, api.CreateChatRequest{Title: fmt.Sprintf("cluster %d", i)})
		cancel()
		if err != nil {
			t.Fatalf("create chat %d: %v", i, err)
		}
		logs[i] = &chatLog{id: ch.ID, attempts: map[string]bool{}}
	}
	return logs
}

// answeredNow is each chat's count of answered turns now.
func answeredNow(logs []*chatLog) []int64 {
	n := make([]int64, len(logs))
	for i, cl := range logs {
		n[i] = cl.answered.Load()
	}
	return n
}

// waitAllAnswer waits until every chat has answered a turn more than in
// before, failing at deadline with the chats that have not.
func (c *cluster) waitAllAnswer(t testing.TB, logs []*chatLog, before []int64, deadline time.Time, what string) {
	t.Helper()
	for {
		var silent []int
		for i, cl := range logs {
			if cl.answered.Load() <= before[i] {
				silent = append(silent, i)
			}
		}
		if len(silent) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var tails []string
			for i, d := range c.nodes {
				if d.cmd != nil {
					tails = append(tails, fmt.Sprintf("node %d %s", i, d.logTail(15)))
				}
			}
			t.Fatalf("%s: %d chats did not answer by the deadline: %v\n%s", what, len(silent), silent, strings.Join(tails, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitInflight waits until node i has a model call running (a kill then
// lands mid-turn), failing at deadline.
func (c *cluster) waitInflight(t testing.TB, i int, deadline time.Time) {
	t.Helper()
	for c.inflight[i].Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("node %d had no model call in flight by the deadline", i)
		}
		time.Sleep(time.Millisecond)
	}
}

// Failover e2e parameters.
const (
	clusterNodes  = 3
	clusterChats  = 50
	clusterKills  = 4
	clusterWindow = 8192
)

// TestClusterFailoverLosesNothingAcknowledged is issue 23's failover:
// three agentd nodes in cluster mode on one Postgres and etcd, 50 chats
// sending through all three (a client moves to another node when one
// refuses or cuts it), a slow model so that kills land mid-turn, and one
// node SIGKILLed at a time (a different one each time, restarted after). After each kill every chat
// must answer again through the survivors; at the end every acknowledged
// message is in its chat's log exactly once and no log forked.
func TestClusterFailoverLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster failover: skipped with -short")
	}
	b := newBrain(23)
	b.MaxDelay, b.Words = 400*time.Millisecond, 60
	c := newCluster(t, clusterNodes, b, clusterWindow, map[string]string{"requests_per_second": "1000000", "model_idle_timeout": "30s"})
	logs := c.createChats(t, clusterChats)

	tl, halt := driveAll(c.clients, logs)
	defer halt()

	// Generous, and one bound for the whole run: a 2-core machine running
	// the rest of the suite beside it is slow, and a hang fails here rather
	// than at the package's timeout.
	end := time.Now().Add(10 * time.Minute)
	c.waitAllAnswer(t, logs, make([]int64, len(logs)), end, "before any kill")
	hit := 0 // chats whose latest model call ran on the node killed
	for k := range clusterKills {
		victim := k % clusterNodes
		c.waitInflight(t, victim, end)
		before := answeredNow(logs)
		hit += len(c.on(victim))
		c.nodes[victim].kill()
		c.waitAllAnswer(t, logs, before, end, fmt.Sprintf("kill %d (node %d down)", k+1, victim))
		c.nodes[victim].start()
		c.waitAllAnswer(t, logs, answeredNow(logs), end, fmt.Sprintf("after node %d restarted", victim))
	}
	halt()

	lost, _ := verify(t, c.clients[0], logs)
	for i, d := range c.nodes {
		if n, first := d.panics(); n > 0 {
			t.Errorf("node %d: %d panic or race lines in its logs; first: %s", i, n, first)
		}
	}
	if n := b.unpaired.Load(); n > 0 {
		t.Errorf("%d requests reached the model with a tool call and result unpaired; first: %s", n, b.firstUnpaired())
	}
	t.Logf("%d chats, %d kills (hitting %d chats mid-turn or between turns on their node): %d acknowledged, %d completed, %d refused or cut before acknowledgement, problems: %s; lost or duplicated: %d",
		clusterChats, clusterKills, hit, tl.acked.Load(), tl.completed.Load(), tl.unacked.Load(), tl.kinds(), lost)
}
