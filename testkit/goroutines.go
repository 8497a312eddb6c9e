package testkit

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// NoGoroutineLeft fails t unless every goroutine but those opts ignore is
// gone within a generous deadline. goleak's own retries give up after less
// than half a second, which a loaded machine outlasts while the goroutines
// of just-closed connections and just-stopped workers return.
func NoGoroutineLeft(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); goleak.Find(opts...) != nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	goleak.VerifyNone(t, opts...)
}
