package hub

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/attachments"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/pgtest"
)

// TestASweepDeletesTheFilesNoTenantHolds: a file whose last hold went with
// its chat is deleted from disk, with its facts, by the sweep; a file
// another tenant still holds, an upload never sent to a chat, and bytes
// stored after the sweep's cutoff (an upload about to record its hold)
// stay. On Badger and on Postgres. Nothing deleted a stored file.
func TestASweepDeletesTheFilesNoTenantHolds(t *testing.T) {
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768)
	pgtest.EachStore(t, cfg, func(t *testing.T, cfg configs.Config) {
		ctx, h := context.Background(), sweepHub(t, cfg)
		upload := func(tenant, content string) api.Attachment {
			a, err := h.Attach(ctx, tenant, strings.NewReader(content), "f.csv", "")
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		dropped := upload("alice", "dropped,1\n")
		shared := upload("alice", "shared,2\n")
		upload("bob", "shared,2\n")
		kept := upload("alice", "never sent,3\n")
		sendAndDelete(t, h, "alice", dropped.ID, shared.ID)

		cutoff := time.Now()
		late, err := h.files.Put(ctx, strings.NewReader("late,4\n"), "f.csv", "", attachments.Quota{})
		if err != nil {
			t.Fatal(err)
		}
		used := h.files.Used()
		if err := h.sweepAttachments(ctx, cutoff); err != nil {
			t.Fatal(err)
		}
		if _, err := h.files.Open(dropped.ID); !errors.Is(err, attachments.ErrNotFound) {
			t.Errorf("the file no tenant holds: %v; want it deleted", err)
		}
		if left := filesOf(t, h.cfg.DataDir, dropped.ID); len(left) != 0 {
			t.Errorf("the deleted file's sidecars stay: %v", left)
		}
		for what, id := range map[string]string{"held by bob": shared.ID, "never sent": kept.ID, "stored after the cutoff": late.ID} {
			f, err := h.files.Open(id)
			if err != nil {
				t.Errorf("the file %s: %v; want it kept", what, err)
				continue
			}
			f.Close()
		}
		if got, want := h.files.Used(), used-dropped.Size; got != want {
			t.Errorf("Used after the sweep = %d, want %d", got, want)
		}
	})
}

