package ollama

import (
	"bufio"
	"strings"
	"testing"
)

func TestParseMemTotal(t *testing.T) {
	tests := map[string]struct {
		meminfo string
		want    uint64
	}{
		"usual":     {"MemTotal:       16318480 kB\nMemFree:         1234 kB\n", 16318480 * 1024},
		"not first": {"Foo: 1 kB\nMemTotal: 8 kB\n", 8 * 1024},
		"missing":   {"MemFree: 1 kB\n", 0},
		"garbled":   {"MemTotal: lots kB\n", 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := parseMemTotal(bufio.NewScanner(strings.NewReader(tc.meminfo))); got != tc.want {
				t.Errorf("parseMemTotal = %d, want %d", got, tc.want)
			}
		})
	}
}
