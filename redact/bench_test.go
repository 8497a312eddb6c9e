package redact

import (
	"fmt"
	"strings"
	"testing"
)

// benchMask masks 1 MB made of line repeated.
func benchMask(b *testing.B, line string) {
	text := strings.Repeat(line, (1<<20)/len(line))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		_ = Mask(text)
	}
}

// BenchmarkMaskDense: every line holds three secrets and more hints, the
// worst a fold of a long chat hands the summariser.
func BenchmarkMaskDense(b *testing.B) {
	benchMask(b, "Person: the build of order 48213 failed on /srv/ci/run.sh, see https://ci.example.com/job/7 and retry; "+
		"my password is hunter2 and the token sk-proj-abcdefghijklmnopqrstuvwx expires, PIN 4711.\n")
}

// BenchmarkMaskToolOutput: JSON a tool returned, names like "user" and
// "key" in it, no secret.
func BenchmarkMaskToolOutput(b *testing.B) {
	benchMask(b, `{"id": 48213, "user": "ada", "status": "shipped", "items": [{"sku": "A-17", "qty": 2}], "key": "order-48213", "updated": "2026-11-30T10:00:00Z"}`+"\n")
}

// BenchmarkMaskLines masks a fold's lines one by one, as the summariser and
// the learner do: 250 short lines with no secret, where what one call costs
// besides reading its text shows.
func BenchmarkMaskLines(b *testing.B) {
	lines := make([]string, 0, 250)
	for i := range 125 {
		lines = append(lines, fmt.Sprintf("Person: Question %d: %s", i, strings.Repeat("how does this part work? ", 4)),
			"Assistant: Noted; here is a short answer to that.")
	}
	for b.Loop() {
		mk := NewMasker()
		for _, l := range lines {
			_ = mk.Mask(l)
		}
	}
}
