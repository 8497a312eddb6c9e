package session

import (
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
}
