package session

import "testing"

// TestATurnSavesOnlyTheRequestsItLogged: each turn's save hands the store
// the whole log, with the requests saved before marked so, so it writes
// the turn's own requests (one, or one a tool round) and no other.
func TestATurnSavesOnlyTheRequestsItLogged(t *testing.T) {
	h := newHarness(t, 32000, echoTools(t), reply("hello"), callTool("c1", "echo", `{"text":"x"}`), reply("done"), reply("again"))
	prev := int64(0)
	for i, tc := range []struct {
		text string
		logs int64
	}{{"hi", 1}, {"use echo", 2}, {"once more", 1}} {
		if res, _ := h.turn(tc.text); res.Problem != nil {
			t.Fatalf("turn %d: %+v", i, res.Problem)
		}
		h.store.mu.Lock()
		snap := h.store.snaps["c1"]
		h.store.mu.Unlock()
		if snap.RequestsLogged != prev+tc.logs || snap.RequestsSaved != prev || int64(len(snap.Requests)) != snap.RequestsLogged {
			t.Fatalf("turn %d saved %d requests, logged %d, marked saved up to %d; want %d logged, saved up to %d",
				i, len(snap.Requests), snap.RequestsLogged, snap.RequestsSaved, prev+tc.logs, prev)
		}
		if k := snap.Requests[len(snap.Requests)-1].Kind; k != "turn" {
			t.Fatalf("turn %d: the newest request is a %q", i, k)
		}
		prev = snap.RequestsLogged
	}
}
