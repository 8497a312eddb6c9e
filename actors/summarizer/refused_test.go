package summarizer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/fairshare"
	"github.com/agentd/agentd/providers"
)

// refusedTurns is a chat whose first exchange the provider refused: the
// question, a tool round, and the refused answer; a fine exchange follows.
func refusedTurns() []chat.Message {
	return []chat.Message{
		{Seq: 1, Role: chat.RoleUser, Content: "A forbidden question about Forbidden Place."},
		{Seq: 2, Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "search", Arguments: `{"q":"forbidden"}`}}},
		{Seq: 3, Role: chat.RoleTool, ToolCallID: "c1", ToolName: "search", Content: "forbidden results"},
		{Seq: 4, Role: chat.RoleAssistant, Content: "I can't help with the forbidden thing.", Refused: true},
		{Seq: 5, Role: chat.RoleUser, Content: "A fine question about Lisbon."},
		{Seq: 6, Role: chat.RoleAssistant, Content: "A fine answer."},
	}
}

type failingModel struct{ callModel }

func (f *failingModel) Stream(ctx context.Context, req providers.Request, emit func(providers.Event)) (providers.Response, error) {
	_, _ = f.callModel.Stream(ctx, req, emit)
	return providers.Response{}, errors.New("down")
}

// TestAFoldLeavesOutARefusedExchange: the summariser's request for a fold,
// a condense's, and the digest a failed fold leaves, hold nothing of an
// exchange the provider refused (the chat's own requests leave it out,
// window.Assemble), so no summary hands the refused question back to the
// model; the fine exchange after it is summarised.
func TestAFoldLeavesOutARefusedExchange(t *testing.T) {
	sems := []lane{newLane(fairshare.NewSlots(1, 1), "t")}
	m := &callModel{}
	cfg := Config{Catalog: oneCatalog{model: m, window: 8000}, Log: zerolog.Nop()}
	// The refused exchange first, then last of the folded range: a fold
	// ends before the newest turn, so even last it is followed.
	turns := refusedTurns()
	for _, folded := range [][]chat.Message{turns, append(slices.Clone(turns[4:]), turns[:4]...)} {
		if res := run(context.Background(), cfg, &Fold{ChatID: "c", Model: "p/m", Turns: folded}, []string{"p/m"}, sems); !res.OK {
			t.Fatalf("fold failed: %s", res.Err)
		}
	}
	if con := runCondense(context.Background(), cfg, &Condense{ChatID: "c", Model: "p/m", Turn: refusedTurns()}, []string{"p/m"}, sems); con.OK {
		t.Fatal("the condense model's answer has no REMAINING, yet it was taken")
	}
	if len(m.reqs) == 0 {
		t.Fatal("no request was sent")
	}
	for i, r := range m.reqs {
		text := r.Messages[len(r.Messages)-1].Content
		if strings.Contains(strings.ToLower(text), "forbidden") || !strings.Contains(text, "Lisbon") {
			t.Fatalf("request %d sent %q: want the fine exchange only", i, text)
		}
	}

	f := &failingModel{}
	cfg.Catalog = oneCatalog{model: f, window: 8000}
	res := run(context.Background(), cfg, &Fold{ChatID: "c", Model: "p/m", Turns: refusedTurns()}, []string{"p/m"}, sems)
	if res.OK || strings.Contains(strings.ToLower(res.Digest), "forbidden") || !strings.Contains(res.Digest, "Lisbon") {
		t.Fatalf("failed fold: ok %v, digest %q: want the fine exchange's facts only", res.OK, res.Digest)
	}
}
