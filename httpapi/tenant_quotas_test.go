package httpapi_test

// No tenant may read another's secrets, nor use up what the tenants share
// (the tool index, the attachment store) so that another is locked out.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// twoTenants are the tokens of the tests' tenants alice and bob.
var twoTenants = map[string]string{"tok-a": "alice", "tok-b": "bob"}

// quietModel answers every request "ok".
func quietModel(t *testing.T) *openaifake.Server {
	t.Helper()
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(testkit.Received) testkit.Reply { return testkit.Reply{Text: "ok"} }})
	t.Cleanup(fake.Close)
	return fake
}

// asTenant is a client of d with token's tenant.
func asTenant(d *daemontest.Daemon, token string) *api.Client {
	return &api.Client{BaseURL: d.Server.URL, Token: token}
}

// status is the HTTP status of an API error (0: none, -1: not an API error).
func status(err error) int {
	var e *api.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e.Status
	}
	return -1
}

// webhookNaming is a webhook toolset of one tool, tool, keyed with env.
func webhookNaming(tool, env string) api.PutToolsetRequest {
	return api.PutToolsetRequest{Tools: []api.Tool{{Name: tool, Parameters: crmTools[0].Parameters}},
		Executor: api.Executor{Kind: "webhook", URL: "http://127.0.0.1:9/hook", SecretEnv: env}}
}

// TestATenantNamesOnlyItsOwnOrTheSharedVariables: a toolset may name a
// variable of its tenant's tenants.<name>.allowed_env or of the shared
// toolsets.allowed_env; another tenant's is refused, saying which list to
// add it to, and changes nothing. A restart builds each stored toolset as
// its own tenant's.
func TestATenantNamesOnlyItsOwnOrTheSharedVariables(t *testing.T) {
	t.Setenv("AGENTD_TEST_ALICE_SECRET", "whsec_alice")
	t.Setenv("AGENTD_TEST_BOB_SECRET", "whsec_bob")
	t.Setenv("AGENTD_TEST_SHARED_SECRET", "whsec_shared")
	cfg := daemontest.Config(t.TempDir(), quietModel(t).URL(), 32000)
	cfg.Toolsets.WebhooksAllowPrivate = true
	cfg.Toolsets.AllowedEnv = []string{"AGENTD_TEST_SHARED_SECRET"}
	cfg.Tenants = map[string]configs.Tenant{
		"alice": {AllowedEnv: []string{"AGENTD_TEST_ALICE_SECRET"}},
		"bob":   {AllowedEnv: []string{"AGENTD_TEST_BOB_SECRET"}},
	}
	daemontest.EachStore(t, cfg, func(t *testing.T, cfg configs.Config) {
		ctx := context.Background()
		d := daemontest.Start(t, cfg, twoTenants)
		alice, bob := asTenant(d, "tok-a"), asTenant(d, "tok-b")
		if _, err := alice.PutToolset(ctx, "mine", webhookNaming("mine_find", "AGENTD_TEST_ALICE_SECRET")); err != nil {
			t.Fatalf("alice names her own variable: %v", err)
		}
		for name, env := range map[string]string{"crm": "AGENTD_TEST_BOB_SECRET", "mine": "AGENTD_TEST_BOB_SECRET"} {
			_, err := alice.PutToolset(ctx, name, webhookNaming(name+"_find", env))
			if status(err) != 400 || !strings.Contains(err.Error(), "tenants.alice.allowed_env") {
				t.Fatalf("alice's toolset %s names bob's variable: %v; want 400 naming tenants.alice.allowed_env", name, err)
			}
		}
		if _, err := alice.PutToolset(ctx, "shared", webhookNaming("shared_find", "AGENTD_TEST_SHARED_SECRET")); err != nil {
			t.Fatalf("alice names a shared variable: %v", err)
		}
		if _, err := bob.PutToolset(ctx, "crm", webhookNaming("crm_find", "AGENTD_TEST_BOB_SECRET")); err != nil {
			t.Fatalf("bob names his own variable: %v", err)
		}
		var got api.Toolset
		if st := askJSON(t, d, "tok-a", "GET", "/v1/toolsets/mine", nil, &got); st != 200 || got.Version != 1 || got.Executor.SecretEnv != "AGENTD_TEST_ALICE_SECRET" {
			t.Fatalf("alice's toolset after the refused replacement: %d %+v", st, got)
		}
		if st := askJSON(t, d, "tok-a", "GET", "/v1/toolsets/crm", nil, nil); st != 404 {
			t.Fatalf("alice's refused toolset crm: %d, want 404", st)
		}

		// Stored toolsets are built again at start, each with its tenant's
		// variables: a chat may name each only if it was.
		d = d.Restart()
		alice, bob = asTenant(d, "tok-a"), asTenant(d, "tok-b")
		for who, c := range map[string]struct {
			client   *api.Client
			toolsets []string
		}{"alice": {alice, []string{"mine", "shared"}}, "bob": {bob, []string{"crm"}}} {
			if _, err := c.client.CreateChat(ctx, api.CreateChatRequest{Toolsets: c.toolsets}); err != nil {
				t.Errorf("after a restart, %s's chat naming %v: %v", who, c.toolsets, err)
			}
		}
	})
}

