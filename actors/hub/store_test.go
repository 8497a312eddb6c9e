package hub

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/pgtest"
	"github.com/agentd/agentd/tools"
)

func TestNewOnPostgresSaysWhatIsMissingOrUnreachable(t *testing.T) {
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 4096)
	cfg.Store = configs.Store{Kind: configs.StorePostgres, DSNEnv: "AGENTD_TEST_UNSET_DSN"}
	t.Setenv("AGENTD_TEST_UNSET_DSN", "")
	_, err := New(context.Background(), cfg, zerolog.Nop(), Options{RefreshEvery: -1})
	if err == nil || !strings.Contains(err.Error(), "$AGENTD_TEST_UNSET_DSN, which is empty") {
		t.Fatalf("an empty DSN variable: %v; want it named", err)
	}

	dsn, addr := pgtest.Unreachable(t)
	t.Setenv("AGENTD_TEST_UNSET_DSN", dsn)
	_, err = New(context.Background(), cfg, zerolog.Nop(), Options{RefreshEvery: -1})
	if err == nil || !strings.Contains(err.Error(), "store: connect to postgres at "+addr) {
		t.Fatalf("an unreachable server: %v; want it named", err)
	}
}

// boundedStore is a store whose Close may wait on a server: it tells the
// test the bound its CloseContext gets, and whether it had ended.
type boundedStore struct {
	Store
	closing chan closeBound
}

// bounded wraps a store in a boundedStore, which it sets *st to.
func bounded(st **boundedStore) func(Store) Store {
	return func(db Store) Store {
		*st = &boundedStore{Store: db, closing: make(chan closeBound, 1)}
		return *st
	}
}

type closeBound struct {
	deadline time.Time
	bounded  bool
	err      error
}

func (s *boundedStore) CloseContext(ctx context.Context) error {
	deadline, bounded := ctx.Deadline()
	s.closing <- closeBound{deadline, bounded, ctx.Err()}
	return s.Store.Close()
}

// TestHubCloseBoundsTheStoresClose: a Postgres that stopped answering held
// the hub's Close (and the daemon's stop) for as long as the server took,
// the store's Close having no bound. Now the store gets store.close_wait
// of its own (10 s by default), even when the hub's ctx was used up by
// the actors: the writes the sessions queued as they stopped get their
// chance first.
func TestHubCloseBoundsTheStoresClose(t *testing.T) {
	got := storeCloseBound(t, testkit.Config(t.TempDir(), "http://127.0.0.1:1", 4096))
	if !got.bounded || got.err != nil || time.Until(got.deadline) > configs.DefaultCloseWait {
		t.Fatalf("the store's Close got a context bounded %v at %v, ended %v; want a live one bounded by store.close_wait's default", got.bounded, got.deadline, got.err)
	}
}

// TestStoreCloseWaitIsTheStoresBound: the store's bound was a constant
// 10 s, which an operator whose server takes longer to commit a stopping
// node's writes (or whose pod's grace period is shorter) could not set;
// store.close_wait sets it.
func TestStoreCloseWaitIsTheStoresBound(t *testing.T) {
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 4096)
	cfg.Store.CloseWait = configs.Duration{Duration: time.Hour}
	got := storeCloseBound(t, cfg)
	if left := time.Until(got.deadline); !got.bounded || got.err != nil || left <= 30*time.Minute || left > time.Hour {
		t.Fatalf("store.close_wait 1h: the store's Close got a context bounded %v at %v (%v left), ended %v; want one bounded an hour from its turn", got.bounded, got.deadline, left, got.err)
	}
}

// TestAHubThatFailsToStartBoundsTheStoresClose: a hub whose start failed
// (here an application's tools; as well a read of a Postgres that stopped
// answering) closed its store with the unbounded Close, so the daemon's
// failed start waited for the server as long as it took; it gets
// store.close_wait, as a stopping hub's store does.
func TestAHubThatFailsToStartBoundsTheStoresClose(t *testing.T) {
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 4096)
	var st *boundedStore
	failed := errors.New("no tools today")
	_, err := newHubOn(cfg, Options{Tools: func(*tools.Registry) error { return failed }}, bounded(&st))
	if !errors.Is(err, failed) {
		t.Fatalf("a start whose tools failed: %v; want their error", err)
	}
	select {
	case got := <-st.closing:
		if !got.bounded || got.err != nil || time.Until(got.deadline) > configs.DefaultCloseWait {
			t.Fatalf("the failed start's store Close got a context bounded %v at %v, ended %v; want a live one bounded by store.close_wait", got.bounded, got.deadline, got.err)
		}
	default:
		t.Fatal("a hub that failed to start closed a store that may wait on a server without a bound")
	}
}

// unreadToolsets is a store whose read of the stored toolsets fails: the
// start's last read, after the actors are spawned.
type unreadToolsets struct {
	Store
	err error
}

func (s unreadToolsets) Records(ctx context.Context, kind string, fn func(id string, decode func(v any) error) error) error {
	if kind == recordToolset {
		return s.err
	}
	return s.Store.Records(ctx, kind, fn)
}

// TestAHubThatFailsToStartStopsWhatItStarted: a start that failed after
// the actors were spawned (here its read of the stored toolsets; as well
// joining a cluster) closed its store alone: the sessions' registry, the
// summariser, the learner, the tool index, their dispatchers' goroutines
// and the hub's context were left to run for the life of the process (an
// embedding application that tries New again gained a set each time).
// Now a failed start stops what it started, as Close does.
func TestAHubThatFailsToStartStopsWhatItStarted(t *testing.T) {
	before := goleak.IgnoreCurrent()
	failed := errors.New("toolsets unreadable")
	_, err := newHubOn(testkit.Config(t.TempDir(), "http://127.0.0.1:1", 4096), Options{}, func(db Store) Store {
		return unreadToolsets{Store: db, err: failed}
	})
	if !errors.Is(err, failed) {
		t.Fatalf("a start whose toolsets could not be read: %v; want their error", err)
	}
	testkit.NoGoroutineLeft(t, before)
}

// storeCloseBound closes a hub on cfg, its ctx already used up, and
// returns the context its store's bounded Close got.
func storeCloseBound(t *testing.T, cfg configs.Config) closeBound {
	t.Helper()
	var st *boundedStore
	h, err := newHubOn(cfg, Options{}, bounded(&st))
	if err != nil {
		t.Fatal(err)
	}
	used, cancel := context.WithCancel(context.Background())
	cancel()
	_ = h.Close(used)
	select {
	case got := <-st.closing:
		return got
	default:
		t.Fatal("the hub closed a store that may wait on a server without a bound")
		return closeBound{}
	}
}
