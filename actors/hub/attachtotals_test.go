package hub

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	"pgregory.net/rapid"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/pgtest"
)

// TestAttachmentTotalsFollowTheRecords: whatever tenants upload (the same
// file again, another tenant's file, past their share), send to chats,
// drop by deleting chats and however often the daemon restarts, the
// running totals of attachment holds are what the ownership records sum
// to, per tenant and together, and no upload stays pending. On Badger and
// on Postgres. The checks share one daemon (opening one is the slow part),
// each with tenants of its own, so a check replays alike when shrunk.
func TestAttachmentTotalsFollowTheRecords(t *testing.T) {
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768)
	cfg.Attachments.MaxBytesPerTenant = 200
	pgtest.EachStore(t, cfg, totalsFollowTheRecords)
}

func totalsFollowTheRecords(t *testing.T, cfg configs.Config) {
	// files: four contents of 20 to 80 bytes, so the share binds now and then.
	files := make([]string, 4)
	for i := range files {
		files[i] = strings.Repeat(fmt.Sprint(i), 20*(i+1)-1) + "\n"
	}
	ctx := context.Background()
	open := func(t interface{ Fatal(...any) }) *Hub {
		h, err := New(ctx, cfg, zerolog.Nop(), Options{RefreshEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := open(t)
	t.Cleanup(func() { _ = h.Close(ctx) })
	// drift is what the totals of every tenant together differ from the
	// records by: nothing, unless a check before failed.
	drift := func(rt *rapid.T) int64 {
		held, err := h.heldBytes(ctx, "")
		if err != nil {
			rt.Fatal(err)
		}
		h.totals.mu.Lock()
		d := h.totals.heldAll
		h.totals.mu.Unlock()
		for _, n := range held {
			d -= n
		}
		return d
	}
	checks := 0
	rapid.Check(t, func(rt *rapid.T) {
		checks++
		tenants := []string{fmt.Sprint("alice", checks), fmt.Sprint("bob", checks)}
		before := drift(rt)
		ids := map[string][]string{}   // a tenant's uploads' ids
		chats := map[string][]string{} // a tenant's chats this check made
		rt.Repeat(map[string]func(*rapid.T){
			"upload": func(rt *rapid.T) {
				tenant := rapid.SampledFrom(tenants).Draw(rt, "tenant")
				f := rapid.SampledFrom(files).Draw(rt, "file")
				a, err := h.Attach(ctx, tenant, strings.NewReader(f), "f.txt", "")
				if err == nil {
					ids[tenant] = append(ids[tenant], a.ID)
				}
			},
			"send": func(rt *rapid.T) {
				tenant := rapid.SampledFrom(tenants).Draw(rt, "tenant")
				if len(ids[tenant]) == 0 {
					rt.Skip("nothing uploaded")
				}
				id := rapid.SampledFrom(ids[tenant]).Draw(rt, "attachment")
				chatID := ""
				if n := len(chats[tenant]); n > 0 && rapid.Bool().Draw(rt, "same chat") {
					chatID = chats[tenant][rapid.IntRange(0, n-1).Draw(rt, "chat")]
				} else {
					c, err := h.CreateChat(ctx, tenant, api.CreateChatRequest{})
					if err != nil {
						rt.Fatal(err)
					}
					chatID = c.ID
					chats[tenant] = append(chats[tenant], chatID)
				}
				// A hold dropped meanwhile answers not found: nothing linked.
				_ = h.attach(ctx, tenant, chatID, &chat.Message{}, api.SendMessageRequest{AttachmentIDs: []string{id}})
			},
			"delete chat": func(rt *rapid.T) {
				tenant := rapid.SampledFrom(tenants).Draw(rt, "tenant")
				n := len(chats[tenant])
				if n == 0 {
					rt.Skip("no chat")
				}
				i := rapid.IntRange(0, n-1).Draw(rt, "chat")
				if err := h.DeleteChat(ctx, tenant, chats[tenant][i]); err != nil {
					rt.Fatal(err)
				}
				chats[tenant] = append(chats[tenant][:i], chats[tenant][i+1:]...)
			},
			"restart": func(rt *rapid.T) {
				if rapid.IntRange(0, 7).Draw(rt, "restart") != 0 {
					rt.Skip("not this time") // restarts are slow: one in eight
				}
				if err := h.Close(ctx); err != nil {
					rt.Fatal(err)
				}
				h = open(rt)
			},
			"": func(rt *rapid.T) {
				if d := drift(rt); d != before {
					rt.Fatalf("the totals of all tenants differ from the records by %d, were by %d", d, before)
				}
				for _, tenant := range tenants {
					want, err := h.heldBytes(ctx, tenant+"/")
					if err != nil {
						rt.Fatal(err)
					}
					if got := h.totals.heldBy(tenant); got != want[tenant] {
						rt.Fatalf("%s holds %d bytes by the totals, %d by the records", tenant, got, want[tenant])
					}
					h.totals.mu.Lock()
					p := h.totals.pending[tenant]
					h.totals.mu.Unlock()
					if p != 0 {
						rt.Fatalf("%s has %d bytes pending after every upload ended", tenant, p)
					}
				}
			},
		})
	})
}

// listCounting counts the reads of lists of attachment holds.
type listCounting struct {
	Store
	lists atomic.Int64
}

func (s *listCounting) RecordsPrefix(ctx context.Context, kind, prefix string, fn func(string, func(any) error) error) error {
	if kind == attachmentOwner {
		s.lists.Add(1)
	}
	return s.Store.RecordsPrefix(ctx, kind, prefix, fn)
}

// TestAnUploadReadsNoListOfHolds: under both attachment limits, an upload
// reads no list of holds; the totals are kept as holds come and go. Each
// upload summed the uploading tenant's every hold, so a tenant's n-th
// upload read n-1 records.
func TestAnUploadReadsNoListOfHolds(t *testing.T) {
	ctx := context.Background()
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 32768)
	cfg.Attachments.MaxBytes, cfg.Attachments.MaxBytesPerTenant = 1<<20, 1<<20
	var counting *listCounting
	h := hubOn(t, cfg, func(db Store) Store {
		counting = &listCounting{Store: db}
		return counting
	})
	atStart := counting.lists.Load()
	for i := range 20 {
		if _, err := h.Attach(ctx, "alice", strings.NewReader(fmt.Sprintf("file %d\n", i)), "f.txt", ""); err != nil {
			t.Fatal(err)
		}
	}
	if n := counting.lists.Load() - atStart; n != 0 {
		t.Fatalf("20 uploads read %d lists of holds, want none", n)
	}
}

// hubOn is a hub on an in-memory store that wrap wraps, closed when t ends.
func hubOn(t *testing.T, cfg configs.Config, wrap func(Store) Store) *Hub {
	t.Helper()
	h, err := newHubOn(cfg, Options{}, wrap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

// newHubOn is a hub with opts on an in-memory store that wrap wraps, which
// its caller closes.
func newHubOn(cfg configs.Config, opts Options, wrap func(Store) Store) (*Hub, error) {
	ctx := context.Background()
	metrics := newMetrics()
	db, err := openStore(ctx, cfg, zerolog.Nop(), true, metrics.storeDurable)
	if err != nil {
		return nil, err
	}
	opts.InMemory, opts.RefreshEvery = true, -1
	return newOn(ctx, cfg, zerolog.Nop(), opts, wrap(db), metrics)
}
