package e2e

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// benchLimits lift the per-tenant limits: the benchmarks measure the
// cluster, not the rate limiter.
var benchLimits = map[string]string{"requests_per_second": "1000000", "model_idle_timeout": "30s"}

// zeroBrain is the fake model of the benchmarks: no delay, short answers,
// and a window no chat fills, so a turn costs only agentd and its store.
func zeroBrain() *brain {
	b := newBrain(23)
	b.MaxDelay, b.Words = 0, 20
	return b
}

// BenchmarkClusterTurns measures durable turns a second (a message stored,
// answered and the answer stored) with 1, 2 and 3 nodes in cluster mode on
// one Postgres, 50 chats at once; each message goes to the next node in
// turn, as a round-robin load balancer sends it, so most are forwarded to
// the chat's owner.
//
//	go test -run '^$' -bench BenchmarkClusterTurns -benchtime 3000x ./e2e/
func BenchmarkClusterTurns(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			c := newCluster(b, n, zeroBrain(), 32000, benchLimits)
			logs := c.createChats(b, clusterChats)
			var next, failed atomic.Int64
			var firstErr atomic.Value
			var wg sync.WaitGroup
			b.ResetTimer()
			for i, cl := range logs {
				wg.Go(func() {
					for k := i; next.Add(1) <= int64(b.N); k++ {
						ctx, cancel := withTimeout(sendTimeout)
						res, err := c.clients[k%n].Send(ctx, cl.id, api.SendMessageRequest{Content: fmt.Sprintf("chat %d message %d", i, k)}, nil)
						cancel()
						if err == nil && res.Problem != nil {
							err = fmt.Errorf("problem %s: %s", res.Problem.Kind, res.Problem.Message)
						}
						if err != nil && failed.Add(1) == 1 {
							firstErr.Store(err.Error())
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d of %d turns failed; first: %v", n, b.N, firstErr.Load())
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
		})
	}
}

// BenchmarkClusterFailover measures how long a chat takes to answer again
// after its node is SIGKILLed: three nodes, 50 chats sending without pause
// (drive, which moves to the next node after a failure), one kill per
// iteration (a different node each time, restarted after). For every chat
// whose latest model call ran on the killed node, the time from the kill
// to its next answer; reported as p50 and max over all kills.
//
//	go test -run '^$' -bench BenchmarkClusterFailover -benchtime 6x ./e2e/
func BenchmarkClusterFailover(b *testing.B) {
	c := newCluster(b, clusterNodes, zeroBrain(), 32000, benchLimits)
	logs := c.createChats(b, clusterChats)
	_, halt := driveAll(c.clients, logs)
	defer halt()
	c.waitAllAnswer(b, logs, make([]int64, len(logs)), time.Now().Add(3*time.Minute), "before any kill")

	var times []time.Duration
	b.ResetTimer()
	for k := range b.N {
		victim := k % clusterNodes
		chats := c.on(victim)
		before := answeredNow(logs)
		killed := time.Now()
		c.nodes[victim].kill()
		for waiting := slices.Clone(chats); len(waiting) > 0; time.Sleep(2 * time.Millisecond) {
			if time.Since(killed) > 3*time.Minute {
				b.Fatalf("kill %d: chats %v of node %d did not answer again within 3 minutes", k+1, waiting, victim)
			}
			waiting = slices.DeleteFunc(waiting, func(i int) bool {
				if logs[i].answered.Load() > before[i] {
					times = append(times, time.Since(killed))
					return true
				}
				return false
			})
		}
		b.StopTimer()
		c.nodes[victim].start()
		c.waitAllAnswer(b, logs, answeredNow(logs), time.Now().Add(3*time.Minute), fmt.Sprintf("after node %d restarted", victim))
		b.StartTimer()
	}
	b.StopTimer()
	if len(times) == 0 {
		b.Fatal("no kill hit a chat")
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(times[len(times)-1].Milliseconds()), "max-ms")
	b.ReportMetric(float64(len(times)), "chats-moved")
}