// TestAToolsetPastTheTenantsLimitIsRefused: a PUT of a new name past
// toolsets.max_per_tenant is 429 limit and stores nothing; replacing one
// still works, another tenant is not affected, and deleting one makes
// room.
func TestAToolsetPastTheTenantsLimitIsRefused(t *testing.T) {
	cfg := daemontest.Config(t.TempDir(), quietModel(t).URL(), 32000)
	cfg.Toolsets.MaxPerTenant = 2
	daemontest.EachStore(t, cfg, func(t *testing.T, cfg configs.Config) {
		ctx := context.Background()
		d := daemontest.Start(t, cfg, twoTenants)
		alice, bob := asTenant(d, "tok-a"), asTenant(d, "tok-b")
		client := func(tool string) api.PutToolsetRequest {
			return api.PutToolsetRequest{Tools: []api.Tool{{Name: tool, Parameters: crmTools[0].Parameters}}, Executor: api.Executor{Kind: "client"}}
		}
		for _, name := range []string{"a", "b"} {
			if _, err := alice.PutToolset(ctx, name, client("tool_"+name)); err != nil {
				t.Fatalf("alice's toolset %s: %v", name, err)
			}
		}
		var refused api.Error
		if st := askJSON(t, d, "tok-a", "PUT", "/v1/toolsets/c", client("tool_c"), &refused); st != 429 || refused.Kind != "limit" || !strings.Contains(refused.Message, "toolsets.max_per_tenant") {
			t.Fatalf("alice's third toolset: %d %+v; want 429 limit naming toolsets.max_per_tenant", st, refused)
		}
		if st := askJSON(t, d, "tok-a", "GET", "/v1/toolsets/c", nil, nil); st != 404 {
			t.Fatalf("the refused toolset: %d, want 404", st)
		}
		if st := askJSON(t, d, "tok-a", "PUT", "/v1/toolsets/bad.name", client("tool_d"), &refused); st != 400 || refused.Kind != "bad_request" {
			t.Fatalf("a name no toolset may have, at the limit: %d %+v; want 400, as below it", st, refused)
		}
		if ts, err := alice.PutToolset(ctx, "a", client("tool_a2")); err != nil || ts.Version != 2 {
			t.Fatalf("replacing alice's toolset a at her limit: %+v, %v", ts, err)
		}
		for _, name := range []string{"a", "b"} {
			if _, err := bob.PutToolset(ctx, name, client("tool_"+name)); err != nil {
				t.Fatalf("bob's toolset %s while alice is at her limit: %v", name, err)
			}
		}
		if st := askJSON(t, d, "tok-a", "DELETE", "/v1/toolsets/b", nil, nil); st != 204 {
			t.Fatalf("DELETE: %d", st)
		}
		if _, err := alice.PutToolset(ctx, "c", client("tool_c")); err != nil {
			t.Fatalf("alice's toolset c once she deleted one: %v", err)
		}
	})
}

