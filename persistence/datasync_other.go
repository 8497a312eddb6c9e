//go:build !linux

package persistence

import "os"

// datasync is f.Sync where fdatasync is not to be had.
func datasync(f *os.File) error { return f.Sync() }
