//go:build !race

// protoactor-go's cluster, remote and etcd provider race among their own
// goroutines at the pinned version (docs/cluster.md, "Cluster mode"), and
// several nodes in one process share grpc's global logger, which each
// node's remote sets: these in-process cluster tests therefore run
// without -race (.ci/run runs them so). The HTTP forwarding they rely on
// is tested under -race in forward_test.go.

package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/etcdtest"
	"github.com/agentd/agentd/testkit/openaifake"
	"github.com/agentd/agentd/testkit/pgtest"
)

// clusterWait bounds every wait for the cluster to agree: generous, since
// CI runs this on a loaded two-core machine.
const clusterWait = 2 * time.Minute

// startCluster runs n in-process nodes of one cluster on one Postgres
// schema, each with its own data folder.
func startCluster(t *testing.T, n int, baseURL string, window int, tokens map[string]string) []*daemontest.Daemon {
	t.Helper()
	endpoints := etcdtest.Endpoints(t)
	t.Setenv("AGENTD_PG_DSN", pgtest.DSN(t))
	name := etcdtest.ClusterName()
	var ds []*daemontest.Daemon
	for range n {
		cfg := daemontest.Config(t.TempDir(), baseURL, window)
		cfg.Store = configs.Store{Kind: configs.StorePostgres, DSNEnv: "AGENTD_PG_DSN"}
		cfg.Cluster = configs.Cluster{Enabled: true, Name: name, Provider: configs.ClusterEtcd, EtcdEndpoints: endpoints, Bind: "127.0.0.1:0"}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, daemontest.Start(t, cfg, tokens))
	}
	return ds
}

