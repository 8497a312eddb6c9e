// Command agentd is the daemon and its companions: `agentd serve` runs it,
// `agentd chat` talks to a running one, `agentd bench` measures it and
// `agentd debug` answers operators' questions.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// rootCmd is the top of the command tree; each subcommand adds itself in its
// own file's init.
var rootCmd = &cobra.Command{
	Use:           "agentd",
	Short:         "agentd hosts many long chats with language models, each fitted to its model's window",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// benchCmd groups the measuring commands (`agentd bench estimate`, …).
var benchCmd = &cobra.Command{Use: "bench", Short: "Measure agentd: token estimates, tool search, long-chat replays"}

// debugCmd groups commands that explain the daemon's decisions.
var debugCmd = &cobra.Command{Use: "debug", Short: "Explain agentd's decisions (e.g. why a chat healed)"}

func init() {
	rootCmd.AddCommand(benchCmd, debugCmd)
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "agentd:", err)
		os.Exit(1)
	}
}
