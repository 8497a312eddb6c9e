package bench

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// Profiles names the files the turn loop of a replay, of the overhead part
// or of a scale run is profiled into (empty: no profile). With several
// windows each replay's file gets the window in its name; the overhead
// part's gets "overhead", a scale run's its chats ("scale10000").
type Profiles struct {
	CPU  string `json:"cpu,omitempty"`
	Heap string `json:"heap,omitempty"`
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
	return Profiles{CPU: name(p.CPU), Heap: name(p.Heap)}
}

// start begins the CPU profile; the returned stop ends it and writes the
// heap profile (allocations since the process started and what is live
// after a GC).
func (p Profiles) start() (stop func() error, err error) {
	var cpu *os.File
	if p.CPU != "" {
		if cpu, err = os.Create(p.CPU); err != nil {
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			_ = cpu.Close()
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpu.Close())
		}
		if p.Heap != "" {
			errs = append(errs, writeHeap(p.Heap))
		}
		return errors.Join(errs...)
	}, nil
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
