package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Ask sends msg to pid and waits for its answer, at most timeout, and no
// longer than ctx: once ctx ends it returns ctx's cause at once, and an
// answer that comes later goes to dead letters. A future's Result alone
// waits out its timeout, however long ago its asker stopped caring.
func Ask(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, timeout time.Duration) (any, error) {
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	f := root.RequestFuture(pid, msg, timeout)
	// Stopping a future completes it with neither an answer nor an error.
	stop := context.AfterFunc(ctx, func() { root.Stop(f.PID()) })
	defer stop()
	res, err := f.Result()
	if cause := context.Cause(ctx); cause != nil {
		// Ended by ctx, or answered as it ended: protoactor writes an
		// answer that races the stop without its lock, so what Result
		// returned then is not used.
		return nil, cause
	}
	return res, err
}
