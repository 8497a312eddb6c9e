//go:build !race

package persistence

const raceDetector = false
