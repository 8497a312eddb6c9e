package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/agentd/agentd/bench"
)

// overheadFakeCmd runs the overhead part's fake for a parent agentd-bench,
// so the parent's process CPU is agentd's alone.
var overheadFakeCmd = &cobra.Command{
	Use:    "overhead-fake",
	Short:  "Serve the overhead part's fake until stdin closes (run by agentd-bench itself)",
	Hidden: true,
	Args:   cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		window, _ := cmd.Flags().GetInt("window")
		cpuProfile, _ := cmd.Flags().GetString("cpuprofile")
		return bench.ServeOverheadFake(window, cpuProfile, cmd.OutOrStdout(), os.Stdin)
	},
}

func init() {
	overheadFakeCmd.Flags().Int("window", 32_000, "the fake's context window")
	overheadFakeCmd.Flags().String("cpuprofile", "", "write a CPU profile of the fake's serving life to this file")
	rootCmd.AddCommand(overheadFakeCmd)
}
