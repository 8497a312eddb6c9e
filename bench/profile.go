package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// Profiles names the files the turn loop of a replay, of the overhead part
// or of a scale run is profiled into (empty: no profile). With several
// windows each replay's file gets the window in its name; the overhead
// part's gets "overhead", a scale run's its chats ("scale10000"). Trace is
// a runtime execution trace of the same loop: what woke which goroutine,
// which a CPU profile cannot tell.
type Profiles struct {
	CPU   string `json:"cpu,omitempty"`
	Heap  string `json:"heap,omitempty"`
	Trace string `json:"trace,omitempty"`
}

func (p Profiles) forWindow(window int, several bool) Profiles {
	if !several {
		return p
	}
	return p.suffixed(shortTokens(window))
}

// forScale names a scale run's files: "scale10000" appended.
func (p Profiles) forScale(chats int) Profiles { return p.suffixed(fmt.Sprintf("scale%d", chats)) }

func (p Profiles) suffixed(suffix string) Profiles {
	name := func(path string) string {
		if path == "" {
			return ""
		}
		return path + "." + suffix
	}
	return Profiles{CPU: name(p.CPU), Heap: name(p.Heap), Trace: name(p.Trace)}
}

// start begins the CPU profile and the trace; the returned stop ends them
// and writes the heap profile (allocations since the process started and
// what is live after a GC).
func (p Profiles) start() (stop func() error, err error) {
	cpu, err := startFile(p.CPU, pprof.StartCPUProfile)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	tr, err := startFile(p.Trace, trace.Start)
	if err != nil {
		if cpu != nil {
			pprof.StopCPUProfile()
			_ = cpu.Close()
		}
		return nil, fmt.Errorf("trace: %w", err)
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpu.Close())
		}
		if tr != nil {
			trace.Stop()
			errs = append(errs, tr.Close())
		}
		if p.Heap != "" {
			errs = append(errs, writeHeap(p.Heap))
		}
		return errors.Join(errs...)
	}, nil
}

// startFile creates path and starts writing into it with start; nil
// when path is empty.
func startFile(path string, start func(io.Writer) error) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	runtime.GC() // the live part up to date
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}
