package redact

import (
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
