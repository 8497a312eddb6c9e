package hub

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/session"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/memory"
	"github.com/agentd/agentd/modelcatalog"
	"github.com/agentd/agentd/persistence"
)

// Store is what the hub and the actors it wires need of persistence; both
// backends have it (persistence.Store on Badger, persistence.Postgres).
type Store interface {
	session.Store
	learner.Chats
	memory.Records
	modelcatalog.WindowStore
	CreateChat(ctx context.Context, c persistence.Chat) error
	ImportChat(ctx context.Context, c persistence.Chat, snap persistence.Snapshot, msgs []chat.Message, recs ...persistence.RecordPut) error
	ChatTenant(ctx context.Context, id string) (string, error)
	CountChats(ctx context.Context, tenant string) (int, error)
	ChatsPage(ctx context.Context, tenant, after string, limit int) ([]persistence.Chat, bool, error)
	DeleteChat(ctx context.Context, id string, records ...persistence.RecordKey) error
	LastSeq(ctx context.Context, chatID string) (int64, error)
	MessagesWithin(ctx context.Context, chatID string, from, to int64, maxBytes int) ([]chat.Message, error)
	ActivityPage(ctx context.Context, chatID string, after int64, limit int) ([]persistence.Activity, bool, error)
	DeleteRecord(ctx context.Context, kind, id string) error
	// RecordsPrefix reads the records of a kind whose ids start with
	// prefix: one tenant's, for a kind whose ids are "<tenant>/…".
	RecordsPrefix(ctx context.Context, kind, prefix string, fn func(id string, decode func(v any) error) error) error
	Close() error
}

// openStore opens the configured backend: Badger in data_dir (in memory
// when inMemory), or Postgres at the DSN in the variable dsn_env names.
// observe hears how long each durable batch took (the store's
// ObserveDurable).
func openStore(ctx context.Context, cfg configs.Config, log zerolog.Logger, inMemory bool, observe func(time.Duration)) (Store, error) {
	if cfg.Store.Kind != configs.StorePostgres {
		return persistence.Open(cfg.DataDir+"/badger", persistence.Options{InMemory: inMemory, ObserveDurable: observe,
			Logger: persistence.BadgerLogger(log.With().Str("component", "badger").Logger())})
	}
	dsn := os.Getenv(cfg.Store.DSNEnv)
	if dsn == "" {
		return nil, fmt.Errorf("store: kind postgres reads its DSN from $%s, which is empty", cfg.Store.DSNEnv)
	}
	st, applied, err := persistence.OpenPostgres(ctx, dsn, persistence.PostgresOptions{ObserveDurable: observe})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if len(applied) > 0 {
		log.Info().Strs("migrations", applied).Msg("postgres schema migrated")
	}
	return st, nil
}
