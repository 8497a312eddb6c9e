package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// fileReadScript has the model call file_read on whatever id the test
// names, then answer with what the tool said.
type fileReadScript struct {
	mu sync.Mutex
	id string
}

func (s *fileReadScript) target(id string) {
	s.mu.Lock()
	s.id = id
	s.mu.Unlock()
}

func (s *fileReadScript) reply(r testkit.Received) testkit.Reply {
	last := r.Messages[len(r.Messages)-1]
	if last.Role == chat.RoleTool {
		return testkit.Reply{Text: "TOOL SAID: " + last.Content}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: "r", Name: "file_read", Arguments: fmt.Sprintf(`{"attachment_id":%q}`, s.id)}}}
}

func TestAModelCannotReadAnotherTenantsAttachment(t *testing.T) {
	script := &fileReadScript{}
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: script.reply})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), map[string]string{"tok-a": "alice", "tok-b": "bob"})
	ctx := context.Background()
	secret := uploadAs(t, d.Server.URL, "tok-a", "secret.txt", []byte("alice-secret-42\n"))

	answer := func(token, id string) string {
		t.Helper()
		c := &api.Client{BaseURL: d.Server.URL, Token: token}
		ch, err := c.CreateChat(ctx, api.CreateChatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		script.target(id)
		res, err := c.Send(ctx, ch.ID, api.SendMessageRequest{Content: "read the file " + id}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Messages[len(res.Messages)-1].Content
	}
	if got := answer("tok-a", secret.ID); !strings.Contains(got, "alice-secret-42") {
		t.Fatalf("the owner's model cannot read her own file: %s", got)
	}
	foreign := answer("tok-b", secret.ID)
	if strings.Contains(foreign, "alice-secret-42") {
		t.Fatalf("bob's model read alice's file: %s", foreign)
	}
	unknown := strings.Repeat("0", 64)
	if none := answer("tok-b", unknown); strings.ReplaceAll(none, unknown, "ID") != strings.ReplaceAll(foreign, secret.ID, "ID") {
		t.Fatalf("a foreign id is answered unlike an unknown one, which tells that someone holds the file:\n foreign: %s\n unknown: %s", foreign, none)
	}
}

func TestAMessageToAnUnknownChatStoresNoAttachment(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(testkit.Received) testkit.Reply { return testkit.Reply{Text: "ok"} }})
	defer fake.Close()
	dir := t.TempDir()
	content := []byte("never stored\n")
	path := filepath.Join(dir, "note.txt")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := daemontest.Config(filepath.Join(dir, "data"), fake.URL(), 32000)
	cfg.Attachments = configs.Attachments{AllowedDirs: []string{dir}}
	d := daemontest.Start(t, cfg, nil)
	ctx := context.Background()
	_, err := d.Client.Send(ctx, "no-such-chat", api.SendMessageRequest{Content: "see the file", Paths: []string{path}}, nil)
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("err = %v, want a 404", err)
	}
	sum := sha256.Sum256(content)
	id := hex.EncodeToString(sum[:])
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "again", AttachmentIDs: []string{id}}, nil); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("the tenant holds the attachment of a refused message: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "attachments", id[:2], id[2:])); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file of a refused message was stored: %v", err)
	}
}

// An imported chat carries its messages' attachments, so it holds them as
// a chat they were sent to does: deleting the chat it was exported from
// must not take the tenant's hold on them. Importing someone else's export
// still grants nothing.
func TestAnImportedChatKeepsItsAttachmentsWhenTheSourceIsDeleted(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(testkit.Received) testkit.Reply { return testkit.Reply{Text: "ok"} }})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), map[string]string{"tok-a": "alice", "tok-b": "bob"})
	ctx := context.Background()
	alice := &api.Client{BaseURL: d.Server.URL, Token: "tok-a"}
	bob := &api.Client{BaseURL: d.Server.URL, Token: "tok-b"}
	y := uploadAs(t, d.Server.URL, "tok-a", "y.txt", []byte("why not\n"))

	sendY := func(c *api.Client) error {
		t.Helper()
		ch, err := c.CreateChat(ctx, api.CreateChatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Send(ctx, ch.ID, api.SendMessageRequest{Content: "see y", AttachmentIDs: []string{y.ID}}, nil)
		return err
	}
	b1, err := alice.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Send(ctx, b1.ID, api.SendMessageRequest{Content: "see y", AttachmentIDs: []string{y.ID}}, nil); err != nil {
		t.Fatal(err)
	}
	exp, err := alice.Export(ctx, b1.ID)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := alice.Import(ctx, exp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Import(ctx, exp); err != nil {
		t.Fatal(err)
	}
	if err := alice.DeleteChat(ctx, b1.ID); err != nil {
		t.Fatal(err)
	}
	msgs, err := alice.Transcript(ctx, b2.ID)
	if err != nil || len(msgs) == 0 || len(msgs[0].Attachments) != 1 || msgs[0].Attachments[0].ID != y.ID {
		t.Fatalf("the imported chat's first message: %+v, %v; want it to carry y", msgs, err)
	}
	if err := sendY(alice); err != nil {
		t.Fatalf("alice lost y, which her imported chat %s still carries: %v", b2.ID, err)
	}
	var apiErr *api.Error
	if err := sendY(bob); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("bob, having imported alice's export, sends her attachment: %v, want a 404", err)
	}
}
