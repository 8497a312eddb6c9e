package tools

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
)

func TestCurrentTime(t *testing.T) {
	// 2025-03-30 00:30 UTC is a Sunday; Paris has just switched to summer
	// time (CEST, UTC+2) at 01:00 UTC that day, so at 00:30 UTC it is still
	// winter time there (UTC+1): 01:30 local.
	fixed := time.Date(2025, 3, 30, 0, 30, 0, 0, time.UTC)
	r := NewRegistry()
	if err := RegisterCurrentTime(r, func() time.Time { return fixed }); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      string
		want      []string
		wantError bool
	}{
		{"UTC by default", `{}`, []string{"2025-03-30T00:30:00Z", "Sunday", "UTC"}, false},
		{"Paris before the switch", `{"timezone":"Europe/Paris"}`, []string{"2025-03-30T01:30:00+01:00", "Sunday", "Europe/Paris"}, false},
		{"Tokyo is already evening", `{"timezone":"Asia/Tokyo"}`, []string{"2025-03-30T09:30:00+09:00"}, false},
		{"New York is the day before", `{"timezone":"America/New_York"}`, []string{"2025-03-29T20:30:00-04:00", "Saturday"}, false},
		{"unknown zone", `{"timezone":"Mars/Olympus"}`, []string{`"Mars/Olympus"`, "IANA"}, true},
		{"server-local zone refused", `{"timezone":"Local"}`, []string{`"Local"`}, true},
		{"wrong type", `{"timezone":5}`, []string{`"timezone"`}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := r.Run(context.Background(), chat.ToolCall{Name: "current_time", Arguments: tc.args}, Limits{})
			if res.IsError != tc.wantError {
				t.Errorf("IsError = %v, want %v: %q", res.IsError, tc.wantError, res.Text)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Text, w) {
					t.Errorf("%q does not contain %q", res.Text, w)
				}
			}
		})
	}
}

func TestRegisterBuiltins(t *testing.T) {
	r := NewRegistry()
	if err := RegisterBuiltins(r); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"calculate", "current_time", "fetch_url"} {
		tl, ok := r.Get(name)
		if !ok {
			t.Errorf("built-in %s missing", name)
			continue
		}
		// Each description is embedded from its .md file; an empty one
		// means the embed broke.
		if len(strings.TrimSpace(tl.Description)) < 40 {
			t.Errorf("%s description too short: %q", name, tl.Description)
		}
	}
	if err := RegisterBuiltins(r); err == nil {
		t.Error("registering the built-ins twice succeeded; names must stay unique")
	}
}
