package providers

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// A body of the bound is read whole; one byte more fails with
// ErrBodyTooLarge naming the bound, after the bound's bytes, never more.
func TestLimitBodyFailsPastItsBound(t *testing.T) {
	for _, tc := range []struct {
		size    int
		tooLong bool
	}{{9, false}, {10, false}, {11, true}, {1000, true}} {
		got, err := io.ReadAll(LimitBody(io.NopCloser(strings.NewReader(strings.Repeat("x", tc.size))), 10))
		if tc.tooLong != errors.Is(err, ErrBodyTooLarge) || (tc.tooLong && !strings.Contains(err.Error(), "more than 10 bytes")) {
			t.Fatalf("a body of %d bytes under a bound of 10: %v", tc.size, err)
		}
		if want := min(tc.size, 10); len(got) != want {
			t.Fatalf("a body of %d bytes: read %d, want %d", tc.size, len(got), want)
		}
	}
}
