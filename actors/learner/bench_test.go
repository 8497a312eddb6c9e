package learner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
)

// BenchmarkLearnSend measures what a Learn costs the session that sends it,
// with an instant model and with a slow one (each extraction takes 500ms).
// "send" is the Send call alone; "send+status" adds a Status round trip
// after it, i.e. the time until the learner has taken the Learn off its
// mailbox and answered the next message. If a slow model ever blocked the
// mailbox, send+status would grow to the model's latency.
func BenchmarkLearnSend(b *testing.B) {
	models := map[string]time.Duration{"instant": 0, "slow500ms": 500 * time.Millisecond}
	for _, name := range []string{"instant", "slow500ms"} {
		delay := models[name]
		for _, withStatus := range []bool{false, true} {
			mode := "send"
			if withStatus {
				mode = "send+status"
			}
			b.Run(fmt.Sprintf("%s/model=%s", mode, name), func(b *testing.B) {
				e := newEnv(b, func(c *Config) { c.Observe = nil })
				e.model.setAnswer(func(int, string) (providers.Response, error) {
					time.Sleep(delay)
					return reply(`["The person benchmarks things."]`), nil
				})
				words := []chat.Message{{Seq: 1, Role: chat.RoleUser, Content: "I benchmark things."}}
				i := 0
				for b.Loop() {
					i++
					e.sys.Root.Send(e.pid, &Learn{ChatID: fmt.Sprint("chat-", i), Tenant: "t", Words: words, ThroughSeq: 2, Model: "fake/big"})
					if withStatus {
						if _, err := e.sys.Root.RequestFuture(e.pid, &Status{}, 10*time.Second).Result(); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkExtractFold is the learner's own CPU for the person's words of
// one fold as the overhead bench's chat makes it (125 short questions; the
// model answers at once): masking, cutting into pieces, estimating and
// building each request.
func BenchmarkExtractFold(b *testing.B) {
	var words []chat.Message
	for i := range 125 {
		words = append(words, chat.Message{Seq: int64(2 * i), Role: chat.RoleUser, Origin: chat.OriginPerson,
			Content: fmt.Sprintf("Question %d: how does the export of order %d to the warehouse work, and what happens when it fails twice?", i, 48213+i)})
	}
	model := &fakeModel{answer: func(int, string) (providers.Response, error) { return reply("[]"), nil }}
	cfg := Config{CallTimeout: time.Minute, PieceBytes: 24_000}
	info := providers.ModelInfo{ID: "m", Window: 32768}
	l := &Learn{ChatID: "c", Tenant: "t", Words: words, Factor: 1.1}
	b.ReportAllocs()
	for b.Loop() {
		var out Outcome
		if _, _, err := extractAll(context.Background(), cfg, model, "fake/m", info, l, words, &out); err != nil {
			b.Fatal(err)
		}
	}
}
