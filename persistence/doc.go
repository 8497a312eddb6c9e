// Package persistence is agentd's durable state, on one of two backends
// with the same methods and behaviour: Store on Badger (embedded, the
// default) and Postgres (postgres.go; its schema in migrations/, applied
// at start, migrate.go). Both hold each chat's append-only message log
// keyed by (chat, seq), its session snapshot, chat metadata and the
// tenants' indexes, windows learned from refusals, and generic records
// (memories, learning runs, marks, toolsets, attachments' metadata). Every
// write is committed before it returns, so a caller may acknowledge it; the
// writes of all chats that wait together share one transaction and one
// sync (group commit, commit.go), on either backend; on Badger that sync
// is of the store's own journal (journal.go), not of Badger's log.
// DeleteChat removes a chat whole (see its comment for the order it keeps).
//
// Badger's key layout (all keys are ASCII prefixes followed by ids; seqs are 8-byte
// big-endian so keys sort in log order):
//
//	c/<chat>              chat metadata (Chat)
//	t/<tenant>/<chat>     the tenant's chats (an index; no value)
//	m/<chat>/<seq>        one message (chat.Message)
//	i/<chat>/<key>        the seq of the message stored with idempotency key
//	                      <key> (int; keys.go)
//	s/<chat>              session snapshot, whole (Snapshot), written when its summary changes
//	u/<chat>              the snapshot without its summary, written by every save (summary.go)
//	w/<provider>/<model>  a window learned from a refusal (int)
//	k/<kind>/<id>         generic records (memories, learning runs, marks)
//	d/<chat>              a chat being deleted whose log is not yet all gone
//	                      (no value; Open finishes the deletion)
//
// Beside Badger's files, journal/a and journal/b hold the journal.
//
// Values are JSON envelopes {"v": version, "d": data}. A reader ignores
// fields it does not know, so a rollback to an older binary keeps working;
// migrations live next to this layout in migrate.go when a version changes.
package persistence
