package hub

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/agentd/agentd/chat"
)

// ErrRateLimited: a tenant sent more bytes than its rate allows
// (limits.ingest_bytes_per_second); errors.As finds *RateLimitedError,
// which says how long to wait.
var ErrRateLimited = errors.New("rate limited")

// RateLimitedError is ErrRateLimited with the wait before the bytes fit.
type RateLimitedError struct {
	Wait time.Duration
	msg  string
}

func (e *RateLimitedError) Error() string        { return e.msg }
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// Seconds is the wait in whole seconds, at least one (HTTP's Retry-After).
func (e *RateLimitedError) Seconds() int { return max(1, int(math.Ceil(e.Wait.Seconds()))) }

// ingestBurstSeconds is how many seconds of its rate a tenant may send at
// once: a long paste, a Chat Completions history seen for the first time.
const ingestBurstSeconds = 8

// ingestLimits bounds the bytes of text each tenant adds to its chats a
// second: what a turn reads, masks, estimates, plans and folds grows with
// them, on the cores every tenant shares, so a tenant pasting the largest
// messages as fast as it may would otherwise take the cores from the others
// (BENCHMARKS.md, "A tenant's share of the cores"). A request bigger than
// the burst needs the whole burst.
type ingestLimits struct {
	perSecond int64 // ≤ 0: no limit
	mu        sync.Mutex
	tenants   map[string]*rate.Limiter
}

func newIngestLimits(perSecond int64) *ingestLimits {
	return &ingestLimits{perSecond: perSecond, tenants: map[string]*rate.Limiter{}}
}

// take charges n bytes to tenant, or refuses them with *RateLimitedError
// and charges nothing.
func (l *ingestLimits) take(tenant string, n int) error {
	if l.perSecond <= 0 || n <= 0 {
		return nil
	}
	burst := int(min(l.perSecond*ingestBurstSeconds, math.MaxInt32))
	l.mu.Lock()
	lim, ok := l.tenants[tenant]
	if !ok {
		lim = rate.NewLimiter(rate.Limit(l.perSecond), burst)
		l.tenants[tenant] = lim
	}
	l.mu.Unlock()
	res := lim.ReserveN(time.Now(), min(n, burst))
	wait := res.Delay()
	if wait == 0 {
		return nil
	}
	res.Cancel()
	return &RateLimitedError{Wait: wait, msg: fmt.Sprintf("this tenant sent more than %d bytes a second of messages (limits.ingest_bytes_per_second, %d at once); these %d fit in %s",
		l.perSecond, burst, n, wait.Round(time.Millisecond))}
}

// messageBytes is what msgs add to a chat's text: contents, thinking, tool
// calls' names and arguments.
func messageBytes(msgs ...chat.Message) int {
	n := 0
	for i := range msgs {
		n += len(msgs[i].Content) + len(msgs[i].Thinking)
		for _, c := range msgs[i].ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	return n
}