// TestAToolsetPastTheTenantsToolsIsRefused: the tools of a tenant's
// toolsets together are bounded by toolsets.max_tools_per_tenant (429
// limit, nothing stored); a replacement counts only the other toolsets,
// and another tenant counts its own.
func TestAToolsetPastTheTenantsToolsIsRefused(t *testing.T) {
	cfg := daemontest.Config(t.TempDir(), quietModel(t).URL(), 32000)
	cfg.Toolsets.MaxToolsPerTenant = 3
	d := daemontest.Start(t, cfg, twoTenants)
	ctx := context.Background()
	alice, bob := asTenant(d, "tok-a"), asTenant(d, "tok-b")
	clientTools := func(names ...string) api.PutToolsetRequest {
		req := api.PutToolsetRequest{Executor: api.Executor{Kind: "client"}}
		for _, n := range names {
			req.Tools = append(req.Tools, api.Tool{Name: n, Parameters: crmTools[0].Parameters})
		}
		return req
	}
	if _, err := alice.PutToolset(ctx, "a", clientTools("a1", "a2")); err != nil {
		t.Fatal(err)
	}
	var refused api.Error
	if st := askJSON(t, d, "tok-a", "PUT", "/v1/toolsets/b", clientTools("b1", "b2"), &refused); st != 429 || refused.Kind != "limit" || !strings.Contains(refused.Message, "toolsets.max_tools_per_tenant") {
		t.Fatalf("alice's fourth tool: %d %+v; want 429 limit naming toolsets.max_tools_per_tenant", st, refused)
	}
	if st := askJSON(t, d, "tok-a", "GET", "/v1/toolsets/b", nil, nil); st != 404 {
		t.Fatalf("the refused toolset: %d, want 404", st)
	}
	if _, err := alice.PutToolset(ctx, "a", clientTools("a1", "a2", "a3")); err != nil {
		t.Fatalf("replacing alice's toolset with 3 tools: %v", err)
	}
	if _, err := bob.PutToolset(ctx, "a", clientTools("a1", "a2", "a3")); err != nil {
		t.Fatalf("bob's 3 tools while alice is at her limit: %v", err)
	}
}

// TestATenantsConcurrentToolsetPutsShareItsLastPlaces: PUTs of new names
// at once are counted one after another, so exactly as many are stored
// as toolsets.max_per_tenant allows.
func TestATenantsConcurrentToolsetPutsShareItsLastPlaces(t *testing.T) {
	cfg := daemontest.Config(t.TempDir(), quietModel(t).URL(), 32000)
	cfg.Toolsets.MaxPerTenant = 2
	d := daemontest.Start(t, cfg, twoTenants)
	alice := asTenant(d, "tok-a")
	const n = 10
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("set%d", i)
			_, err := alice.PutToolset(context.Background(), name, api.PutToolsetRequest{
				Tools: []api.Tool{{Name: name + "_tool", Parameters: crmTools[0].Parameters}}, Executor: api.Executor{Kind: "client"}})
			statuses <- status(err)
		})
	}
	wg.Wait()
	close(statuses)
	got := map[int]int{}
	for st := range statuses {
		got[st]++
	}
	if got[0] != 2 || got[429] != n-2 {
		t.Fatalf("statuses of %d PUTs of new names under a limit of 2: %v; want 2 stored, the rest 429", n, got)
	}
}

