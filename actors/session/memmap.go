package session

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
)

// withMap runs then once the tenant's memory map of the day is built: at
// once when it is (nearly always), else after the build, which reads every
// memory of the tenant and so runs on a worker while the mailbox's user
// messages wait (await). A mailbox never waits on a build, nor on the lock
// a build holds: the tenant's other sessions await the same build on their
// own workers, and no other tenant's session waits at all. A failed build
// is logged and then runs with the map as last built.
func (s *session) withMap(ctx actor.Context, then func(actor.Context)) {
	maps, tenant := s.deps.Maps, s.meta.Tenant
	if maps == nil || s.stopping || s.loadErr != nil || maps.MapReady(tenant) {
		then(ctx)
		return
	}
	await(s, ctx, onWorker(s, func() mapBuilt {
		_, err := maps.MapErr(context.Background(), tenant)
		return mapBuilt{err: err}
	}), func(ctx actor.Context, b mapBuilt) {
		if b.err != nil {
			s.logger().Warn().Err(b.err).Msg("build the memory map")
		}
		then(ctx)
	})
}

// mapBuilt is the outcome of a memory map's build (a struct: await's
// result is never a nil interface).
type mapBuilt struct{ err error }
