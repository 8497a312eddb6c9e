package bench

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/agentd/agentd/configs"
)

// ReplayReal replays the first turns of rp through agentd against a real
// provider model ref ("provider/model") configured in configPath, so anyone
// with a model can score fidelity with a real summariser. Tokens are what
// the provider reported; fidelity is counted in what the chat carries at
// the end (summary, digest and the kept turns), since a real provider's
// requests are not visible here.
func ReplayReal(ctx context.Context, configPath, ref string, rp *Replay, turns int) (*SideResult, error) {
	if configPath == "" {
		return nil, fmt.Errorf("--real needs --config FILE naming the provider")
	}
	cfg, err := configs.Load(configPath)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "agentd-bench-real-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d, err := startDaemon(ctx, daemonOptions{dir: dir, cfg: &cfg, results: toolResults(rp)})
	if err != nil {
		return nil, err
	}
	defer d.close()
	d.hub.Refresh(ctx)
	chatID, err := d.newChat(ctx, ref)
	if err != nil {
		return nil, err
	}
	turns = min(turns, len(rp.Turns))
	res := &SideResult{Side: "agentd/" + ref, Turns: turns, Problems: map[string]int{}}
	err = d.replayTurns(ctx, chatID, rp, turns, res, func(i int, out turnOutcome) {
		res.TurnInputTokens += out.result.Usage.InputTokens
		res.SummaryInputTokens += out.result.SummaryUsage.InputTokens
		res.Sawtooth = append(res.Sawtooth, [2]int{i, out.result.Usage.InputTokens})
		res.LargestRequest = max(res.LargestRequest, out.result.Usage.InputTokens)
	})
	if err != nil {
		return nil, fmt.Errorf("real: %w", err)
	}
	res.TotalInputTokens = res.TurnInputTokens + res.SummaryInputTokens
	view, err := d.hub.Context(ctx, tenant, chatID)
	if err != nil {
		return nil, err
	}
	res.Window = view.Window
	kept, err := d.hub.Transcript(ctx, tenant, chatID, view.FirstKeptSeq, 0)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(view.Summary + "\n" + view.Digest + "\n")
	for _, m := range kept {
		b.WriteString(m.Content + "\n")
	}
	res.Fidelity = carriedIn(rp, turns, b.String())
	if err := searchFidelity(ctx, d, chatID, rp, turns, &res.Fidelity); err != nil {
		res.Error = err.Error()
	}
	return res, nil
}
