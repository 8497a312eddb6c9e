package toolsearch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Found on a real model server (issue 16): 150 tools named kit__tool_000 …
// kit__tool_149 and a message naming kit__tool_042 loaded kit__tool_000,
// 001 and 002, since numbers are no terms. A name copied whole comes first.
func TestNamedInExactName(t *testing.T) {
	var docs []Doc
	for i := range 150 {
		docs = append(docs, Doc{Name: fmt.Sprintf("kit__tool_%03d", i), Description: fmt.Sprintf("Report reading %d for a city", i)})
	}
	docs = append(docs, Doc{Name: "calculate", Description: "Evaluate an arithmetic expression"}, Doc{Name: "get_weather", Description: "Weather for a city"})
	ix := NewIndex(docs)
	cases := map[string]struct {
		msg   string
		limit int
		want  []string // the first names, in order
	}{
		"one copied name":    {"Please use kit__tool_042 to get the reading for Paris.", 3, []string{"kit__tool_042"}},
		"two, in order":      {"compare kit__tool_149 with kit__tool_007.", 3, []string{"kit__tool_149", "kit__tool_007"}},
		"limit holds":        {"kit__tool_001 kit__tool_002 kit__tool_003", 2, []string{"kit__tool_001", "kit__tool_002"}},
		"underscored name":   {"Use get_weather: is it raining?", 3, []string{"get_weather"}},
		"said twice, once":   {"kit__tool_010, yes kit__tool_010", 3, []string{"kit__tool_010"}},
		"a plain word is no": {"calculate this for me", 3, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := ix.NamedIn(c.msg, c.limit)
			if len(got) > c.limit || len(got) < len(c.want) || !slices.Equal(got[:len(c.want)], c.want) {
				t.Fatalf("NamedIn(%q, %d) = %v, want it to start with %v", c.msg, c.limit, got, c.want)
			}
			if c.want == nil && slices.Contains(got, "calculate") {
				t.Errorf("a generic word named calculate: %v", got)
			}
			seen := map[string]bool{}
			for _, n := range got {
				if seen[n] {
					t.Errorf("%s named twice: %v", n, got)
				}
				seen[n] = true
			}
		})
	}
}

// A long message is read at its start and end: a tool named there loads, a
// word deep in a pasted log does not, and no word is read cut in two.
func TestNamedInReadsALongMessagesEdges(t *testing.T) {
	ix := NewIndex([]Doc{{Name: "remember", Description: "Save a fact about the person"},
		{Name: "browser_open", Description: "Open a page in the browser"}, {Name: "ember", Description: "Light a fire"}})
	filler := strings.Repeat("lorem ipsum dolor sit amet ", 8000) // 216 KB
	cases := map[string]struct {
		msg  string
		want []string
	}{
		"named at the start":  {"Please remember this log: " + filler, []string{"remember"}},
		"named at the end":    {filler + " — now open it in the browser", []string{"browser_open"}},
		"named in the middle": {filler + " remember " + filler, nil},
		"short, anywhere":     {"lorem ipsum remember dolor", []string{"remember"}},
		// A word across an edge is not read as its part there: "emberglow"
		// ends the head as "ember", "remember" starts the tail as "ember".
		"a word across the head's edge": {strings.Repeat("z", namedEdgeBytes-6) + " emberglow " + filler, nil},
		"a word across the tail's edge": {filler + "remember " + strings.Repeat("y", namedEdgeBytes-6), nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ix.NamedIn(c.msg, 3); !slices.Equal(got, c.want) {
				t.Fatalf("NamedIn = %v, want %v", got, c.want)
			}
		})
	}
}
