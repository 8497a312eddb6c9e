package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"testing"
)

// TestProfilesWriteEachFileAndStopCleanly: start and stop write a CPU
// profile and a heap profile (gzip) and a runtime trace (its header) into
// the files named; a trace that cannot be created fails start and leaves
// no CPU profile running.
func TestProfilesWriteEachFileAndStopCleanly(t *testing.T) {
	dir := t.TempDir()
	p := Profiles{CPU: filepath.Join(dir, "cpu"), Heap: filepath.Join(dir, "heap"), Trace: filepath.Join(dir, "trace")}
	stop, err := p.start()
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if trace.IsEnabled() {
		t.Fatal("the trace runs on after stop")
	}
	for path, head := range map[string][]byte{p.CPU: {0x1f, 0x8b}, p.Heap: {0x1f, 0x8b}, p.Trace: []byte("go 1.")} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, head) {
			t.Errorf("%s starts %q, want %q", filepath.Base(path), b[:min(len(b), 8)], head)
		}
	}

	bad := Profiles{CPU: filepath.Join(dir, "cpu2"), Trace: filepath.Join(dir, "no such folder", "trace")}
	if _, err := bad.start(); err == nil {
		t.Fatal("start with a trace in a missing folder: no error")
	}
	if err := pprof.StartCPUProfile(new(bytes.Buffer)); err != nil {
		t.Fatalf("a CPU profile was left running: %v", err)
	}
	pprof.StopCPUProfile()
}