// TestATenantAtItsAttachmentShareLeavesTheOthersRoom: past
// attachments.max_bytes_per_tenant a tenant's upload is refused as the
// storage limit's is, while another tenant still attaches (the same bytes
// too: each holds them at full size). A file the tenant holds already
// costs nothing; the count survives a restart; deleting the only chat a
// file was sent to gives its room back.
func TestATenantAtItsAttachmentShareLeavesTheOthersRoom(t *testing.T) {
	cfg := daemontest.Config(t.TempDir(), quietModel(t).URL(), 32000)
	cfg.Attachments.MaxBytesPerTenant = 100
	sixty, forty := []byte(strings.Repeat("6", 59)+"\n"), []byte(strings.Repeat("4", 39)+"\n")
	daemontest.EachStore(t, cfg, func(t *testing.T, cfg configs.Config) {
		d := daemontest.Start(t, cfg, twoTenants)
		refusedFull := func(who, token string, data []byte) {
			t.Helper()
			_, refused := tryUpload(t, d.Server.URL, token, "more.txt", data)
			if refused == nil || refused.Status != 413 || refused.Kind != "storage_full" || !strings.Contains(refused.Message, "attachments.max_bytes_per_tenant") {
				t.Fatalf("%s's upload past the share: %+v; want 413 storage_full naming attachments.max_bytes_per_tenant", who, refused)
			}
		}
		uploadAs(t, d.Server.URL, "tok-a", "sixty.txt", sixty)
		refusedFull("alice", "tok-a", []byte(strings.Repeat("x", 59)+"\n"))
		uploadAs(t, d.Server.URL, "tok-a", "sixty-again.txt", sixty)
		held := uploadAs(t, d.Server.URL, "tok-a", "forty.txt", forty)
		uploadAs(t, d.Server.URL, "tok-b", "sixty.txt", sixty)
		uploadAs(t, d.Server.URL, "tok-b", "forty.txt", forty)

		d = d.Restart()
		refusedFull("alice", "tok-a", []byte("1"))
		refusedFull("bob", "tok-b", []byte("1"))
		dropHold(t, asTenant(d, "tok-a"), held.ID)
		uploadAs(t, d.Server.URL, "tok-a", "forty-new.txt", []byte(strings.Repeat("n", 39)+"\n"))
		refusedFull("bob", "tok-b", []byte("1"))
	})
}

// TestATenantsConcurrentUploadsShareItsLastRoom: uploads of one tenant at
// once are counted together, so exactly as many fit as its share holds.
func TestATenantsConcurrentUploadsShareItsLastRoom(t *testing.T) {
	cfg := daemontest.Config(t.TempDir(), quietModel(t).URL(), 32000)
	cfg.Attachments.MaxBytesPerTenant = 100
	d := daemontest.Start(t, cfg, twoTenants)
	const n = 10
	stored := make(chan bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, refused := tryUpload(t, d.Server.URL, "tok-a", "f.txt", []byte(fmt.Sprintf("%039d\n", i)))
			stored <- refused == nil
		})
	}
	wg.Wait()
	close(stored)
	got := 0
	for ok := range stored {
		if ok {
			got++
		}
	}
	if got != 2 {
		t.Fatalf("%d of %d uploads of 40 bytes stored under a share of 100, want 2", got, n)
	}
}

// TestAGuessThatAnotherTenantHoldsTakesRoomAsAnyFile: alice fills the
// store (attachments.max_bytes) close to its limit, uploads a guess at a
// file of bob's, then one more file. Whether that last file fits must be
// the same whether bob holds the guessed bytes or nobody does: the limit
// counts what tenants hold, each hold at its full size. It counted bytes on
// disk, where bytes bob had stored took no room again, so the last file
// fitted only after a right guess.
func TestAGuessThatAnotherTenantHoldsTakesRoomAsAnyFile(t *testing.T) {
	secret := []byte(strings.Repeat("s", 19) + "\n")
	probe := func(t *testing.T, cfg configs.Config, bobHoldsTheGuess bool) bool {
		cfg.DataDir = t.TempDir()
		d := daemontest.Start(t, cfg, twoTenants)
		if bobHoldsTheGuess {
			uploadAs(t, d.Server.URL, "tok-b", "secret.txt", secret)
		} else {
			uploadAs(t, d.Server.URL, "tok-b", "other.txt", []byte(strings.Repeat("o", 19)+"\n"))
		}
		uploadAs(t, d.Server.URL, "tok-a", "filler.txt", []byte(strings.Repeat("f", 49)+"\n"))
		uploadAs(t, d.Server.URL, "tok-a", "guess.txt", secret)
		_, refused := tryUpload(t, d.Server.URL, "tok-a", "next.txt", []byte(strings.Repeat("n", 19)+"\n"))
		if refused != nil && (refused.Status != 413 || refused.Kind != "storage_full") {
			t.Fatalf("the next upload: %+v; want it stored or 413 storage_full", refused)
		}
		return refused == nil
	}
	cfg := daemontest.Config(t.TempDir(), quietModel(t).URL(), 32000)
	cfg.Attachments.MaxBytes = 100
	// fits[held][store]: each probe on a store of its own.
	fits := map[bool]map[string]bool{true: {}, false: {}}
	for held, name := range map[bool]string{true: "bob holds the guess", false: "nobody holds the guess"} {
		t.Run(name, func(t *testing.T) {
			daemontest.EachStore(t, cfg, func(t *testing.T, cfg configs.Config) {
				fits[held][cfg.Store.Kind] = probe(t, cfg, held)
			})
		})
	}
	for store, held := range fits[true] {
		if unheld, ok := fits[false][store]; ok && held != unheld {
			t.Errorf("store %q: after a guess bob holds the next file fits: %v; after one nobody holds: %v; want the same", store, held, unheld)
		}
	}
}

