package httpapi_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/actors/hub"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// lateFake starts the OpenAI-style fake at addr, serving model "m".
func lateFake(t *testing.T, addr string) *openaifake.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	f := openaifake.New(openaifake.Options{Listener: ln, Models: []openaifake.ModelEntry{{ID: "m", Window: 32_000}}})
	t.Cleanup(f.Close)
	return f
}

// A provider that comes up after agentd just works, with no restart: the
// daemon re-reads it by itself, health and the model list say the present,
// and a turn that found it down said so plainly.
func TestProviderStartedLateBecomesHealthy(t *testing.T) {
	addr := testkit.FreeAddr(t)
	cfg := testkit.Config(t.TempDir(), "http://"+addr+"/v1", 32_000)
	d := daemontest.Start(t, cfg, nil, hub.Options{InMemory: true, RefreshEvery: 20 * time.Millisecond})
	ctx := context.Background()

	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "hello?"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Problem == nil || res.Problem.Kind != api.ProblemNoProvider {
		t.Fatalf("a turn on a provider that is down: problem %+v, want %s", res.Problem, api.ProblemNoProvider)
	}
	for _, bad := range []string{"stream interrupted", "Ollama"} {
		if strings.Contains(res.Problem.Message, bad) {
			t.Errorf("problem says %q for a configured provider that is down: %s", bad, res.Problem.Message)
		}
	}
	if !strings.Contains(res.Problem.Message, "connection refused") {
		t.Errorf("problem does not name the cause: %s", res.Problem.Message)
	}
	if h, err := d.Client.Health(ctx); err != nil || h.Status != "degraded" || h.ProviderErrors["fake"] == "" {
		t.Fatalf("health with the provider down: %+v %v", h, err)
	}

	lateFake(t, addr)
	// Waits for the daemon's own re-read; the test's deadline bounds it.
	for {
		h, err := d.Client.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Status == "ok" && len(h.ProviderErrors) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ms, err := d.Client.Models(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms.ProviderErrors) != 0 || len(ms.Models) != 1 || ms.Models[0].WindowSource != "list" {
		t.Fatalf("models once the provider is up: %+v", ms)
	}
	res, err = d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "hello again"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Problem != nil || len(res.Messages) == 0 || res.Messages[len(res.Messages)-1].Content != openaifake.DefaultAnswer {
		t.Fatalf("turn once the provider is up: %+v", res)
	}
}

// POST /v1/models/refresh reads the lists now and answers the present.
func TestRefreshModelsNow(t *testing.T) {
	addr := testkit.FreeAddr(t)
	cfg := testkit.Config(t.TempDir(), "http://"+addr+"/v1", 32_000)
	d := daemontest.Start(t, cfg, nil, hub.Options{InMemory: true})
	ctx := context.Background()
	before, err := d.Client.RefreshModels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.ProviderErrors["fake"] == "" {
		t.Fatalf("refresh with the provider down: %+v", before)
	}
	lateFake(t, addr)
	after, err := d.Client.RefreshModels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.ProviderErrors) != 0 || len(after.Models) != 1 || after.Models[0].WindowSource != "list" {
		t.Fatalf("refresh with the provider up: %+v", after)
	}
	if h, err := d.Client.Health(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("health after refresh: %+v %v", h, err)
	}
}

// A model its provider does not list is refused at create and at PATCH,
// naming the models agentd knows; the chat keeps its model.
func TestUnknownModelRefused(t *testing.T) {
	f := openaifake.New(openaifake.Options{Models: []openaifake.ModelEntry{{ID: "m"}, {ID: "other"}}})
	t.Cleanup(f.Close)
	cfg := testkit.Config(t.TempDir(), f.URL(), 32_000)
	cfg.Providers[0].Models = nil // what the provider lists is what it serves
	d := daemontest.Start(t, cfg, nil, hub.Options{InMemory: true})
	ctx := context.Background()
	if _, err := d.Client.RefreshModels(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := d.Client.CreateChat(ctx, api.CreateChatRequest{Model: "fake/nope"})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, "fake/m") || !strings.Contains(ae.Message, "fake/other") {
		t.Fatalf("create with an unknown model: %v", err)
	}
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{Model: "fake/other"})
	if err != nil {
		t.Fatalf("create with a listed model: %v", err)
	}
	a := call(t, ctx, "PATCH", d.Server.URL+"/v1/chats/"+c.ID, "", `{"model":"fake/nope"}`)
	if a.status != 400 || !strings.Contains(a.err.Message, "fake/m") {
		t.Fatalf("PATCH to an unknown model: %d %+v", a.status, a.err)
	}
	got, err := d.Client.Context(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Model != "fake/other" {
		t.Fatalf("the refused PATCH changed the model to %q", got.Model)
	}
}

// A provider that cannot list its models (down) does not block a name.
func TestUnlistedProviderAcceptsAnyModel(t *testing.T) {
	cfg := testkit.Config(t.TempDir(), "http://"+testkit.FreeAddr(t)+"/v1", 32_000)
	d := daemontest.Start(t, cfg, nil, hub.Options{InMemory: true})
	if _, err := d.Client.CreateChat(context.Background(), api.CreateChatRequest{Model: "fake/anything"}); err != nil {
		t.Fatalf("create on a provider that cannot list: %v", err)
	}
}
