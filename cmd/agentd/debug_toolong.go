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
	// With --explain: which rule decided, and the other figures named.
	Explain *tooLongExplain `json:"explain,omitempty"`
}

// tooLongExplain is providers.Explanation as `debug too-long --explain`
// prints it.
type tooLongExplain struct {
	Status    string   `json:"status,omitempty"`
	Veto      string   `json:"look_alike,omitempty"`
	Rules     []string `json:"rules"`
	Requested int      `json:"requested,omitempty"`
	Input     int      `json:"input,omitempty"`
	Output    int      `json:"output,omitempty"`
	Total     int      `json:"total,omitempty"`
}

// newDebugTooLongCmd builds `agentd debug too-long`: it runs the same
// detector the adapters use on a provider's error body read from stdin, so
// an operator can see why a chat healed (or did not).
func newDebugTooLongCmd() *cobra.Command {
	var provider string
	var status int
	var explain bool
	cmd := &cobra.Command{
		Use:   "too-long --provider NAME [--status CODE] < body",
		Short: "Say whether a provider's error body means \"too long\" and which window it names",
		Long: "Reads a provider's error body on stdin and prints one JSON line " +
			`{"too_long": true|false, "window": N|null}. NAME is the provider or company ` +
			"(openai, anthropic, gemini, ollama, vllm, llamacpp, lmstudio, openrouter, groq, …); " +
			"an unknown name uses the generic detector. --status is the HTTP status (200 for an " +
			"error event inside a stream, 0 when unknown). --explain adds which rule matched (or which " +
			"look-alike or status ruled it out) and the other figures the body names.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxDebugBody))
			if err != nil {
				return fmt.Errorf("read body from stdin: %w", err)
			}
			e := providers.ExplainTooLong(provider, status, string(body))
			v := e.Verdict
			ans := tooLongAnswer{TooLong: v.TooLong}
			if v.Window > 0 {
				ans.Window = &v.Window
			}
			if explain {
				ans.Explain = &tooLongExplain{Status: e.Status, Veto: e.Veto, Rules: append([]string{}, e.Rules...),
					Requested: v.Requested, Input: e.Input, Output: e.Output, Total: e.Total}
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
	cmd.Flags().BoolVar(&explain, "explain", false, "also print which rule matched and the figures named")
	_ = cmd.MarkFlagRequired("provider")
	return cmd
}

func init() {
	debugCmd.AddCommand(newDebugTooLongCmd())
}