// TestADroppedHoldKeepsItsRoomWhileItsBytesStay: under attachments.max_bytes
// a hold dropped with its chat gives back no room, before a restart or
// after, since its bytes stay on disk until the sweeps (none ran here);
// else sending and deleting would fill the disk past the limit.
func TestADroppedHoldKeepsItsRoomWhileItsBytesStay(t *testing.T) {
	cfg := daemontest.Config(t.TempDir(), quietModel(t).URL(), 32000)
	cfg.Attachments.MaxBytes = 100
	daemontest.EachStore(t, cfg, func(t *testing.T, cfg configs.Config) {
		cfg.DataDir = t.TempDir() // the store's files of its own
		d := daemontest.Start(t, cfg, twoTenants)
		a := uploadAs(t, d.Server.URL, "tok-a", "sixty.txt", []byte(strings.Repeat("6", 59)+"\n"))
		dropHold(t, asTenant(d, "tok-a"), a.ID)
		more := []byte(strings.Repeat("m", 59) + "\n")
		for _, when := range []string{"before a restart", "after a restart"} {
			if _, refused := tryUpload(t, d.Server.URL, "tok-b", "more.txt", more); refused == nil || refused.Status != 413 {
				t.Fatalf("60 bytes more %s, with 60 unheld on disk under a limit of 100: %+v; want 413", when, refused)
			}
			d = d.Restart()
		}
	})
}

// dropHold sends the attachment id to a new chat of c's tenant and deletes
// the chat, which drops the tenant's hold on it (sent to no other chat).
func dropHold(t *testing.T, c *api.Client, id string) {
	t.Helper()
	ctx := context.Background()
	ch, err := c.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, ch.ID, api.SendMessageRequest{Content: "see", AttachmentIDs: []string{id}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteChat(ctx, ch.ID); err != nil {
		t.Fatal(err)
	}
}

// TestAFileSentAndDroppedAgainTakesNoMoreRoom: a tenant that uploads a
// file, drops its hold with the chat and uploads it again, over and over,
// takes its room under attachments.max_bytes once: the bytes stay on disk
// once, and counting each new hold on them again would let one tenant
// fill the limit for all with one file.
func TestAFileSentAndDroppedAgainTakesNoMoreRoom(t *testing.T) {
	cfg := daemontest.Config(t.TempDir(), quietModel(t).URL(), 32000)
	cfg.Attachments.MaxBytes = 100
	d := daemontest.Start(t, cfg, twoTenants)
	sixty := []byte(strings.Repeat("6", 59) + "\n")
	for range 3 {
		dropHold(t, asTenant(d, "tok-a"), uploadAs(t, d.Server.URL, "tok-a", "sixty.txt", sixty).ID)
	}
	uploadAs(t, d.Server.URL, "tok-b", "forty.txt", []byte(strings.Repeat("4", 39)+"\n"))
}
