package persistence

import (
	"hash/fnv"
	"reflect"
)

// A chat's summary (Summary, SummaryModel and Digest: up to some 8 KB)
// changes only when the chat folds, yet every turn saves the snapshot.
// So a snapshot is stored as two records. The whole one, summary and all,
// is written only by a save whose summary the store does not hold yet; the
// turn record, the snapshot without its summary, by every save. Both carry
// the summary's fingerprint (summary_fp), and a load takes the turn
// record's fields over the whole one's only when the fingerprints match.
// A binary from before this split rewrites the whole record without a
// fingerprint, so after a rollback and back its newer snapshot wins over a
// turn record left from before; its next save here writes both again.
// Before that, such a binary reads the whole record: the summary, and the
// rest as the last fold left it, except what it must not miss, whether
// the chat read outside text and a turn paused on the application's
// tools, which rewrite the whole record when they change.

// heldSummary is what the store holds in the whole record, as the
// snapshot's last save or load left it; fp is 0 when that is not known.
type heldSummary struct {
	summary, model, digest string
	untrusted              bool
	paused                 *PausedTurn
	fp                     uint64
}

// summaryHeld reports whether the store holds s's summary (and its trust
// and pause) as they are now. Strings saved and not changed since share
// their bytes, so comparing them costs nothing.
func (s *Snapshot) summaryHeld() bool {
	h := &s.held
	return h.fp != 0 && s.Summary == h.summary && s.SummaryModel == h.model && s.Digest == h.digest &&
		s.Untrusted == h.untrusted && s.Paused == h.paused
}

// holding is what the store holds once s is saved whole, named by fp.
func (s *Snapshot) holding(fp uint64) heldSummary {
	return heldSummary{summary: s.Summary, model: s.SummaryModel, digest: s.Digest, untrusted: s.Untrusted, paused: s.Paused, fp: fp}
}

// summaryFP fingerprints s's summary, never as 0.
func summaryFP(s *Snapshot) uint64 {
	h := fnv.New64a()
	for _, part := range []string{s.Summary, s.SummaryModel, s.Digest} {
		_, _ = h.Write([]byte(part))
		_, _ = h.Write([]byte{0})
	}
	return max(h.Sum64(), 1)
}

// Stored notes that the snapshot was saved: the store holds its requests
// and its summary as they are, and the next save writes only what changes
// next. Call it on the snapshot saved, once the save succeeded.
func (s *Snapshot) Stored() {
	s.RequestsSaved = s.RequestsLogged
	if !s.summaryHeld() {
		s.held = s.holding(summaryFP(s))
	}
}

// splitSummary encodes the records a save writes of rec (its requests
// already apart): the whole record when the store does not hold rec's
// summary (nil when it does), and the turn record.
func splitSummary(rec Snapshot) (whole, turn []byte, err error) {
	fp := rec.held.fp
	if !rec.summaryHeld() {
		fp = summaryFP(&rec)
		rec.SummaryFP = fp
		if whole, err = encode(&rec); err != nil {
			return nil, nil, err
		}
	}
	rec.Summary, rec.SummaryModel, rec.Digest, rec.SummaryFP = "", "", "", fp
	turn, err = encode(&rec)
	return whole, turn, err
}

// joinSummary is the snapshot a load reads: the whole record and, when
// the store has one (hasTurn), the turn record, which wins when it goes
// with the whole record's summary.
func joinSummary(whole, turn Snapshot, hasTurn bool) Snapshot {
	snap := whole
	if hasTurn && turn.SummaryFP != 0 && turn.SummaryFP == whole.SummaryFP {
		snap = turn
		snap.Summary, snap.SummaryModel, snap.Digest = whole.Summary, whole.SummaryModel, whole.Digest
	}
	if whole.SummaryFP != 0 && snap.Untrusted == whole.Untrusted && reflect.DeepEqual(snap.Paused, whole.Paused) {
		snap.held = snap.holding(whole.SummaryFP)
	}
	snap.SummaryFP = 0
	return snap
}
