package bench

import (
	"context"
	"testing"
)

func TestAgentdReplayStaysUnderEveryWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a daemon through a replay")
	}
	rp := NewReplay(7, 120, "")
	for _, window := range []int{8000, 32000} {
		res, err := ReplayAgentd(context.Background(), rp, window, len(rp.Turns))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("window %d: %+v", window, *res)
		if res.LargestRequest > window {
			t.Errorf("window %d: largest request %d tokens", window, res.LargestRequest)
		}
	}
}

func TestPeerReplayRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	rp := NewReplay(7, 120, "You are a helpful assistant.")
	for _, side := range []string{PeerSummarization, PeerTrim} {
		res, err := ReplayPeer(context.Background(), "peer", side, rp, 8000, len(rp.Turns))
		if err != nil {
			t.Fatal(err)
		}
		res.Sawtooth = res.Sawtooth[:10]
		t.Logf("%s: %+v", side, *res)
	}
}
