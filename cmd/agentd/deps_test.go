package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The production binary contains the daemon: no protocol fake, no bench
// (those live in cmd/agentd-bench).
func TestBinaryLinksNoTestKitNorBench(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		rest, ours := strings.CutPrefix(p, "github.com/agentd/agentd/")
		if ours && (rest == "testkit" || strings.HasPrefix(rest, "testkit/") || rest == "bench" || strings.HasPrefix(rest, "bench/")) {
			t.Errorf("cmd/agentd links %s", p)
		}
	}
}
