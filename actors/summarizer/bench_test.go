package summarizer

import (
	"context"
	"fmt"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/fairshare"
	"github.com/agentd/agentd/providers"
)

// instantModel answers every request at once with the same short summary.
type instantModel struct{}

func (instantModel) Stream(context.Context, providers.Request, func(providers.Event)) (providers.Response, error) {
	return providers.Response{Message: chat.Message{Role: chat.RoleAssistant, Content: "What the person wants: bees."}}, nil
}

func (instantModel) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

// foldTurns is a fold as the overhead bench's chat makes one: n messages,
// the person's short questions and the assistant's longer answers.
func foldTurns(n int) []chat.Message {
	out := make([]chat.Message, 0, n)
	for i := range n / 2 {
		out = append(out,
			chat.Message{Seq: int64(2 * i), Role: chat.RoleUser, Origin: chat.OriginPerson,
				Content: fmt.Sprintf("Question %d: how does the export of order %d to the warehouse work, and what happens when it fails twice?", i, 48213+i)},
			chat.Message{Seq: int64(2*i + 1), Role: chat.RoleAssistant,
				Content: fmt.Sprintf("The exporter reads order %d, writes its lines to warehouse_v2.csv and retries a failed upload after 30 seconds; "+
					"after the second failure it marks the order STALLED and tells ops@example.com. See internal/export/upload.go, line %d.", 48213+i, 100+i)})
	}
	return out
}

// BenchmarkFoldAsLines is the summariser's own CPU for one fold asked as
// lines (the model answers at once): masking, cutting into pieces,
// estimating each request and building it.
func BenchmarkFoldAsLines(b *testing.B) {
	cfg := Config{Catalog: oneCatalog{model: instantModel{}, window: 32768}, Log: zerolog.Nop()}
	sems := []lane{newLane(fairshare.NewSlots(1, 1), "t")}
	m := &Fold{ChatID: "c", Model: "p/m", Summary: "What the person wants: bees.", Turns: foldTurns(250), Factor: 1.1}
	b.ReportAllocs()
	for b.Loop() {
		if res := run(context.Background(), cfg, m, []string{"p/m"}, sems); !res.OK {
			b.Fatal(res.Err)
		}
	}
}
