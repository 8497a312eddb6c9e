package ollama

import "golang.org/x/sys/unix"

// totalMemory asks the kernel for hw.memsize, 0 when it cannot.
func totalMemory() uint64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0
	}
	return n
}
