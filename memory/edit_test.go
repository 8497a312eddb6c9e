package memory

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestEditAndDeleteOneMemory(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	_, ms := mustAdd(t, s, AddInput{Tenant: "t", Texts: []string{"Keeps bees.", "Lives in Porto."}})
	bees, porto := ms[0], ms[1]
	if _, err := s.Edit(ctx, "other", bees.ID, "Keeps wasps."); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another tenant's edit: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "other", bees.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another tenant's delete: %v, want ErrNotFound", err)
	}
	if _, err := s.Edit(ctx, "t", bees.ID, "  \n "); !errors.Is(err, ErrEmpty) {
		t.Fatalf("edit to blank: %v, want ErrEmpty", err)
	}
	if !strings.Contains(mapText(s, "t"), "Porto") {
		t.Fatalf("map lacks Porto before the edit: %q", mapText(s, "t"))
	}
	got, err := s.Edit(ctx, "t", porto.ID, "  Lives in Lisbon. ")
	if err != nil || got.Text != "Lives in Lisbon." || got.State != StateActive || got.RunID != porto.RunID {
		t.Fatalf("edit = %+v, %v", got, err)
	}
	if m := mapText(s, "t"); strings.Contains(m, "Porto") || !strings.Contains(m, "Lisbon") {
		t.Fatalf("map after the edit = %q, want Lisbon, not Porto", m)
	}
	if err := s.Delete(ctx, "t", bees.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "t", bees.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted memory still read: %v", err)
	}
	if err := s.Delete(ctx, "t", bees.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	left, err := s.List(ctx, "t", "")
	if err != nil || len(left) != 1 || left[0].ID != porto.ID {
		t.Fatalf("left = %+v, %v", left, err)
	}
	if strings.Contains(mapText(s, "t"), "bees") {
		t.Fatalf("map keeps a deleted memory: %q", mapText(s, "t"))
	}
	// Undoing the run skips the deleted memory and undoes the edited one.
	if _, err := s.UndoRun(ctx, "t", porto.RunID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Edit(ctx, "t", porto.ID, "Lives in Faro."); !errors.Is(err, ErrState) {
		t.Fatalf("edit of an undone memory: %v, want ErrState", err)
	}
}
