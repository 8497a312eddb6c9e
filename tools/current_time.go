package tools

import (
	"context"
	_ "embed"
	"fmt"
	"time"
	// The zone database is compiled in so that a daemon running in a
	// minimal container (no /usr/share/zoneinfo) still knows every zone.
	_ "time/tzdata"
)

//go:embed current_time.md
var currentTimeDescription string

// CurrentTimeParams are the arguments of current_time.
type CurrentTimeParams struct {
	Timezone string `json:"timezone,omitempty" jsonschema:"description=IANA time zone name such as Europe/Paris; UTC when empty"`
}

// RegisterCurrentTime adds the current_time tool; now is the clock (nil
// means time.Now), replaceable so tests can fix the instant.
func RegisterCurrentTime(r *Registry, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	return Register(r, "current_time", currentTimeDescription, func(_ context.Context, p CurrentTimeParams) (Result, error) {
		name := p.Timezone
		if name == "" {
			name = "UTC"
		}
		loc, err := time.LoadLocation(name)
		if err != nil || name == "Local" {
			// "Local" would leak the server's zone, which means nothing to the
			// person; it is refused like any unknown name.
			return Result{
				Text:    fmt.Sprintf("unknown time zone %q: use an IANA name such as Europe/Paris or America/New_York, or leave it empty for UTC", p.Timezone),
				IsError: true,
			}, nil
		}
		t := now().In(loc)
		return Result{Text: fmt.Sprintf("%s (%s, %s, time zone %s)",
			t.Format(time.RFC3339), t.Weekday(), t.Format("2 January 2006 15:04"), loc.String())}, nil
	})
}
