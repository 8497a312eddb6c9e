package actors

import (
	"testing"
	"time"
)

func TestGroupWaitsForItsGoroutines(t *testing.T) {
	d := NewDispatcher(0, 0, 0)
	defer stopNow(t, d)
	for _, tc := range []struct {
		name string
		gofn func(*Group, func())
	}{
		{"Go", (*Group).Go},
		{"GoOn a dispatcher", func(g *Group, f func()) { g.GoOn(d, f) }},
		{"GoOn no dispatcher", func(g *Group, f func()) { g.GoOn(nil, f) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g Group
			release := make(chan struct{})
			ended := false
			tc.gofn(&g, func() { <-release; ended = true })
			if g.Wait(time.Millisecond) {
				t.Fatal("Wait reported done while a goroutine still blocks")
			}
			close(release)
			if !g.Wait(time.Minute) || !ended {
				t.Fatal("Wait returned before the goroutine ended")
			}
		})
	}
}
