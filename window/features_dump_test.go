package window

import (
	"bufio"
	"encoding/json"
	"flag"
	"os"
	"testing"
)

// -dump-features writes the scanner's raw counts for each sample of
// -samples, so the rates can be refitted offline (see BENCHMARKS.md, "Token estimate").
var (
	dumpFeatures = flag.String("dump-features", "", "write per-sample feature counts to this file")
	dumpSamples  = flag.String("samples", "/work/shared/tokens/samples.jsonl", "samples for -dump-features")
)

func TestDumpFeatures(t *testing.T) {
	if *dumpFeatures == "" {
		t.Skip("only with -dump-features")
	}
	in, err := os.Open(*dumpSamples)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(*dumpFeatures)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var s struct {
			ID   string `json:"id"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		f := countFeatures(s.Text)
		if err := enc.Encode(map[string]any{"id": s.ID, "f": f[:]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}
