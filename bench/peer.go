package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/agentd/agentd/testkit/openaifake"
)

// Peer modes of bench/peer/run.mjs.
const (
	PeerSummarization = "langchain-summarization"
	PeerTrim          = "langchain-trim"
)

// peerOutput is what run.mjs writes.
type peerOutput struct {
	Mode         string          `json:"mode"`
	Settings     json.RawMessage `json:"settings"`
	RefusedTurns int             `json:"refused_turns"`
	Errors       map[string]int  `json:"errors"`
	TurnMS       []float64       `json:"turn_ms"`
	OverheadMS   []float64       `json:"overhead_ms"`
	WallSeconds  float64         `json:"wall_seconds"`
	Versions     map[string]any  `json:"versions"`
}

// ReplayPeer replays the first turns of rp through bench/peer/run.mjs (in
// peerDir, installed with npm ci) against a fresh fake with the given
// window. side is PeerSummarization or PeerTrim.
func ReplayPeer(ctx context.Context, peerDir, side string, rp *Replay, window, turns int) (*SideResult, error) {
	turns = min(turns, len(rp.Turns))
	mode := map[string]string{PeerSummarization: "summarization", PeerTrim: "trim"}[side]
	if mode == "" {
		return nil, fmt.Errorf("peer side %q: use %s or %s", side, PeerSummarization, PeerTrim)
	}
	if err := ensurePeer(ctx, peerDir); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "agentd-bench-peer-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	replayFile, outFile := filepath.Join(tmp, "replay.json"), filepath.Join(tmp, "out.json")
	b, err := json.Marshal(rp)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(replayFile, b, 0o600); err != nil {
		return nil, err
	}
	fake := openaifake.New(openaifake.Options{Window: window, Script: Script(rp)})
	defer fake.Close()
	cmd := exec.CommandContext(ctx, "node", "run.mjs", "--base-url", fake.URL(), "--window", fmt.Sprint(window),
		"--replay", replayFile, "--mode", mode, "--turns", fmt.Sprint(turns), "--out", outFile)
	cmd.Dir = peerDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("node run.mjs --mode %s --window %d: %w\n%s", mode, window, err, tail(out, 2000))
	}
	raw, err := os.ReadFile(outFile)
	if err != nil {
		return nil, fmt.Errorf("peer output: %w", err)
	}
	var po peerOutput
	if err := json.Unmarshal(raw, &po); err != nil {
		return nil, fmt.Errorf("peer output: %w", err)
	}
	res := &SideResult{Side: side, Window: window, Turns: turns, RefusedTurns: po.RefusedTurns, Problems: po.Errors,
		TurnMS: quantiles(po.TurnMS), OverheadMS: quantiles(po.OverheadMS), WallSeconds: round3(po.WallSeconds)}
	set, _ := json.Marshal(map[string]any{"settings": po.Settings, "versions": po.Versions})
	res.Note = string(set)
	analyse(res, fake.Requests(), rp, turns)
	res.Folds = res.SummaryRequests // one summarising call per summarisation
	return res, nil
}

// ensurePeer installs the peer's pinned packages (npm ci) when they are not
// there yet, so a fresh clone runs the peer with nothing done by hand.
func ensurePeer(ctx context.Context, peerDir string) error {
	if _, err := os.Stat(filepath.Join(peerDir, "node_modules", "langchain", "package.json")); err == nil {
		return nil
	}
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = peerDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("install the peer (npm ci in %s): %w\n%s", peerDir, err, tail(out, 2000))
	}
	return nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
