package learner

import (
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
