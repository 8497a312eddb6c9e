//go:build !linux && !darwin

package ollama

// totalMemory is unknown here; New then plans with assumedMemory.
func totalMemory() uint64 { return 0 }
