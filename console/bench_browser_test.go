package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
)

// BenchmarkBrowserOpenALongChat times opening a chat of 2,000 stored
// messages in the console: until the newest is in the page and laid out
// (what the person sees), and until every one is (BENCHMARKS.md has the
// figures):
//
//	go test ./console/ -run '^$' -bench BrowserOpenALongChat -benchtime 5x
func BenchmarkBrowserOpenALongChat(b *testing.B) {
	const n = 2000
	r := newRig(b, rigOptions{window: 1 << 20})
	ctx := context.Background()
	c, err := r.d.Client.CreateChat(ctx, api.CreateChatRequest{Title: "A long chat"})
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]chat.Message, n)
	for i := range msgs {
		msgs[i] = chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("Message %d: ", i) + strings.Repeat("a few words of an ordinary chat line, ", 8)}
		if i%2 == 1 {
			msgs[i].Role, msgs[i].Model = chat.RoleAssistant, "fake/m"
		}
	}
	if _, err := r.d.Hub.Store().Append(ctx, c.ID, msgs...); err != nil {
		b.Fatal(err)
	}
	r.open("#/")
	for name, cond := range map[string]string{
		// What the person sees first: the newest message, at the bottom.
		"newest": fmt.Sprintf(`document.querySelector('#transcript article.msg[data-seq="%d"]') !== null`, n),
		"all":    fmt.Sprintf(`document.querySelectorAll("#transcript article.msg").length === %d`, n),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				eval[bool](r, `(location.hash = "#/", true)`)
				r.until("the chats page", `document.querySelector("#chat-list") !== null`)
				b.StartTimer()
				eval[bool](r, `(location.hash = "#/chats/`+c.ID+`", true)`)
				r.until(name, cond)
				// Reading a layout figure makes the browser finish laying the page out.
				eval[int](r, `document.scrollingElement.scrollHeight`)
			}
		})
	}
}
