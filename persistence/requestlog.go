package persistence

import (
	"fmt"
	"slices"

	"github.com/agentd/agentd/chat"
)

// A chat's request log (Snapshot.Requests, its last requests) is stored
// apart from its snapshot, one record (Badger) or row (Postgres) a
// request, keyed by the request's number: the chat's requests are numbered
// from 1 as they are logged, and Requests ends with number RequestsLogged.
// A save writes, in the snapshot's transaction, the requests new or
// changed since the last save (those numbered above RequestsSaved) and
// deletes those they pushed out of the log, so a turn rewrites one or two
// small records, not fifty. A snapshot saved before carries its log inline
// (under "requests"); it loads with it, and its next save moves it.

// LogRequest keeps r as the newest of the last keep requests. A new slice
// each time: saved copies of the snapshot never share its array.
func (s *Snapshot) LogRequest(r chat.RequestLog, keep int) {
	s.RequestsLogged = max(s.RequestsLogged, int64(len(s.Requests))) + 1
	rs := s.Requests[max(0, len(s.Requests)+1-keep):]
	s.Requests = append(slices.Clip(rs), r)
}

// ReportRequest sets what the provider counted for the newest request.
func (s *Snapshot) ReportRequest(reported int) {
	n := len(s.Requests)
	if n == 0 {
		return
	}
	s.Requests = slices.Clone(s.Requests)
	s.Requests[n-1].Reported = reported
	s.RequestsSaved = min(s.RequestsSaved, s.RequestsLogged-1)
}

// requestWrites is what a save writes of a snapshot's request log: put,
// numbered from first on, and the stored requests numbered from dropFrom
// up to (not including) dropTo, which left the log.
type requestWrites struct {
	first            int64
	put              []chat.RequestLog
	dropFrom, dropTo int64
}

// splitRequests parts snap into the snapshot record (without its log) and
// what the save writes of its log. A log held by no number (a snapshot
// saved before, one built by hand) is numbered from 1 and written whole.
// The requests that left the log are those before its first, at most as
// many as came since the last save: each pushed one out once the log was
// full (before, the log grew and its first is 1). A count reported after
// its request was saved rewrites that request and deletes one record
// already gone (Badger: a tombstone; Postgres: no row).
func splitRequests(snap Snapshot) (Snapshot, requestWrites) {
	rs := snap.Requests
	last := snap.RequestsLogged
	saved := snap.RequestsSaved
	if last < int64(len(rs)) {
		last, saved = int64(len(rs)), 0
	}
	first := last - int64(len(rs)) + 1
	from := max(saved+1, first)
	w := requestWrites{first: from, put: rs[from-first:], dropFrom: max(1, first-(last-saved)), dropTo: first}
	snap.Requests, snap.RequestsLogged, snap.RequestsSaved = nil, last, 0
	return snap, w
}

// loadedRequests is a loaded snapshot with its log: the stored requests
// of a snapshot that holds none inline, and one that does (saved before)
// keeps its own, which its next save writes.
//
// storedLog: a load reads the records numbered up to RequestsLogged, no
// later one. A binary from before this log, run on a store a newer one
// wrote (a rollback), saves the log inline again, numbered from 1, and
// leaves the records above it; the next save here deletes those below the
// log's first and overwrites the rest as the numbers reach them.
func loadedRequests(snap *Snapshot, stored []chat.RequestLog) {
	if len(snap.Requests) > 0 {
		snap.RequestsLogged, snap.RequestsSaved = int64(len(snap.Requests)), 0
		return
	}
	snap.Requests = stored
	snap.RequestsSaved = snap.RequestsLogged
}

// storedSnapshot is a snapshot encoded for a save: its whole record (nil
// when the store holds its summary already) and its turn record
// (summary.go), and the requests of its log the save writes (encoded) and
// deletes.
type storedSnapshot struct {
	whole, turn []byte
	reqs        [][]byte
	requestWrites
}

// encodeSnapshot encodes snap for a save (both backends).
func encodeSnapshot(snap Snapshot) (storedSnapshot, error) {
	rec, w := splitRequests(snap)
	whole, turn, err := splitSummary(rec)
	if err != nil {
		return storedSnapshot{}, err
	}
	out := storedSnapshot{whole: whole, turn: turn, reqs: make([][]byte, len(w.put)), requestWrites: w}
	for i := range w.put {
		if out.reqs[i], err = encode(&w.put[i]); err != nil {
			return storedSnapshot{}, fmt.Errorf("request %d: %w", w.first+int64(i), err)
		}
	}
	return out, nil
}
