package persistence

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migrations are the Postgres schema's versions, NNNN_name.sql, applied in
// order; a file once released never changes (a change is a new file).
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock that keeps two agentd starting on one
// database from applying the same migration twice.
const migrationLock = 0x61676e74 // "agnt"

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the embedded migrations in version order.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, p := range names {
		name := strings.TrimPrefix(p, "migrations/")
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: the name must be NNNN_name.sql", name)
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", out[i-1].name, out[i].name, out[i].version)
		}
	}
	return out, nil
}

// migrate applies, in one transaction under migrationLock, every migration
// the database has not seen, recording each in schema_migrations. Postgres
// runs DDL in transactions, so a failed migration leaves the schema as it
// was. A database migrated by a newer binary is used as it is: migrations
// only add, so an older binary keeps working (a rollback).
func migrate(ctx context.Context, conn *pgx.Conn, ms []migration) (applied []string, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return nil, fmt.Errorf("take the migration lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("create schema_migrations: %w", err)
	}
	var done []int
	rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
	if err == nil {
		done, err = pgx.CollectRows(rows, pgx.RowTo[int])
	}
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	have := map[int]bool{}
	for _, v := range done {
		have[v] = true
	}
	for _, m := range ms {
		if have[m.version] {
			continue
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return nil, fmt.Errorf("apply migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return nil, fmt.Errorf("record migration %s: %w", m.name, err)
		}
		applied = append(applied, m.name)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit migrations: %w", err)
	}
	return applied, nil
}
