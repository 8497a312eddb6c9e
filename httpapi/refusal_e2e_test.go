package httpapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
)

// TestRefusedAnswerIsMarkedAndLeftOut: an answer the provider refused
// (OpenAI's refusal text, Anthropic's stop_reason "refusal" after some
// words, as its streaming-refusals page shows) ends its turn marked
// refused, in turn.completed and in the transcript, which keeps the
// question and the words; the next turn's request leaves the refused
// exchange out, as Anthropic asks, and its answer is no refusal.
func TestRefusedAnswerIsMarkedAndLeftOut(t *testing.T) {
	refusals := map[string]testkit.Reply{
		"openai":    {Refusal: "I'm sorry, I can't help with that."},
		"anthropic": {Text: "Hello..", Finish: "refusal"},
	}
	for kind, refusal := range refusals {
		t.Run(kind, func(t *testing.T) {
			fake := startFake(t, kind, fakeOptions{Script: func(r testkit.Received) testkit.Reply {
				if rep, ok := sideReply(r); ok {
					return rep
				}
				if strings.Contains(r.Messages[len(r.Messages)-1].Content, "forbidden") {
					return refusal
				}
				return testkit.Reply{Text: "A fine answer."}
			}, Models: []fakeModel{{ID: "m", Window: 32000}}})
			d := daemontest.Start(t, kindConfig(t, kind, fake.URL(), 32000), nil)
			ctx := context.Background()
			c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var completed []api.Event
			res, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "A forbidden question."}, func(ev api.Event) {
				if ev.Type == "turn.completed" {
					completed = append(completed, ev)
				}
			})
			if err != nil || !res.Refused || res.Problem != nil || len(completed) != 1 || !strings.Contains(string(completed[0].Data), `"refused":true`) {
				t.Fatalf("refused turn: %v, %+v, turn.completed %+v: want it marked refused", err, res, completed)
			}
			res, err = d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "A fine question."}, nil)
			if err != nil || res.Refused {
				t.Fatalf("next turn: %v, %+v", err, res)
			}
			turns := turnRequests(fake.Requests())
			for _, m := range turns[len(turns)-1].Messages {
				if strings.Contains(m.Content, "forbidden") {
					t.Fatalf("the next request sent the refused exchange again: %+v", turns[len(turns)-1].Messages)
				}
			}
			stored, err := d.Client.Transcript(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(stored) != 4 || stored[0].Content != "A forbidden question." || !stored[1].Refused || stored[1].Content == "" || stored[3].Refused {
				t.Fatalf("transcript %+v: want the question, its refused answer with its words, the next question and its answer", stored)
			}
		})
	}
}

// TestARefusedExchangeIsNeitherSummarisedNorLearnt: a fold over an
// exchange the provider refused sends none of it to the summariser or the
// learner (the chat's own requests leave it out, so a summary or a memory
// of it would hand the refused question back to the model); the person's
// words around it are summarised and learnt from.
func TestARefusedExchangeIsNeitherSummarisedNorLearnt(t *testing.T) {
	fake := startFake(t, "openai", fakeOptions{Script: func(r testkit.Received) testkit.Reply {
		if rep, ok := sideReply(r); ok {
			return rep
		}
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "forbidden") {
			return testkit.Reply{Refusal: "I'm sorry, I can't help with that."}
		}
		return testkit.Reply{Text: "A fine answer."}
	}, Models: []fakeModel{{ID: "m", Window: 32000}}})
	d := daemontest.Start(t, kindConfig(t, "openai", fake.URL(), 32000), nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"I am left-handed.", "A forbidden question.", "I live in Oslo.", "The newest question."} {
		if _, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: text}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Folds all but the newest turn, the refused exchange among them.
	var folded chat.Compacted
	if err := d.Client.Post(ctx, "/v1/chats/"+c.ID+"/compact", map[string]string{}, &folded); err != nil {
		t.Fatalf("compact: %v", err)
	}
	of := func(kind string) []testkit.Received {
		var out []testkit.Received
		for _, r := range fake.Requests() {
			if requestKind(r) == kind {
				out = append(out, r)
			}
		}
		return out
	}
	waitFor(t, "a learning request", func() bool { return len(of(kindLearner)) > 0 })
	for _, kind := range []string{kindSummary, kindLearner} {
		rs := of(kind)
		if len(rs) == 0 {
			t.Fatalf("no %s request", kind)
		}
		for _, r := range rs {
			for _, m := range r.Messages {
				if strings.Contains(m.Content, "forbidden") || strings.Contains(m.Content, "I'm sorry") || !strings.Contains(m.Content, "Oslo") {
					t.Fatalf("%s request sent %q: want the words around the refused exchange, not it", kind, m.Content)
				}
			}
		}
	}
}
