package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestASecondSignalEndsTheShutdownGraceAtOnce: a person who presses
// Ctrl-C twice, or an operator who sends SIGTERM again, while a turn hangs
// on its provider does not wait out the grace (an hour here): the turn is
// cut at once, its stream ends with turn.completed and problem shutdown,
// and serve returns without an error. The second signal was swallowed
// before.
func TestASecondSignalEndsTheShutdownGraceAtOnce(t *testing.T) {
	defer func(g time.Duration) { shutdownGrace = g }(shutdownGrace)
	shutdownGrace = time.Hour
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(testkit.Received) testkit.Reply { return testkit.Reply{Hang: true} }})
	defer fake.Close()
	cfg := testkit.Config(t.TempDir(), fake.URL(), 32000)
	cfg.Listen = testkit.FreeAddr(t)
	sigs := make(chan os.Signal, 2)
	served := make(chan error, 1)
	go func() { served <- serve(context.Background(), cfg, sigs) }()

	c := &api.Client{BaseURL: "http://" + cfg.Listen}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		res, err := http.Get(c.BaseURL + "/healthz")
		if err == nil {
			_ = res.Body.Close()
			break
		}
		select {
		case err := <-served:
			t.Fatalf("serve ended before it served: %v", err)
		case <-ctx.Done():
			t.Fatal("agentd did not serve within 2 minutes")
		case <-time.After(20 * time.Millisecond):
		}
	}
	ch, err := c.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	ended := make(chan api.TurnResult, 1)
	go func() {
		res, err := c.Send(ctx, ch.ID, api.SendMessageRequest{Content: "hello"}, func(ev api.Event) {
			if ev.Type == chat.EventTurnStarted {
				close(started)
			}
		})
		if err != nil {
			t.Errorf("the stream ended without turn.completed: %v", err)
		}
		ended <- res
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the turn did not start")
	}
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGINT
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve after two signals: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("serve did not return within 2 minutes of a second signal: it waits out the grace")
	}
	res := <-ended
	if res.Problem == nil || res.Problem.Kind != chat.ProblemShutdown {
		t.Fatalf("the hung turn ended with %+v; want problem %q", res.Problem, chat.ProblemShutdown)
	}
}

// TestADataDirThatIsNoFolderIsRefusedByItsKey: a data_dir naming a file,
// or a folder agentd may not write in, failed the start with "create data
// folder: mkdir …: not a directory" or a Badger error, naming neither the
// config key nor, for the second, the path an operator has to fix.
func TestADataDirThatIsNoFolderIsRefusedByItsKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(readOnly, 0o500); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"a file": file, "a read-only folder": readOnly} {
		t.Run(name, func(t *testing.T) {
			if dir == readOnly && os.Geteuid() == 0 {
				t.Skip("root writes in a read-only folder")
			}
			cfg := testkit.Config(dir, "http://127.0.0.1:1", 4096)
			cfg.Listen = testkit.FreeAddr(t)
			err := serve(context.Background(), cfg, make(chan os.Signal))
			if err == nil || !strings.Contains(err.Error(), "data_dir") || !strings.Contains(err.Error(), dir) {
				t.Fatalf("serve with data_dir %s: %v; want an error naming data_dir and %s", name, err, dir)
			}
		})
	}
}
