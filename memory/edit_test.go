package memory

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/persistence"
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

// crashingRecords stands for a daemon killed before its write number
// crashAt (from 1): that write and every later one fail, changing nothing.
type crashingRecords struct {
	*persistence.Store
	writes, crashAt int
}

var errKilled = errors.New("killed")

func (c *crashingRecords) write() error {
	c.writes++
	if c.crashAt > 0 && c.writes >= c.crashAt {
		return errKilled
	}
	return nil
}

func (c *crashingRecords) PutRecord(ctx context.Context, kind, id string, v any) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Store.PutRecord(ctx, kind, id, v)
}

func (c *crashingRecords) PutRecords(ctx context.Context, recs ...persistence.RecordPut) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Store.PutRecords(ctx, recs...)
}

func (c *crashingRecords) DeleteRecord(ctx context.Context, kind, id string) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Store.DeleteRecord(ctx, kind, id)
}

// TestADeleteCutByACrashLeavesNoMapNamingTheMemory: a delete killed
// between its writes is not acknowledged, so the person deletes again; then
// the memory is gone and the map of the day, read again after the restart,
// does not name it. Deleting before dropping the map, a crash between left
// the stored map naming the memory for the rest of the day, and the retry
// found nothing to delete.
func TestADeleteCutByACrashLeavesNoMapNamingTheMemory(t *testing.T) {
	ctx := context.Background()
	for crashAt := 1; crashAt <= 2; crashAt++ {
		db := openDB(t)
		c := &clock{t: time.Date(2026, 10, 5, 9, 0, 0, 0, time.UTC)}
		rec := &crashingRecords{Store: db}
		s := New(rec, Options{Now: c.Now})
		_, ms := mustAdd(t, s, AddInput{Tenant: "t", Texts: []string{"Keeps bees.", "Lives in Porto."}})
		if m := mapText(s, "t"); !strings.Contains(m, "bees") {
			t.Fatalf("map before the delete = %q", m)
		}
		rec.writes, rec.crashAt = 0, crashAt
		if err := s.Delete(ctx, "t", ms[0].ID); !errors.Is(err, errKilled) {
			t.Fatalf("crash at write %d: the delete answered %v, want it killed", crashAt, err)
		}
		rec.crashAt = 0
		s = New(rec, Options{Now: c.Now}) // the restart
		if err := s.Delete(ctx, "t", ms[0].ID); err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatalf("crash at write %d: the retried delete: %v", crashAt, err)
		}
		if _, err := s.Get(ctx, "t", ms[0].ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("crash at write %d: the memory is still read after the retried delete: %v", crashAt, err)
		}
		if m := mapText(s, "t"); strings.Contains(m, "bees") || !strings.Contains(m, "Porto") {
			t.Fatalf("crash at write %d: the map after the retried delete = %q, want Porto and no bees", crashAt, m)
		}
	}
}