// sweepHub is a hub on cfg with a data folder of its own, closed when t
// ends.
func sweepHub(t *testing.T, cfg configs.Config) *Hub {
	t.Helper()
	cfg.DataDir = t.TempDir()
	h, err := New(context.Background(), cfg, zerolog.Nop(), Options{RefreshEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

// sendAndDelete sends ids to a new chat of tenant and deletes the chat,
// which drops the tenant's holds on them (sent to no other chat).
func sendAndDelete(t *testing.T, h *Hub, tenant string, ids ...string) {
	t.Helper()
	ctx := context.Background()
	c, err := h.CreateChat(ctx, tenant, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.attach(ctx, tenant, c.ID, &chat.Message{}, api.SendMessageRequest{AttachmentIDs: ids}); err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteChat(ctx, tenant, c.ID); err != nil {
		t.Fatal(err)
	}
}

// filesOf lists the store's files of id: its blob and sidecars.
func filesOf(t *testing.T, dataDir, id string) []string {
	t.Helper()
	dir := filepath.Join(dataDir, "attachments", id[:2])
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), id[2:]) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestADroppedHoldsRoomComesBackAfterTheSweeps: under
// attachments.max_bytes, the room a dropped hold took comes back once the
// sweep after the drop and the one after it have run (the file is gone
// then, or some tenant's hold counts it), and not before. It never came
// back: a dropped hold's bytes stayed on disk, and so in the bound.
func TestADroppedHoldsRoomComesBackAfterTheSweeps(t *testing.T) {
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768)
	cfg.Attachments.MaxBytes = 100
	pgtest.EachStore(t, cfg, func(t *testing.T, cfg configs.Config) {
		ctx, h := context.Background(), sweepHub(t, cfg)
		a, err := h.Attach(ctx, "alice", strings.NewReader(strings.Repeat("6", 59)+"\n"), "sixty.txt", "")
		if err != nil {
			t.Fatal(err)
		}
		sendAndDelete(t, h, "alice", a.ID)
		more := strings.Repeat("m", 59) + "\n"
		for i := range 2 {
			if _, err := h.Attach(ctx, "bob", strings.NewReader(more), "more.txt", ""); !errors.Is(err, attachments.ErrStorageFull) {
				t.Fatalf("60 bytes more after %d sweeps, 60 dropped but maybe on disk, under a limit of 100: %v; want storage full", i, err)
			}
			if err := h.sweepAttachments(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := h.Attach(ctx, "bob", strings.NewReader(more), "more.txt", ""); err != nil {
			t.Fatalf("60 bytes after two sweeps deleted the 60 nobody held: %v", err)
		}
	})
}

// TestWhatFitsAfterTheSweepsTellsNothingOfOtherTenants: once the sweeps
// after alice's drop have run, what fits under attachments.max_bytes is
// the same whether bob holds the bytes she dropped (so they stay on disk)
// or other bytes of the same size (so hers were deleted). A bound lowered
// by what the sweep deleted would tell her which.
func TestWhatFitsAfterTheSweepsTellsNothingOfOtherTenants(t *testing.T) {
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768)
	cfg.Attachments.MaxBytes = 130
	guess, other := strings.Repeat("g", 59)+"\n", strings.Repeat("o", 59)+"\n"
	fits := map[bool]bool{}
	for _, bobHoldsTheGuess := range []bool{true, false} {
		cfg.DataDir = t.TempDir()
		ctx := context.Background()
		h, err := New(ctx, cfg, zerolog.Nop(), Options{RefreshEvery: -1, InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		bobs := other
		if bobHoldsTheGuess {
			bobs = guess
		}
		if _, err := h.Attach(ctx, "bob", strings.NewReader(bobs), "b.txt", ""); err != nil {
			t.Fatal(err)
		}
		a, err := h.Attach(ctx, "alice", strings.NewReader(guess), "g.txt", "")
		if err != nil {
			t.Fatal(err)
		}
		sendAndDelete(t, h, "alice", a.ID)
		for range 2 {
			if err := h.sweepAttachments(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		_, err = h.Attach(ctx, "alice", strings.NewReader(strings.Repeat("n", 59)+"\n"), "n.txt", "")
		if err != nil && !errors.Is(err, attachments.ErrStorageFull) {
			t.Fatal(err)
		}
		fits[bobHoldsTheGuess] = err == nil
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if fits[true] != fits[false] {
		t.Errorf("60 bytes more fit when bob holds alice's dropped file: %v; when he holds another: %v; want the same", fits[true], fits[false])
	}
}

// TestAnUploadSentToNoChatExpires: past attachments.unsent_ttl from its
// last upload, a tenant's hold on an upload it sent to no chat is dropped
// (it no longer counts against the tenant's share, and sending it is
// refused), and the sweep then deletes the file; an upload sent to a
// chat, and one uploaded within the ttl, stay held. On Badger and on
// Postgres.
func TestAnUploadSentToNoChatExpires(t *testing.T) {
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768)
	cfg.Attachments.UnsentTTL = configs.Duration{Duration: time.Hour}
	pgtest.EachStore(t, cfg, func(t *testing.T, cfg configs.Config) {
		ctx, h := context.Background(), sweepHub(t, cfg)
		upload := func(content string) api.Attachment {
			a, err := h.Attach(ctx, "alice", strings.NewReader(content), "f.csv", "")
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		unsent, sent := upload("unsent,1\n"), upload("sent,2\n")
		c, err := h.CreateChat(ctx, "alice", api.CreateChatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.attach(ctx, "alice", c.ID, &chat.Message{}, api.SendMessageRequest{AttachmentIDs: []string{sent.ID}}); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if err := h.expireUnsent(ctx, now, now); err != nil {
			t.Fatal(err)
		}
		if _, err := h.attachment(ctx, "alice", unsent.ID); err != nil {
			t.Fatalf("an upload within the ttl: %v; want it held", err)
		}

		later := now.Add(2 * time.Hour)
		if err := h.expireUnsent(ctx, later, now); err != nil {
			t.Fatal(err)
		}
		if _, err := h.attachment(ctx, "alice", unsent.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("the upload sent to no chat past the ttl: %v; want its hold dropped", err)
		}
		if _, err := h.attachment(ctx, "alice", sent.ID); err != nil {
			t.Errorf("the upload sent to a chat: %v; want it held", err)
		}
		if got := h.totals.heldBy("alice"); got != sent.Size {
			t.Errorf("alice holds %d bytes, want %d (the sent file's)", got, sent.Size)
		}
		if err := h.attach(ctx, "alice", c.ID, &chat.Message{}, api.SendMessageRequest{AttachmentIDs: []string{unsent.ID}}); !errors.Is(err, ErrNotFound) {
			t.Errorf("sending the expired upload: %v; want ErrNotFound", err)
		}
		if err := h.sweepAttachments(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := h.files.Open(unsent.ID); !errors.Is(err, attachments.ErrNotFound) {
			t.Errorf("the expired upload's file: %v; want it deleted", err)
		}
		f, err := h.files.Open(sent.ID)
		if err != nil {
			t.Fatalf("the sent file: %v; want it kept", err)
		}
		f.Close()
	})
}
