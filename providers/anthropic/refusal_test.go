package anthropic

import (
	"context"
	"testing"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/anthropicfake"
)

// TestRefusalIsFilteredAndItsExplanationShown: stop_reason "refusal" ends
// the answer as a content filter, whatever words came before it (the
// streaming-refusals page's "Hello.."); stop_details.explanation, which
// that page says is for the user, is streamed and kept as the answer's
// last words, set apart from those, and a refusal naming none adds nothing.
func TestRefusalIsFilteredAndItsExplanationShown(t *testing.T) {
	const why = "This request was declined because it could enable cyber harm."
	for name, tc := range map[string]struct {
		reply testkit.Reply
		want  string
	}{
		"explained":           {testkit.Reply{Text: "Hello..", Refusal: why}, "Hello..\n\n" + why},
		"explained, no words": {testkit.Reply{Refusal: why}, why},
		"unexplained":         {testkit.Reply{Text: "Hello..", Finish: "refusal"}, "Hello.."},
	} {
		t.Run(name, func(t *testing.T) {
			srv := fake(t, anthropicfake.Options{Script: testkit.Always(tc.reply)})
			c := newClient(t, srv.URL(), nil)
			var rec testkit.Events
			res, err := c.Stream(context.Background(), providers.Request{Model: model, Messages: testkit.Ask("Something refused?")}, rec.Emit)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			streamed, _ := rec.Joined(providers.EventText)
			if res.FinishReason != providers.FinishFilter || res.Message.Content != tc.want || streamed != tc.want {
				t.Fatalf("finish %q, content %q, streamed %q: want %s and %q", res.FinishReason, res.Message.Content, streamed, providers.FinishFilter, tc.want)
			}
		})
	}
}
