// Command agentd is the daemon and its companions: `agentd serve` runs it,
// `agentd chat` talks to a running one and `agentd debug` answers
// operators' questions. The bench is its own command (cmd/agentd-bench), so
// this binary links none of the protocol fakes.
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

// debugCmd groups commands that explain the daemon's decisions.
var debugCmd = &cobra.Command{Use: "debug", Short: "Explain agentd's decisions (e.g. why a chat healed)"}

func init() {
	rootCmd.AddCommand(debugCmd)
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "agentd:", err)
		os.Exit(1)
	}
}
