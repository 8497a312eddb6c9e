package hub

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/pgtest"
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
