//go:build race

package persistence

// raceDetector: the race detector is on, and sync.Pool drops some of what
// is put back, so allocation counts are not a pooled path's.
const raceDetector = true
