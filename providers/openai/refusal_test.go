package openai

import (
	"context"
	"testing"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/openaifake"
)

// TestRefusalIsReadAndFiltered: OpenAI's refusal, streamed as
// delta.refusal and finished with "stop", is the answer's text (streamed
// as it comes) and finishes as a content filter, not a plain stop; a
// content_filter finish stays one.
func TestRefusalIsReadAndFiltered(t *testing.T) {
	const refusal = "I'm sorry, I cannot help with that."
	for name, reply := range map[string]testkit.Reply{
		"refusal":        {Refusal: refusal, ChunkRunes: 5},
		"content_filter": {Text: refusal, Finish: "content_filter"},
	} {
		t.Run(name, func(t *testing.T) {
			fake := openaifake.New(openaifake.Options{Script: func(testkit.Received) testkit.Reply { return reply }})
			defer fake.Close()
			r := run(t, newClient(t, "openai", fake.URL()), context.Background(), userReq("something refused"))
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.text != refusal || r.resp.Message.Content != refusal || r.resp.FinishReason != providers.FinishFilter {
				t.Fatalf("text events %q, message %q, finish %q: want the refusal's text and %s",
					r.text, r.resp.Message.Content, r.resp.FinishReason, providers.FinishFilter)
			}
		})
	}
}
