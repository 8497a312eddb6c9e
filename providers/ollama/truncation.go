package ollama

import (
	"fmt"
	"net/http"

	"github.com/agentd/agentd/providers"
)

// Ollama fits an over-long prompt by dropping the oldest messages (and then
// the front of the tokens) and answers 200 as if nothing happened
// (server/prompt.go chatPrompt, runner "truncating input prompt"). Only its
// usage figures give it away.
//
// A low prompt_eval_count alone proves nothing: Ollama counts only the
// tokens it had to evaluate, and a prompt whose start is still in the KV
// cache reports few. But a prompt larger than num_ctx cannot be held, cached
// or not, so it must have been cut. Hence two conditions, both needed:
//
//  1. agentd's estimate exceeds num_ctx by more than estimateSlack (the
//     estimator is a guess; a prompt estimated a little over may fit), and
//  2. the reported count is clearly below the estimate (under
//     reportedShare of it). A server that really read it all, because it
//     ignored num_ctx or the estimate was far off, reports about the
//     estimate and is believed.
//
// And one that needs no estimate: a count of exactly num_ctx. Ollama keeps
// num_ctx tokens of a prompt it cuts (0.17.4: "truncating input prompt
// limit=2048 prompt=3009 … new=2048", prompt_eval_count 2048), while a
// prompt that fits leaves room for the answer. This catches a cut that an
// estimate too low never suspected.
const (
	estimateSlackPct = 10 // % over num_ctx before the estimate is trusted
	reportedSharePct = 90 // % of the estimate a full read reports at least
)

// overAndUnread is the two conditions above.
func overAndUnread(estimated, numCtx, reported int) bool {
	return estimated > 0 && estimated*100 > numCtx*(100+estimateSlackPct) && reported*100 < estimated*reportedSharePct
}

// silentTruncation returns the refusal for a prompt Ollama cut silently, or
// nil. estimated is agentd's estimate of the input (0: unknown), numCtx the
// window asked for, reported the prompt_eval_count Ollama gave.
func silentTruncation(provider string, estimated, numCtx, reported int) *providers.Error {
	if numCtx <= 0 || !(reported == numCtx || overAndUnread(estimated, numCtx, reported)) {
		return nil
	}
	return &providers.Error{
		Provider:  provider,
		Status:    http.StatusOK,
		TooLong:   true,
		Window:    numCtx,
		Requested: estimated,
		Body: fmt.Sprintf("silent truncation: about %d input tokens sent with num_ctx %d, but the server read %d",
			estimated, numCtx, reported),
	}
}
