// Command agentd-bench measures agentd: a bare `agentd-bench` runs the
// long-chat replays, the LangChain.js peer, overhead, scale and find_tools
// against the protocol fakes (package bench); `agentd-bench estimate` and
// `agentd-bench toolsearch` measure one piece each. It is a command of its
// own so the daemon's binary links none of the fakes.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// rootCmd is the whole bench; each subcommand adds itself in its own file's
// init.
var rootCmd = &cobra.Command{
	Use:           "agentd-bench",
	Short:         "Measure agentd: long-chat replays, overhead, scale, find_tools, token estimates",
	Args:          cobra.NoArgs,
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "agentd-bench:", err)
		os.Exit(1)
	}
}
