package session

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
)

// refusingModel refuses every call, as a provider with a revoked key does.
type refusingModel struct{}

func (refusingModel) Stream(context.Context, providers.Request, func(providers.Event)) (providers.Response, error) {
	return providers.Response{}, &providers.Error{Provider: "fake", Status: 401, Body: "invalid api key"}
}

func (refusingModel) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

// TestAFailedTurnIsLoggedAtTheDefaultLevelSayingWhy: a turn that ends with
// a problem of the provider's leaves a warn line, with its chat, problem and
// the provider's error, in the log at log_level info (the default): the
// operator of many tenants saw nothing of a provider refusing every turn.
func TestAFailedTurnIsLoggedAtTheDefaultLevelSayingWhy(t *testing.T) {
	var logs testkit.LogBuffer
	h := newHarnessWith(t, 128_000, nil, func(_ *harness, d *Deps) {
		d.Catalog = oneModel{client: refusingModel{}, info: providers.ModelInfo{Provider: "fake", ID: "m", Window: 128_000}}
		d.Log = zerolog.New(&logs).Level(zerolog.InfoLevel)
	})
	res, _ := h.turn("hello")
	if res.Problem == nil || res.Problem.Kind != chat.ProblemProvider {
		t.Fatalf("the turn ended with %+v; want problem %q", res.Problem, chat.ProblemProvider)
	}
	var line string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, `"message":"turn ended"`) {
			line = l
		}
	}
	for _, want := range []string{`"level":"warn"`, `"problem":"provider"`, "invalid api key", `"chat_id":"c1"`, `"turn_id":"t-hello"`} {
		if !strings.Contains(line, want) {
			t.Fatalf("the failed turn's log line %q lacks %s; log:\n%s", line, want, logs.String())
		}
	}
}
