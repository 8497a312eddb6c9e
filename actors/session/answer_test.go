package session

import (
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
)

// TestAnswerPairsEachResultWithItsAwaitedCall: results pair with the calls
// the turn awaits, whatever their order; what is left waits on; an unknown
// id names the awaited ones, and a second result of one call says so.
func TestAnswerPairsEachResultWithItsAwaitedCall(t *testing.T) {
	awaiting := []chat.ToolCall{{ID: "c1", Name: "find"}, {ID: "c2", Name: "note"}}
	cases := []struct {
		name     string
		results  []ToolResult
		wantMsgs []string // "id:name:output"
		wantRest []string
		wantErr  string
	}{
		{"both, out of order", []ToolResult{{CallID: "c2", Output: "b"}, {CallID: "c1", Output: "a"}}, []string{"c2:note:b", "c1:find:a"}, nil, ""},
		{"one of two", []ToolResult{{CallID: "c1", Output: "a"}}, []string{"c1:find:a"}, []string{"c2"}, ""},
		{"none", nil, nil, nil, "no results"},
		{"an unknown id", []ToolResult{{CallID: "c9"}}, nil, nil, `call_id "c9": the turn waits for no such call (it waits for c1, c2)`},
		{"one call twice", []ToolResult{{CallID: "c1", Output: "a"}, {CallID: "c1", Output: "again"}}, nil, nil, `call_id "c1": its result is given twice`},
	}
	for _, tc := range cases {
		msgs, rest, err := answer(awaiting, tc.results)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		var got []string
		for _, m := range msgs {
			got = append(got, m.ToolCallID+":"+m.ToolName+":"+m.Content)
		}
		if err != nil || strings.Join(got, " ") != strings.Join(tc.wantMsgs, " ") || strings.Join(callIDList(rest), " ") != strings.Join(tc.wantRest, " ") {
			t.Errorf("%s: messages %v, rest %v, error %v; want %v and %v", tc.name, got, callIDList(rest), err, tc.wantMsgs, tc.wantRest)
		}
	}
}
