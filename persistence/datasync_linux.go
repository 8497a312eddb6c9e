package persistence

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data (and the metadata needed to read it back):
// the journal's files are written in place, so it need not wait for the
// rest of their metadata, as fsync would.
func datasync(f *os.File) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		for serr = unix.Fdatasync(int(fd)); serr == unix.EINTR; serr = unix.Fdatasync(int(fd)) {
		}
	}); err != nil {
		return err
	}
	return serr
}
