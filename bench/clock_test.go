package bench

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/summarizer"
)

func TestTheModelClockLeavesOutTheSummarisersAndLearnersCalls(t *testing.T) {
	body := func(system, last string) []byte {
		b, err := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": last}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := map[string]struct {
		body []byte
		want bool
	}{
		"a chat's request":               {body("You are a helpful assistant.", "hello"), false},
		"a fold after the chat's prefix": {body("You are a helpful assistant.", summarizer.Instructions), true},
		"a fold as lines":                {body(summarizer.Instructions, "- person: hello"), true},
		"a long turn's state":            {body(summarizer.CondenseInstructions, "- tool: ok"), true},
		"the learner's":                  {body(learner.Instructions, "I drink tea"), true},
	}
	for name, c := range cases {
		r, err := http.NewRequest(http.MethodPost, "http://fake/v1/chat/completions", bytes.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := background(r); got != c.want {
			t.Errorf("%s: background = %v, want %v", name, got, c.want)
		}
	}
}