// ownerOf waits until every live node names the same owner for a chat
// and returns its index in ds.
func ownerOf(t *testing.T, ds []*daemontest.Daemon, tenant, chatID string) int {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for {
		owners := map[int]bool{}
		var err error
		for _, d := range ds {
			if d == nil {
				continue
			}
			var u string
			if u, err = d.Hub.Owner(context.Background(), tenant, chatID); err != nil {
				break
			}
			if u == "" {
				u = d.Server.URL
			}
			owners[slices.IndexFunc(ds, func(o *daemontest.Daemon) bool { return o != nil && o.Server.URL == u })] = true
		}
		if err == nil && len(owners) == 1 {
			for i := range owners {
				if i >= 0 {
					return i
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nodes never agreed on chat %s's owner: %v, %v", chatID, owners, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestClusterServesAChatOnItsNodeThroughAnyNode(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: testkit.NewHold("").Script})
	defer fake.Close()
	tokens := map[string]string{"tok": "alice", "tok-b": "bob"}
	ds := startCluster(t, 3, fake.URL(), 32000, tokens)
	ctx := context.Background()
	client := func(d *daemontest.Daemon, tok string) *api.Client {
		return &api.Client{BaseURL: d.Server.URL, Token: tok}
	}

	c, err := client(ds[0], "tok").CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	owner := ownerOf(t, ds, "alice", c.ID)
	// Sent to one node and then another, the chat answers from its owner.
	for i, content := range []string{"one", "two"} {
		via := ds[(owner+1+i)%3]
		res, err := client(via, "tok").Send(ctx, c.ID, api.SendMessageRequest{Content: content}, nil)
		if err != nil || res.Problem != nil || res.Status != "completed" {
			t.Fatalf("message %q through node %d: %+v, %v", content, (owner+1+i)%3, res, err)
		}
	}
	msgs, err := client(ds[(owner+2)%3], "tok").Transcript(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WantLog(t, msgs, "one", "answer to one", "two", "answer to two")
	// The session ran on the owner only.
	for i, d := range ds {
		if n, want := d.Hub.ActiveSessions(), map[bool]int{true: 1, false: 0}[i == owner]; n != want {
			t.Errorf("node %d holds %d sessions, want %d (owner %d)", i, n, want, owner)
		}
	}

	// Another tenant's token through another node: the same 404 as on one node.
	other := ds[(owner+1)%3]
	a := call(t, ctx, "GET", other.Server.URL+"/v1/chats/"+c.ID+"/context", "tok-b", "")
	if a.status != http.StatusNotFound || a.err.Kind != "not_found" {
		t.Fatalf("bob asked for alice's chat through a node: %d %+v", a.status, a.err)
	}

	// A forwarded request is served where it lands, never forwarded again.
	req, _ := http.NewRequest("GET", other.Server.URL+"/v1/chats/"+c.ID+"/context", nil)
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set(httpapi.ForwardedHeader, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || other.Hub.ActiveSessions() != 1 {
		t.Fatalf("a forwarded request on a node that does not own the chat: %d, %d sessions there; want it served there", resp.StatusCode, other.Hub.ActiveSessions())
	}
	// That node's session claimed the chat: the owner's next write is
	// fenced (503 moved, nothing stored) and the one after claims it back;
	// the log never forks.
	for try := 0; ; try++ {
		res, err := client(ds[owner], "tok").Send(ctx, c.ID, api.SendMessageRequest{Content: "three"}, nil)
		if err == nil && res.Status == "completed" {
			break
		}
		if try == 2 || err == nil || !strings.Contains(err.Error(), "moved") {
			t.Fatalf("the owner after a forwarded request elsewhere (try %d): %+v, %v", try, res, err)
		}
	}
	if msgs, err = client(ds[owner], "tok").Transcript(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	testkit.WantLog(t, msgs, "one", "answer to one", "two", "answer to two", "three", "answer to three")
}

func TestClusterNodeThatLeavesHandsItsChatsToTheOthers(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: testkit.NewHold("").Script})
	defer fake.Close()
	tokens := map[string]string{"tok": "alice"}
	ds := startCluster(t, 3, fake.URL(), 32000, tokens)
	ctx := context.Background()
	c, err := (&api.Client{BaseURL: ds[0].Server.URL, Token: "tok"}).CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	owner := ownerOf(t, ds, "alice", c.ID)
	via := (owner + 1) % 3
	onVia := &api.Client{BaseURL: ds[via].Server.URL, Token: "tok"}
	if res, err := onVia.Send(ctx, c.ID, api.SendMessageRequest{Content: "one"}, nil); err != nil || res.Status != "completed" {
		t.Fatalf("before the owner left: %+v, %v", res, err)
	}
	ds[owner].Close()
	ds[owner] = nil
	next := ownerOf(t, ds, "alice", c.ID)
	if next == owner {
		t.Fatalf("the chat stayed on the node that left")
	}
	if res, err := onVia.Send(ctx, c.ID, api.SendMessageRequest{Content: "two"}, nil); err != nil || res.Status != "completed" {
		t.Fatalf("after the owner left: %+v, %v", res, err)
	}
	msgs, err := onVia.Transcript(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WantLog(t, msgs, "one", "answer to one", "two", "answer to two")
	if n := ds[next].Hub.ActiveSessions(); n != 1 {
		t.Fatalf("the new owner holds %d sessions, want 1", n)
	}
}

func TestClusterToolsetPutOnOneNodeIsFoundOnEvery(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Script: func(r testkit.Received) testkit.Reply {
		if requestKind(r) != kindTurn {
			return testkit.Reply{Text: "[]"}
		}
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == chat.RoleTool && last.ToolCallID == "k1" && slices.Contains(r.Tools, "refund_invoice_emea"):
			return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "k2", Name: "refund_invoice_emea", Arguments: `{"id":"INV-4242"}`}}}
		case last.Role == chat.RoleTool:
			return testkit.Reply{Text: "not found: " + last.Content}
		}
		return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "k1", Name: "find_tools", Arguments: `{"query":"refund an invoice in the EMEA region"}`}}}
	}})
	defer fake.Close()
	tokens := map[string]string{"tok": "a"}
	ds := startCluster(t, 3, fake.URL(), 8192, tokens)
	ctx := context.Background()
	if st := askJSON(t, ds[0], "tok", "PUT", "/v1/toolsets/erp", api.PutToolsetRequest{Tools: erpTools(), Executor: api.Executor{Kind: "client"}}, nil); st != 200 {
		t.Fatalf("PUT the toolset on node 0: %d", st)
	}
	deadline := time.Now().Add(clusterWait)
	for i, d := range ds {
		for {
			if _, ok := d.Hub.Tools().Toolset("a", "erp"); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d never loaded the toolset node 0 put", i)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// A chat that lives on another node than the one the toolset was put on.
	var c api.Chat
	for {
		var err error
		if c, err = (&api.Client{BaseURL: ds[1].Server.URL, Token: "tok"}).CreateChat(ctx, api.CreateChatRequest{Toolsets: []string{"erp"}}); err != nil {
			t.Fatal(err)
		}
		if ownerOf(t, ds, "a", c.ID) != 0 {
			break
		}
	}
	res, err := (&api.Client{BaseURL: ds[0].Server.URL, Token: "tok"}).Send(ctx, c.ID, api.SendMessageRequest{Content: "Please refund INV-4242 of the Paris office."}, nil)
	if err != nil || res.Status != "requires_action" || res.ToolCalls[0].Name != "refund_invoice_emea" {
		t.Fatalf("find_tools on the chat's node did not find the tool put on node 0: %+v, %v", res, err)
	}
}

func TestClusterResponsesChainedThroughEveryNodeAreOneChat(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: testkit.NewHold("").Script})
	defer fake.Close()
	ds := startCluster(t, 3, fake.URL(), 32000, map[string]string{"tok": "alice"})
	ctx := context.Background()
	prev := ""
	for i, words := range []string{"one", "two", "three", "four"} {
		sdk := openai.NewClient(option.WithBaseURL(ds[i%3].Server.URL+"/v1"), option.WithAPIKey("tok"), option.WithMaxRetries(0))
		params := responses.ResponseNewParams{Model: "fake/m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(words)}}
		if prev != "" {
			params.PreviousResponseID = openai.String(prev)
		}
		resp, err := sdk.Responses.New(ctx, params)
		if err != nil || resp.Status != "completed" {
			t.Fatalf("response %d through node %d: %+v, %v", i, i%3, resp, err)
		}
		prev = resp.ID
	}
	cs, err := ds[0].Hub.Chats(ctx, "alice")
	if err != nil || len(cs) != 1 {
		t.Fatalf("the chain is %d chats (%v), want one", len(cs), err)
	}
	msgs, err := (&api.Client{BaseURL: ds[2].Server.URL, Token: "tok"}).Transcript(ctx, cs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WantLog(t, msgs, "one", "answer to one", "two", "answer to two", "three", "answer to three", "four", "answer to four")
}

// In cluster mode /healthz says each node's view of the cluster — the
// members it sees, that its etcd record is alive, the records under the
// cluster's key it skipped — and /metrics has the same; a record that is
// not a member's, put while the nodes run, is counted on each.
func TestClusterHealthzAndMetricsSayTheClusterState(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: testkit.NewHold("").Script})
	defer fake.Close()
	ds := startCluster(t, 2, fake.URL(), 32000, nil)
	want := func(skipped int64) {
		t.Helper()
		for _, d := range ds {
			var h api.Health
			for deadline := time.Now().Add(clusterWait); ; time.Sleep(50 * time.Millisecond) {
				if err := json.Unmarshal([]byte(call(t, context.Background(), http.MethodGet, d.Server.URL+"/healthz", "", "").body), &h); err != nil {
					t.Fatal(err)
				}
				c := h.Cluster
				if c != nil && c.Members == 2 && c.Registered != nil && *c.Registered && c.RecordsSkipped == skipped {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/healthz of %s: cluster %+v; want 2 members, registered, %d records skipped", d.Server.URL, c, skipped)
				}
			}
			for name, v := range map[string]float64{"agentd_cluster_members": 2, "agentd_cluster_registered": 1, "agentd_cluster_records_skipped_total": float64(skipped)} {
				if got := metricValue(t, d, name); got != v {
					t.Fatalf("/metrics of %s: %s %v; want %v", d.Server.URL, name, got, v)
				}
			}
		}
	}
	want(0)
	cli, err := clientv3.New(clientv3.Config{Endpoints: ds[0].Cfg.Cluster.EtcdEndpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	bad := "/agentd/" + ds[0].Cfg.Cluster.Name + "/not-a-member"
	if _, err := cli.Put(ctx, bad, "{}"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = cli.Delete(context.Background(), bad) }()
	want(1)
}
