package recall

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/tools"
)

type fakeLog []chat.Message

func (l fakeLog) Messages(_ context.Context, _ string, from, to int64) ([]chat.Message, error) {
	var out []chat.Message
	for _, m := range l {
		if m.Seq >= from && (to == 0 || m.Seq <= to) {
			out = append(out, m)
		}
	}
	return out, nil
}

func run(t *testing.T, log fakeLog, name, args string) tools.Result {
	t.Helper()
	r := tools.NewRegistry()
	if err := Register(r, log); err != nil {
		t.Fatal(err)
	}
	ctx := tools.WithCallInfo(context.Background(), tools.CallInfo{Tenant: "t", ChatID: "c"})
	return r.Run(ctx, chat.ToolCall{ID: "1", Name: name, Arguments: args}, tools.Limits{})
}

func chatLog() fakeLog {
	var l fakeLog
	for i := 1; i <= 30; i++ {
		l = append(l, chat.Message{Seq: int64(i), Role: chat.RoleUser, Content: strings.Repeat(fmt.Sprintf("filler words in message %d and the rest. ", i), 20)})
	}
	l = append(l, chat.Message{Seq: 31, Role: chat.RoleUser, Content: "Always answer in metric units."})
	return l
}

func TestSearchFindsTheMessageWithTheRareWordsNotTheLongOnes(t *testing.T) {
	res := run(t, chatLog(), "conversation_search", `{"query": "always answer in metric units", "limit": 3}`)
	if res.IsError || !strings.HasPrefix(res.Text, "[seq 31, user]") {
		t.Fatalf("search = %q", res.Text)
	}
}

func TestSearchNeedsAMeaningfulWord(t *testing.T) {
	if res := run(t, chatLog(), "conversation_search", `{"query": "in at"}`); !res.IsError {
		t.Fatalf("a query of stop words answered %q", res.Text)
	}
}

func TestReadReturnsTheRangeWordForWord(t *testing.T) {
	l := chatLog()
	res := run(t, l, "conversation_read", `{"from_seq": 31}`)
	if res.IsError || !strings.Contains(res.Text, "[seq 31, user] Always answer in metric units.") {
		t.Fatalf("read = %q", res.Text)
	}
	res = run(t, l, "conversation_read", `{"from_seq": 1, "to_seq": 31}`)
	if !strings.Contains(res.Text, "[seq 1, user]") || strings.Contains(res.Text, "[seq 31,") && len(res.Text) > maxReadBytes+200 {
		t.Fatalf("read range = %d bytes", len(res.Text))
	}
	if res := run(t, l, "conversation_read", `{"from_seq": 0}`); !res.IsError {
		t.Fatal("from_seq 0 accepted")
	}
}

func TestToolsNeedTheCallingChat(t *testing.T) {
	r := tools.NewRegistry()
	_ = Register(r, chatLog())
	res := r.Run(context.Background(), chat.ToolCall{ID: "1", Name: "conversation_read", Arguments: `{"from_seq": 1}`}, tools.Limits{})
	if !res.IsError {
		t.Fatalf("read outside a chat answered %q", res.Text)
	}
}
