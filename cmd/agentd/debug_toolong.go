package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/agentd/agentd/providers"
	"github.com/spf13/cobra"
)

// maxDebugBody bounds what `debug too-long` reads; a refusal is a few hundred
// bytes and the detector looks at far less than this.
const maxDebugBody = 1 << 20

// tooLongAnswer is the one JSON line `agentd debug too-long` prints. Window
// is null when the body names no window.
type tooLongAnswer struct {
	TooLong bool `json:"too_long"`
	Window  *int `json:"window"`
}

// newDebugTooLongCmd builds `agentd debug too-long`: it runs the same
// detector the adapters use on a provider's error body read from stdin, so
// an operator can see why a chat healed (or did not).
func newDebugTooLongCmd() *cobra.Command {
	var provider string
	var status int
	cmd := &cobra.Command{
		Use:   "too-long --provider NAME [--status CODE] < body",
		Short: "Say whether a provider's error body means \"too long\" and which window it names",
		Long: "Reads a provider's error body on stdin and prints one JSON line " +
			`{"too_long": true|false, "window": N|null}. NAME is the provider or company ` +
			"(openai, anthropic, gemini, ollama, vllm, llamacpp, lmstudio, openrouter, groq, …); " +
			"an unknown name uses the generic detector. --status is the HTTP status (200 for an " +
			"error event inside a stream, 0 when unknown).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxDebugBody))
			if err != nil {
				return fmt.Errorf("read body from stdin: %w", err)
			}
			v := providers.DetectTooLong(provider, status, string(body))
			ans := tooLongAnswer{TooLong: v.TooLong}
			if v.Window > 0 {
				ans.Window = &v.Window
			}
			line, err := json.Marshal(ans)
			if err != nil {
				return fmt.Errorf("encode answer: %w", err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(line))
			return err
		},
	}
	cmd.Flags().StringVar(&provider, "provider", "", "provider or company that sent the body (required)")
	cmd.Flags().IntVar(&status, "status", 0, "HTTP status of the answer (0: unknown)")
	_ = cmd.MarkFlagRequired("provider")
	return cmd
}

func init() {
	debugCmd.AddCommand(newDebugTooLongCmd())
}
