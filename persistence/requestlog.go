package persistence

import (
	"strconv"

	"github.com/agentd/agentd/chat"
)

// encodeSnapshot is encode for a snapshot, with its request log (up to
// fifty entries, saved with every turn's answer, and most of the time
// encoding a snapshot took) written without reflection after the rest:
// the log is the snapshot's last field, so the bytes are encode's.
// FuzzEncodeIsJSONs holds them to json.Marshal's, and
// TestTheRequestLogCodecKnowsEveryField fails when chat.RequestLog gains a
// field appendRequests does not write or Snapshot one after Requests.
func encodeSnapshot(snap Snapshot) ([]byte, error) {
	rs := snap.Requests
	snap.Requests = nil
	val, err := encode(snap)
	if err != nil || len(rs) == 0 {
		return val, err
	}
	// val ends with the data's and the envelope's braces; the data is not
	// empty (first_kept_seq is always written), so a comma goes first.
	b := make([]byte, 0, len(val)+len(`,"requests":`)+112*len(rs))
	b, ok := appendRequests(append(append(b, val[:len(val)-2]...), `,"requests":`...), rs)
	if !ok {
		snap.Requests = rs
		return encode(snap) // the general way, which says what is wrong
	}
	return append(b, "}}"...), nil
}

// appendRequests appends rs as json.Marshal writes them; ok is false for a
// log it cannot write so byte for byte (a kind that needs escaping, a time
// json.Marshal refuses).
func appendRequests(b []byte, rs []chat.RequestLog) (_ []byte, ok bool) {
	b = append(b, '[')
	for i, r := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"at":"`...)
		var err error
		if b, err = r.At.AppendText(b); err != nil {
			return nil, false
		}
		b = strconv.AppendInt(append(b, `","estimate":`...), int64(r.Estimate), 10)
		b = strconv.AppendInt(append(b, `,"reported":`...), int64(r.Reported), 10)
		b = strconv.AppendInt(append(b, `,"budget":`...), int64(r.Budget), 10)
		b = strconv.AppendInt(append(b, `,"window":`...), int64(r.Window), 10)
		if r.Kind != "" {
			if !plainString(r.Kind) {
				return nil, false
			}
			b = append(append(append(b, `,"kind":"`...), r.Kind...), '"')
		}
		b = append(b, '}')
	}
	return append(b, ']'), true
}

// plainString: s is written as itself between quotes by json.Marshal
// (printable ASCII but for the quote, the backslash and what it escapes
// for HTML).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
