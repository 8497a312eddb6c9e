package hub

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
)

func TestNewOnPostgresSaysWhatIsMissingOrUnreachable(t *testing.T) {
	cfg := testkit.Config(t.TempDir(), "http://127.0.0.1:1", 4096)
	cfg.Store = configs.Store{Kind: configs.StorePostgres, DSNEnv: "AGENTD_TEST_UNSET_DSN"}
	t.Setenv("AGENTD_TEST_UNSET_DSN", "")
	_, err := New(context.Background(), cfg, zerolog.Nop(), Options{RefreshEvery: -1})
	if err == nil || !strings.Contains(err.Error(), "$AGENTD_TEST_UNSET_DSN, which is empty") {
		t.Fatalf("an empty DSN variable: %v; want it named", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	t.Setenv("AGENTD_TEST_UNSET_DSN", "postgres://agentd@"+addr+"/agentd?connect_timeout=5")
	_, err = New(context.Background(), cfg, zerolog.Nop(), Options{RefreshEvery: -1})
	if err == nil || !strings.Contains(err.Error(), "store: connect to postgres at "+addr) {
		t.Fatalf("an unreachable server: %v; want it named", err)
	}
}
