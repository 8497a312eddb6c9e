// Package memory keeps what agentd has learned about each tenant's person:
// memories (short durable facts, preferences and instructions), the learning
// runs that added them (so a run can be undone), each chat's read-until mark,
// a compact memory map for the system prompt, and the tools that let a model
// remember, search and read memories. It stores generic records through
// persistence and runs no actors: the learner actor decides what to learn.
//
// Everything is tenant-scoped: a memory or run of another tenant is reported
// as ErrNotFound, never as a different error, so ids leak nothing.
//
// States: a memory is "active" (used by the model), "waiting" (learned in a
// chat that read untrusted text, or with remembering automatically off; it
// needs the person's OK through Approve) or "undone" (its run was undone).
//
// Record layout (kinds under persistence's k/<kind>/<id>; tenants are
// path-escaped so one tenant's prefix never covers another's):
//
//	memory/<tenant>/<id>   Memory
//	run/<tenant>/<id>      Run
//	readuntil/<chat>       the chat's read-until mark
//	memmap/<tenant>        the memory map of the day
//
// Store is safe for concurrent use; its read-modify-write operations are
// serialised per tenant (a daemon has one Store over one Badger), so one
// tenant's scans and writes never hold up another's. A tenant keeps at most
// Options.MaxPerTenant memories. The memory map is built off any actor's
// mailbox (MapErr, once per tenant at a time) and read without waiting
// (LastMap).
package memory
