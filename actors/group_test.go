package actors

import (
	"testing"
	"time"
)

func TestGroupWaitsForItsGoroutines(t *testing.T) {
	var g Group
	release := make(chan struct{})
	ended := false
	g.Go(func() { <-release; ended = true })
	if g.Wait(time.Millisecond) {
		t.Fatal("Wait reported done while a goroutine still blocks")
	}
	close(release)
	if !g.Wait(time.Minute) || !ended {
		t.Fatal("Wait returned before the goroutine ended")
	}
}
