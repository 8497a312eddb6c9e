package session

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
)

func TestMergeUserRunsJoinsAnUnansweredMessageWithTheNext(t *testing.T) {
	in := []chat.Message{
		{Seq: 1, Role: chat.RoleUser, Content: "first"},
		{Seq: 2, Role: chat.RoleUser, Content: "second"},
		{Seq: 3, Role: chat.RoleAssistant, Content: "answer"},
		{Seq: 4, Role: chat.RoleUser, Content: "third"},
	}
	out := mergeUserRuns(in)
	if len(out) != 3 || out[0].Content != "first\n\nsecond" || out[0].Seq != 2 || out[2].Content != "third" {
		t.Fatalf("merged = %+v", out)
	}
	if in[0].Content != "first" || len(in) != 4 {
		t.Fatal("the input was changed")
	}
	for _, in := range [][]chat.Message{nil, in[1:], in[2:], {in[3], in[2], in[3], in[2], in[1], in[2]}} {
		if out := mergeUserRuns(in); !slices.EqualFunc(out, in, func(a, b chat.Message) bool { return a.Seq == b.Seq && a.Content == b.Content }) {
			t.Fatalf("no run in %+v, yet merged to %+v", in, out)
		}
	}
	late := append(slices.Clone(in[2:]), in[0], in[1])
	if out := mergeUserRuns(late); len(out) != 2 || out[1].Content != "third\n\nfirst\n\nsecond" || out[1].Seq != 2 {
		t.Fatalf("a run at the end merged to %+v", out)
	}
}

// TestNewestThatFit: loaded tools beyond their share of a small window are
// left out oldest first, and what is kept stays in order.
func TestNewestThatFit(t *testing.T) {
	spec := func(name string, words int) chat.ToolSpec {
		return chat.ToolSpec{Name: name, Description: strings.Repeat("word ", words), Parameters: json.RawMessage(`{"type":"object"}`)}
	}
	specs := []chat.ToolSpec{spec("old", 200), spec("mid", 200), spec("new", 200)}
	one := toolTokens(specs[2:])
	cases := map[string]struct {
		room int
		want []string
	}{
		"all fit":        {10 * one, []string{"old", "mid", "new"}},
		"two fit":        {2*one + 1, []string{"mid", "new"}},
		"none fits":      {one - 1, nil},
		"no room at all": {0, nil},
	}
	for name, c := range cases {
		var got []string
		for _, sp := range newestThatFit(specs, c.room) {
			got = append(got, sp.Name)
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: got %v, want %v", name, got, c.want)
		}
	}
}
