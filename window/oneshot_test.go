package window

import "testing"

// TestInputRoomFits: whatever the window, answer and factor, a request of
// InputRoom raw tokens, corrected, plus its answer fits the window.
func TestInputRoomFits(t *testing.T) {
	for _, w := range []int{1024, 2048, 4096, 8192, 32768, 200_000} {
		for _, want := range []int{256, 1024, 4096} {
			for _, f := range []float64{0, 1, 1.3, 2.5, MaxFactor} {
				c := Calibration{Factor: f}
				ans := OneShotAnswer(w, want)
				room := InputRoom(w, ans, c)
				if room <= 0 {
					t.Errorf("window %d answer %d factor %v: no room", w, ans, f)
					continue
				}
				if got := OneShotEstimate(room, c) + ans; got > w {
					t.Errorf("window %d answer %d factor %v: room %d estimates at %d", w, ans, f, room, got)
				}
				if ans > w/4 && ans > 64 {
					t.Errorf("answer %d over a quarter of %d", ans, w)
				}
			}
		}
	}
	if InputRoom(100, 200, Calibration{}) != 0 {
		t.Error("an answer over the window leaves room")
	}
}
