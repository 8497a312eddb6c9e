package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/actors/toolindex"
)

func TestPadRegistry(t *testing.T) {
	base := []toolindex.Tool{{Name: "a", Description: "A."}, {Name: "b"}}
	got := padRegistry(base, 5)
	var names []string
	for _, t := range got {
		names = append(names, t.Name)
	}
	if want := "a b a_alpha0 b_alpha0 a_bravo0"; strings.Join(names, " ") != want {
		t.Errorf("names = %v, want %s", names, want)
	}
	if got[2].Description != "A. (alpha edition)" || base[0].Description != "A." {
		t.Errorf("copy description %q, original %q", got[2].Description, base[0].Description)
	}
	if len(padRegistry(base, 1)) != 2 {
		t.Error("n below the registry size must leave it as is")
	}
}

// The command writes one run line per query, with the tools the actor
// ranks, and reports recall when queries carry expected tools.
func TestRunToolsearchBench(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.jsonl")
	queries := filepath.Join(dir, "queries.jsonl")
	out := filepath.Join(dir, "run.jsonl")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(tools, `{"name":"get_weather","description":"Weather for a city.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"City"}}}}
{"name":"send_email","description":"Send a mail.","parameters":{"type":"object","properties":{"to":{"type":"string"}}}}
`)
	write(queries, `{"id":"q1","query":"what's the forecast in Oslo","expected":["get_weather"]}
{"id":"q2","query":"email my landlord","expected":["send_email"]}
`)
	var buf bytes.Buffer
	if err := runToolsearchBench(&buf, tools, queries, out, 0, 10); err != nil {
		t.Fatal(err)
	}
	runs, err := readJSONLFile[runLine](out)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].ID != "q1" || runs[1].ID != "q2" {
		t.Fatalf("runs = %+v", runs)
	}
	if len(runs[0].Ranked) == 0 || runs[0].Ranked[0] != "get_weather" || runs[1].Ranked[0] != "send_email" {
		t.Errorf("ranked = %v / %v", runs[0].Ranked, runs[1].Ranked)
	}
	if !strings.Contains(buf.String(), "recall@5 1.000") {
		t.Errorf("report lacks recall: %s", buf.String())
	}
	if err := runToolsearchBench(&buf, filepath.Join(dir, "missing"), queries, out, 0, 10); err == nil {
		t.Error("missing registry: want an error")
	}
}
