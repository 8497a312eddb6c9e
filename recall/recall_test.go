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

// TestReadPagesAMessageLongerThanOneAnswer: a tool result longer than one
// answer (its stub and its head-and-tail both point to conversation_read
// of its seq) is read back whole, piece by piece, each answer within what
// the model is sent of a result whole and naming the call for the next
// piece; it once answered only "read on with from_seq N", the same call
// again, and never a word of it.
func TestReadPagesAMessageLongerThanOneAnswer(t *testing.T) {
	var page strings.Builder
	for i := 0; page.Len() < 3*maxReadBytes+1000; i++ {
		fmt.Fprintf(&page, "line %d of the page: ünïcödé text that goes on — ", i)
	}
	l := fakeLog{
		{Seq: 1, Role: chat.RoleUser, Content: "fetch the page"},
		{Seq: 2, Role: chat.RoleTool, ToolName: "web_fetch", Content: page.String()},
		{Seq: 3, Role: chat.RoleAssistant, Content: "done"},
	}
	r := tools.NewRegistry()
	if err := Register(r, l); err != nil {
		t.Fatal(err)
	}
	for _, sent := range []int{0, 32 << 10} {
		bound := maxReadBytes
		if sent > 0 {
			bound = sent
		}
		ctx := tools.WithCallInfo(context.Background(), tools.CallInfo{Tenant: "t", ChatID: "c", SentBytes: sent})
		read := func(args string) tools.Result {
			return r.Run(ctx, chat.ToolCall{ID: "1", Name: "conversation_read", Arguments: args}, tools.Limits{})
		}
		var got strings.Builder
		args := `{"from_seq": 2, "to_seq": 2}`
		for calls := 0; args != ""; calls++ {
			if calls == 20 {
				t.Fatalf("sent %d: still reading after %d calls; read so far %d of %d bytes", sent, calls, got.Len(), page.Len())
			}
			res := read(args)
			if res.IsError || len(res.Text) > bound {
				t.Fatalf("sent %d: read %s: error %v, %d bytes; want at most %d", sent, args, res.IsError, len(res.Text), bound)
			}
			header, rest, ok := strings.Cut(res.Text, "\n")
			if !ok || !strings.HasPrefix(header, "[seq 2, tool web_fetch]") {
				t.Fatalf("sent %d: read %s answered %.200q", sent, args, res.Text)
			}
			args = ""
			if body, next, more := strings.Cut(rest, "\n[seq 2 continues; read on with conversation_read "); more {
				rest, args = body, strings.TrimSuffix(strings.TrimSpace(next), "]")
			} else {
				rest = strings.TrimSuffix(rest, "\n")
			}
			got.WriteString(rest)
		}
		if got.String() != page.String() {
			t.Fatalf("sent %d: read back %d bytes, want the %d stored, word for word", sent, got.Len(), page.Len())
		}
		if res := read(fmt.Sprintf(`{"from_seq": 2, "offset": %d}`, page.Len()+1)); !res.IsError {
			t.Fatalf("an offset past the message's end answered %.200q", res.Text)
		}
	}
}
