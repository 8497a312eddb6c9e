package persistence

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestADeletedChatHasNoTenantEvenOnceCached: ChatTenant's answer, cached
// on Badger, never outlives the chat: a deleted chat is not found, and one
// created again under the same id (an import, say) answers its new tenant.
func TestADeletedChatHasNoTenantEvenOnceCached(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) store) {
		ctx := context.Background()
		s := open(t)
		defer s.Close()
		if err := s.CreateChat(ctx, Chat{ID: "x", Tenant: "t1"}); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second answer comes from the cache
			if tenant, err := s.ChatTenant(ctx, "x"); err != nil || tenant != "t1" {
				t.Fatalf("the tenant of x: %q, %v", tenant, err)
			}
		}
		if err := s.DeleteChat(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		if tenant, err := s.ChatTenant(ctx, "x"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the tenant of a deleted chat: %q, %v; want ErrNotFound", tenant, err)
		}
		if err := s.CreateChat(ctx, Chat{ID: "x", Tenant: "t2"}); err != nil {
			t.Fatal(err)
		}
		if tenant, err := s.ChatTenant(ctx, "x"); err != nil || tenant != "t2" {
			t.Fatalf("the tenant of x created again: %q, %v; want t2", tenant, err)
		}
	})
}

// TestATenantReadBeforeAnEvictionIsNotCached: a reader that read a chat's
// tenant before the chat was deleted does not put it back in the cache.
func TestATenantReadBeforeAnEvictionIsNotCached(t *testing.T) {
	c := newTenants()
	_, ok, gen := c.get("x")
	if ok {
		t.Fatal("an empty cache knows x")
	}
	c.evict("x") // the deletion commits while the reader reads
	c.put("x", "t1", gen)
	if tenant, ok, _ := c.get("x"); ok {
		t.Fatalf("a tenant read before the deletion was cached: %q", tenant)
	}
	_, _, gen = c.get("x")
	c.put("x", "t1", gen)
	if tenant, ok, _ := c.get("x"); !ok || tenant != "t1" {
		t.Fatalf("a tenant read after the deletion: %q, %v; want it cached", tenant, ok)
	}
}

// TestTheTenantCacheIsBounded: however many chats are read, the cache holds
// at most maxTenants, and the newest is among them.
func TestTheTenantCacheIsBounded(t *testing.T) {
	c := newTenants()
	for i := range maxTenants + 10 {
		id := fmt.Sprint(i)
		_, _, gen := c.get(id)
		c.put(id, "t", gen)
	}
	if len(c.m) != maxTenants {
		t.Fatalf("the cache holds %d tenants, want %d", len(c.m), maxTenants)
	}
	if _, ok, _ := c.get(fmt.Sprint(maxTenants + 9)); !ok {
		t.Fatal("the newest tenant read is not cached")
	}
}
