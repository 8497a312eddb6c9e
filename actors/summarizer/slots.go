package summarizer

import (
	"context"

	"github.com/agentd/agentd/fairshare"
)

// lane is a provider's fairshare.Slots as one tenant asks for them.
type lane struct {
	s      *fairshare.Slots
	tenant string
}

func newLane(s *fairshare.Slots, tenant string) lane { return lane{s: s, tenant: tenant} }

// acquire waits for a slot until ctx ends (see fairshare.Slots.Acquire).
func (l lane) acquire(ctx context.Context) (release func(), err error) {
	return l.s.Acquire(ctx, l.tenant)
}
