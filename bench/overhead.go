package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
)

// OverheadResult is agentd's per-turn overhead on a chat with many stored
// messages, against a zero-latency fake.
type OverheadResult struct {
	StoredMessages int `json:"stored_messages"`
	Window         int `json:"window"`
	Turns          int `json:"turns"`
	// FirstTurnMS is the turn that wakes the chat and folds the backlog.
	FirstTurnMS float64 `json:"first_turn_ms"`
	// TurnMS is POST-to-turn.completed, in process (hub.Submit to the
	// event); OverheadMS is that less the time inside model calls (request
	// sent to last byte read), i.e. all agentd does besides waiting.
	TurnMS     Quantiles `json:"turn_ms"`
	OverheadMS Quantiles `json:"overhead_ms"`
}

// Overhead stores stored messages in a chat (half the person's, half the
// answers), then measures turns on it.
func Overhead(ctx context.Context, stored, turns, window int) (*OverheadResult, error) {
	fake := openaifake.New(openaifake.Options{Window: window, Script: func(r testkit.Received) testkit.Reply {
		return testkit.Reply{Text: "Noted; here is a short answer to that.", ChunkRunes: 64}
	}})
	defer fake.Close()
	dir, err := os.MkdirTemp("", "agentd-bench-overhead-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d, err := startDaemon(ctx, daemonOptions{dir: dir, fakeURL: fake.URL(), window: window})
	if err != nil {
		return nil, err
	}
	defer d.close()
	id, err := d.newChat(ctx, "")
	if err != nil {
		return nil, err
	}
	rp := NewReplay(11, stored/2, "")
	batch := make([]chat.Message, 0, 1000)
	now := time.Now().UTC()
	for i := 0; i < stored; i += 2 {
		t := rp.Turns[(i/2)%len(rp.Turns)]
		batch = append(batch, chat.Message{Role: chat.RoleUser, Content: t.User, CreatedAt: now},
			chat.Message{Role: chat.RoleAssistant, Content: t.Answer, CreatedAt: now})
		if len(batch) >= 1000 || i+2 >= stored {
			if _, err := d.hub.Store().Append(ctx, id, batch...); err != nil {
				return nil, fmt.Errorf("store backlog: %w", err)
			}
			batch = batch[:0]
		}
	}
	drv := d.drive(id)
	defer drv.close()
	res := &OverheadResult{StoredMessages: stored, Window: window, Turns: turns}
	var wall, over []float64
	for i := range turns + 1 {
		before := d.model.total()
		out, err := drv.send(ctx, fmt.Sprintf("Question %d: %s", i, strings.Repeat("how does this part work? ", 4)))
		if err != nil {
			return nil, fmt.Errorf("overhead turn %d: %w", i, err)
		}
		if p := out.result.Problem; p != nil {
			return nil, fmt.Errorf("overhead turn %d: %s: %s", i, p.Kind, p.Message)
		}
		if i == 0 {
			res.FirstTurnMS = round3(msOf(out.wall))
			continue
		}
		wall = append(wall, msOf(out.wall))
		over = append(over, msOf(out.wall-(d.model.total()-before)))
	}
	res.TurnMS, res.OverheadMS = quantiles(wall), quantiles(over)
	return res, nil
}
