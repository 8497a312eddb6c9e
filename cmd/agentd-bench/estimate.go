package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentd/agentd/window"
)

// benchEstimateCmd writes window.EstimateText's raw count for each sample so
// /work/shared/tokens/score.py can compare it with real tokenizers.
var benchEstimateCmd = &cobra.Command{
	Use:   "estimate --samples FILE --out RUN",
	Short: "Write the token estimate of each sample's text, for score.py",
	Args:  cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		samples, _ := cmd.Flags().GetString("samples")
		out, _ := cmd.Flags().GetString("out")
		n, err := writeEstimates(samples, out)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %d estimates to %s\n", n, out)
		return nil
	},
}

func init() {
	benchEstimateCmd.Flags().String("samples", "", "JSONL file of samples, each {\"id\",\"text\",...}")
	benchEstimateCmd.Flags().String("out", "", "JSONL file to write, one {\"id\",\"estimate\"} per sample")
	_ = benchEstimateCmd.MarkFlagRequired("samples")
	_ = benchEstimateCmd.MarkFlagRequired("out")
	rootCmd.AddCommand(benchEstimateCmd)
}

// writeEstimates reads samples line by line (a sample can be a whole chat
// request, so lines may be megabytes long) and writes one estimate a line.
func writeEstimates(samplesPath, outPath string) (n int, err error) {
	in, err := os.Open(samplesPath)
	if err != nil {
		return 0, fmt.Errorf("open samples: %w", err)
	}
	defer in.Close()
	out, err := os.Create(outPath)
	if err != nil {
		return 0, fmt.Errorf("create run file: %w", err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close run file: %w", cerr)
		}
	}()
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		var s struct {
			ID   string `json:"id"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return n, fmt.Errorf("sample on line %d: %w", n+1, err)
		}
		rec := struct {
			ID       string `json:"id"`
			Estimate int    `json:"estimate"`
		}{s.ID, window.EstimateText(s.Text)}
		if err := enc.Encode(rec); err != nil {
			return n, fmt.Errorf("write estimate: %w", err)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("read samples: %w", err)
	}
	if err := w.Flush(); err != nil {
		return n, fmt.Errorf("write run file: %w", err)
	}
	return n, nil
}
