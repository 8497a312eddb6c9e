package oai_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/testkit/anthropicfake"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// turnModels is the model each turn request the fake received asked for.
func turnModels(fake *openaifake.Server) []string {
	var out []string
	for _, r := range fake.Requests() {
		if isTurn(r) {
			out = append(out, r.Model)
		}
	}
	return out
}

// TestResponsesFunctionCallOutputsTakeTheirModel: function_call_output
// items that name another model resume the paused turn on it, as each
// response of OpenAI's names its own model: the turn's next request goes
// to it, the chat keeps it and the response says it. A model no provider
// serves is 404 model_not_found, storing nothing (docs/openai.md).
func TestResponsesFunctionCallOutputsTakeTheirModel(t *testing.T) {
	script, _ := weatherEfforts()
	d, fake, sdk := start(t, 32000, script)
	first, chatID, before := pausedOnWeather(t, d, sdk, "")
	resume := func(model string) (*responses.Response, error) { return resumeWeather(sdk, first, model, "") }
	var e *openai.Error
	if _, err := resume("nowhere/x"); !errors.As(err, &e) || e.StatusCode != http.StatusNotFound || e.Code != "model_not_found" {
		t.Fatalf("outputs naming a model no provider serves: %v, want 404 model_not_found", err)
	}
	if n := chatOf(t, d, "a", chatID).Messages; n != before {
		t.Fatalf("the refused outputs left the chat with %d messages, it held %d", n, before)
	}
	second, err := resume("fake/n")
	if err != nil {
		t.Fatal(err)
	}
	if second.OutputText() != "It is sunny." || second.Model != "fake/n" {
		t.Fatalf("the resumed response says %q on model %q, want it on fake/n", second.OutputText(), second.Model)
	}
	if got, want := turnModels(fake), []string{"m", "n"}; !slices.Equal(got, want) {
		t.Fatalf("the turn's requests went to models %q, want %q", got, want)
	}
	if m := chatOf(t, d, "a", chatID).Model; m != "fake/n" {
		t.Fatalf("the chat's model is %q after the resumed turn, want fake/n", m)
	}
}

// TestChatCompletionsToolResultsTakeTheirModel: tool messages that name
// another model resume the paused turn on it: the turn's next request
// goes to it, and the chat keeps it.
func TestChatCompletionsToolResultsTakeTheirModel(t *testing.T) {
	script, _ := weatherEfforts()
	d, fake, _ := start(t, 32000, script)
	ask := userMsg("The weather in Oslo?")
	r := postCC(t, d, "tok-a", "", []any{ask})
	if r.status != http.StatusOK || len(r.body.Choices) != 1 || r.body.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("no paused answer: %d %+v", r.status, r.body)
	}
	chatID := r.chatID
	history := []any{ask, callsMsg("call_w", `{"city":"Oslo"}`), toolMsg("call_w", "sunny")}
	r = postCCWith(t, d, "tok-a", chatID, history, map[string]any{"model": "fake/n"})
	if r.status != http.StatusOK || r.chatID != chatID || r.body.Choices[0].Message.Content != "It is sunny." {
		t.Fatalf("the resumed answer: %d chat %q (paused %q) %+v", r.status, r.chatID, chatID, r.body)
	}
	if got, want := turnModels(fake), []string{"m", "n"}; !slices.Equal(got, want) {
		t.Fatalf("the turn's requests went to models %q, want %q", got, want)
	}
	if m := chatOf(t, d, "a", chatID).Model; m != "fake/n" {
		t.Fatalf("the chat's model is %q after the resumed turn, want fake/n", m)
	}
}

// TestFunctionCallOutputsRefuseAModelThatCannotKeepTheTurnsSettings: the
// resumed turn keeps its settings, so outputs naming a model whose
// protocol does not take them (an OpenAI-style effort, minimal, on an
// Anthropic model) are a 400 on model naming both models, changing
// nothing: the chat keeps its model and the turn its outputs to come.
func TestFunctionCallOutputsRefuseAModelThatCannotKeepTheTurnsSettings(t *testing.T) {
	script, _ := weatherEfforts()
	oa := openaifake.New(openaifake.Options{Script: script})
	t.Cleanup(oa.Close)
	an := anthropicfake.New(anthropicfake.Options{Script: script,
		Models: []anthropicfake.ModelEntry{{ID: "m", DisplayName: "m", MaxInputTokens: 32000, MaxTokens: 64_000}}})
	t.Cleanup(an.Close)
	cfg, err := daemontest.ConfigFor("openai", t.TempDir(), oa.URL(), 32000)
	if err != nil {
		t.Fatal(err)
	}
	other, err := daemontest.ConfigFor("anthropic", t.TempDir(), an.URL(), 32000)
	if err != nil {
		t.Fatal(err)
	}
	p := other.Providers[0]
	p.Name = "claude"
	cfg.Providers = append(cfg.Providers, p)
	d := daemontest.Start(t, cfg, map[string]string{"tok-a": "a"})
	first, chatID, before := pausedOnWeather(t, d, sdkFor(d, "tok-a"), "minimal")
	_, err = resumeWeather(sdkFor(d, "tok-a"), first, "claude/m", "")
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest || e.Param != "model" ||
		!strings.Contains(e.Message, "claude/m") || !strings.Contains(e.Message, "fake/m") {
		t.Fatalf("outputs naming a model that cannot keep the turn's effort: %v, want a 400 on model naming both models", err)
	}
	if n, m := chatOf(t, d, "a", chatID).Messages, chatOf(t, d, "a", chatID).Model; n != before || m != "fake/m" {
		t.Fatalf("the refused outputs left the chat with %d messages (it held %d) on model %q", n, before, m)
	}
	if len(an.Requests()) != 0 {
		t.Fatalf("the Anthropic model was asked %d times", len(an.Requests()))
	}
}
