package ollama

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// totalMemory reads MemTotal from /proc/meminfo, 0 when it cannot.
func totalMemory() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	return parseMemTotal(bufio.NewScanner(f))
}

// parseMemTotal finds "MemTotal: N kB" among meminfo lines.
func parseMemTotal(sc *bufio.Scanner) uint64 {
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}
