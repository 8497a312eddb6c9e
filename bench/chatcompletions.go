package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"

	"github.com/agentd/agentd/httpapi"
	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit"
)

// ChatCompletionsResult is the replay sent through POST /v1/chat/completions
// by a client that keeps the history and re-sends all of it each turn, as
// Chat Completions clients do: what the client sent against what the
// provider received, both in the fake's count.
type ChatCompletionsResult struct {
	Window int `json:"window"`
	Turns  int `json:"turns"`
	// ClientTokens counts the messages of every request the client sent.
	ClientTokens int64 `json:"client_tokens"`
	// ClientLargest is the client's largest request, in tokens.
	ClientLargest int `json:"client_largest_request"`
	// ProviderTokens is every request the provider received: the turns'
	// and the summariser's and learner's.
	ProviderTokens     int64 `json:"provider_tokens"`
	ProviderTurnTokens int64 `json:"provider_turn_tokens"`
	ProviderLargest    int   `json:"provider_largest_request"`
	ProviderRequests   int   `json:"provider_requests"`
	OverWindow         int   `json:"provider_requests_over_window"`
	// Chats is how many agentd chats the client's one history went to.
	Chats int `json:"chats"`
	// Stored is how many messages agentd stored for it.
	Stored      int     `json:"stored_messages"`
	WallSeconds float64 `json:"wall_seconds"`
}

// ChatCompletions replays the first turns of rp through agentd's Chat
// Completions route with the official Go SDK, on the fake with window.
func ChatCompletions(ctx context.Context, rp *Replay, window, turns int) (*ChatCompletionsResult, error) {
	turns = min(turns, len(rp.Turns))
	fake, d, stop, err := replayDaemon(ctx, rp, window)
	if err != nil {
		return nil, err
	}
	defer stop()
	cfg := d.cfg
	cfg.Limits.RequestsPerSecond = 1e6
	cfg.Limits.MaxHistoryBytes = 1 << 30
	srv := httptest.NewServer(httpapi.New(d.hub, cfg, nil, zerolog.Nop()))
	defer srv.Close()
	sdk := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("bench"), option.WithMaxRetries(0))

	res := &ChatCompletionsResult{Window: window, Turns: turns}
	start := time.Now()
	// No system message: agentd sends its own prompt, which the replay's
	// System is, and the client's would come on top.
	var msgs []openai.ChatCompletionMessageParamUnion
	history := 0
	chats := map[string]bool{}
	for i := range turns {
		msgs = append(msgs, openai.UserMessage(rp.Turns[i].User))
		history += testkit.CountTokens(rp.Turns[i].User)
		res.ClientTokens += int64(history)
		res.ClientLargest = max(res.ClientLargest, history)
		var resp *http.Response
		c, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake/m", Messages: msgs}, option.WithResponseInto(&resp))
		if err != nil {
			return nil, fmt.Errorf("chat completions turn %d: %w", i, err)
		}
		chats[resp.Header.Get(oai.ChatHeader)] = true
		answer := c.Choices[0].Message
		msgs = append(msgs, answer.ToParam())
		history += testkit.CountTokens(answer.Content)
	}
	res.WallSeconds = round3(time.Since(start).Seconds())
	res.Chats = len(chats)
	for id := range chats {
		stored, err := d.hub.Transcript(ctx, tenant, id, 0, 0)
		if err != nil {
			return nil, err
		}
		res.Stored += len(stored)
	}
	for _, r := range fake.Requests() {
		res.ProviderRequests++
		res.ProviderTokens += int64(r.InputTokens)
		res.ProviderLargest = max(res.ProviderLargest, r.InputTokens)
		if r.InputTokens > window {
			res.OverWindow++
		}
		if !IsSummaryRequest(r) && !IsLearnRequest(r) {
			res.ProviderTurnTokens += int64(r.InputTokens)
		}
	}
	return res, nil
}
