package main

import (
	"strings"
	"testing"
)

// The bench writes plots only where asked: no default folder, and a replot
// without one is refused before anything is read or drawn.
func TestBenchWritesPlotsOnlyWhereAsked(t *testing.T) {
	if def := rootCmd.Flags().Lookup("plots").DefValue; def != "" {
		t.Fatalf("--plots defaults to %q; it must default to none", def)
	}
	rootCmd.SetArgs([]string{"--replot", "no-such-report.json"})
	t.Cleanup(func() { rootCmd.SetArgs(nil) })
	err := rootCmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--plots") {
		t.Fatalf("replot without --plots: %v, want a refusal naming --plots", err)
	}
}
