package bench

import (
	"context"
	"os/exec"
	"testing"
)

func TestAgentdReplayStaysUnderEveryWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a daemon through a replay")
	}
	rp := NewReplay(7, 120, "")
	for _, window := range []int{8000, 32000} {
		res, err := ReplayAgentd(context.Background(), rp, window, len(rp.Turns), Profiles{})
		if err != nil {
			t.Fatal(err)
		}
		if res.LargestRequest > window || res.OverWindow > 0 || res.RefusedTurns > 0 {
			t.Errorf("window %d: largest request %d tokens, %d over the window, %d turns refused", window, res.LargestRequest, res.OverWindow, res.RefusedTurns)
		}
		if res.Folds == 0 || res.SummaryRequests == 0 {
			t.Errorf("window %d: 120 turns folded %d times with %d summarising requests", window, res.Folds, res.SummaryRequests)
		}
	}
}

func TestPeerReplayRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	rp := NewReplay(7, 120, "You are a helpful assistant.")
	for _, side := range []string{PeerSummarization, PeerTrim} {
		res, err := ReplayPeer(context.Background(), "peer", side, rp, 8000, len(rp.Turns))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Sawtooth) < len(rp.Turns) || res.TotalInputTokens == 0 {
			t.Fatalf("%s: %d turn requests, %d tokens", side, len(res.Sawtooth), res.TotalInputTokens)
		}
		if side == PeerSummarization && res.SummaryRequests == 0 {
			t.Errorf("the summarization peer never summarised on 8K in 120 turns")
		}
	}
}

func TestChatCompletionsReplayIsOneChatUnderTheWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a daemon through a replay")
	}
	rp := NewReplay(7, 60, "")
	res, err := ChatCompletions(context.Background(), rp, 8000, len(rp.Turns))
	if err != nil {
		t.Fatal(err)
	}
	if res.Chats != 1 || res.OverWindow > 0 || res.ProviderLargest > res.Window {
		t.Fatalf("%d chats, %d requests over the window, largest %d", res.Chats, res.OverWindow, res.ProviderLargest)
	}
	// Past the window the client's requests outgrow what agentd sends.
	if res.ClientLargest <= res.Window || res.ProviderTurnTokens >= res.ClientTokens {
		t.Fatalf("client largest %d, client total %d, provider turns %d", res.ClientLargest, res.ClientTokens, res.ProviderTurnTokens)
	}
}
