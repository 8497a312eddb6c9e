package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

// screen is the terminal's output, readable while the client writes it.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits (generously) until the screen shows want.
func (s *screen) waitFor(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(s.String(), want) {
			return
		}
	}
	t.Fatalf("the screen never showed %q:\n%s", want, s.String())
}

func echoFake(t *testing.T) *openaifake.Server {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == chat.RoleUser {
			return testkit.Reply{Text: r.Model + " says: " + last.Content}
		}
		return testkit.Reply{Text: "done"}
	}})
	t.Cleanup(fake.Close)
	return fake
}

func twoModels(t *testing.T, url string) configs.Config {
	cfg := daemontest.Config(t.TempDir(), url, 32000)
	cfg.Providers[0].Models = append(cfg.Providers[0].Models, configs.Model{ID: "big", Window: 131072})
	return cfg
}

func TestChatCommands(t *testing.T) {
	d := daemontest.Start(t, twoModels(t, echoFake(t).URL()), nil)
	ctx := context.Background()
	first, err := d.Client.CreateChat(ctx, api.CreateChatRequest{Title: "Older chat"})
	if err != nil {
		t.Fatal(err)
	}
	in := strings.NewReader("/help\nhello\n/model fake/big\nagain\n/bogus\n/new\n/chats\n1\n/memories\n/quit\nnever sent\n")
	var out screen
	if err := runChat(ctx, d.Client, "", "", in, &out, nil, true); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"/compact [focus]", "/chats", // help
		"m says: hello",
		"this chat is on fake/big from the next turn", "big says: again",
		"no command /bogus",
		"Older chat — fake/m, 0 messages", // the list, with the new chats by their first words
		"hello — fake/big, 4 messages",
		"chat " + first.ID + " on fake/m: Older chat — 0 messages", // picked
		"agentd remembers nothing about you yet",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "never sent") {
		t.Errorf("a line after /quit was sent:\n%s", got)
	}
	// /new made a third chat; nothing was sent after /quit.
	if list, err := d.Client.Chats(ctx, ""); err != nil || len(list.Chats) != 3 {
		t.Fatalf("chats = %+v, %v", list, err)
	}
}

func TestChatResumeShowsTheLastTurns(t *testing.T) {
	d := daemontest.Start(t, twoModels(t, echoFake(t).URL()), nil)
	ctx := context.Background()
	c, err := d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"one", "two", "three", "four"} {
		if _, err := d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: m}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var out screen
	if err := runChat(ctx, d.Client, c.ID, "", strings.NewReader(""), &out, nil, true); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"chat " + c.ID + " on fake/m: one — 8 messages", "> two\nm says: two\n> three\nm says: three\n> four\nm says: four\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "says: one") {
		t.Errorf("resume showed more than the last %d messages:\n%s", resumeMessages, got)
	}
}

// OpenAI's refusal for length, from providers/testdata/too_long.jsonl
// (A002, issue chathub-dev/chathub#320).
const openAITooLong = `{"error":{"message":"This model's maximum context length is 4097 tokens. However, your messages resulted in 4111 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`

func TestChatTakesTheTooLongNextStepWithEnter(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 200000, Script: func(r testkit.Received) testkit.Reply {
		if r.Model == "m" {
			return testkit.Reply{Status: 400, Body: openAITooLong}
		}
		return testkit.Reply{Text: r.Model + " read it"}
	}})
	defer fake.Close()
	for _, tc := range []struct {
		name, company string
		want          []string
	}{
		// A hosted provider's bigger model is ready: the step switches to it.
		{"switch-model", "together", []string{"press Enter to switch this chat to fake/big (window 131072)",
			"this chat is on fake/big from the next turn", "big read it"}},
		// A local server's model that is not loaded is no step: a new chat
		// with the same message is.
		{"new-chat", "vllm", []string{"press Enter to start a new chat with this message", "chat ", "on fake/m — type a message"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := twoModels(t, fake.URL())
			cfg.Providers[0].Company = tc.company
			d := daemontest.Start(t, cfg, nil)
			var out screen
			if err := runChat(context.Background(), d.Client, "", "", strings.NewReader("a long paste\n\nsend it again\n"), &out, nil, true); err != nil {
				t.Fatal(err)
			}
			got := out.String()
			for _, want := range append(tc.want, "[problem: this message does not fit fake/m's window of 4097 tokens") {
				if !strings.Contains(got, want) {
					t.Errorf("output lacks %q:\n%s", want, got)
				}
			}
			if list, err := d.Client.Chats(context.Background(), ""); err != nil || (tc.name == "new-chat") != (len(list.Chats) == 2) {
				t.Errorf("chats after the step: %+v, %v", list, err)
			}
		})
	}
}

func TestCtrlCStopsTheStreamAndASecondQuits(t *testing.T) {
	release := make(chan struct{})
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		<-release
		return testkit.Reply{Text: "late answer"}
	}})
	defer fake.Close()
	defer close(release)
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	inR, inW := io.Pipe()
	defer inW.Close()
	intr := make(chan os.Signal, 1)
	var out screen
	done := make(chan error, 1)
	go func() { done <- runChat(context.Background(), d.Client, "", "", inR, &out, intr, true) }()
	out.waitFor(t, "> ")
	if _, err := io.WriteString(inW, "take your time\n"); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "waiting for fake/m…") // the spinner says what the turn waits for
	intr <- os.Interrupt
	out.waitFor(t, "stopped; the daemon finishes this turn")
	intr <- os.Interrupt // at the prompt: quit
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("a second Ctrl-C did not quit:\n%s", out.String())
	}
}

// The spinner says what the turn waits for, from each event as the daemon
// streams it.
func TestSpinnerSaysWhatTheTurnWaitsFor(t *testing.T) {
	term := &terminal{model: "fake/m"}
	for _, tc := range []struct {
		typ, data, want string
	}{
		{api.EventTurnStarted, `{"user_seq": 1}`, "waiting for fake/m… 0s"},
		{api.EventFoldWaiting, `{"elapsed_ms": 3200, "waiting_for": "summary"}`, "waiting for summary… 3s"},
		{api.EventFoldWaiting, `{"elapsed_ms": 1500, "waiting_for": "model", "detail": "fake/m's first word"}`, "waiting for fake/m's first word… 1s"},
		{api.EventToolProgress, `{"tool": "pdf_search", "message": "reading pages", "done": 120, "total": 3000}`, "pdf_search: reading pages (120 of 3000)… 0s"},
		{api.EventToolCall, `{"id": "c1", "name": "calculate", "arguments": "{}"}`, "running calculate… 0s"},
		{api.EventCompactionStarted, `{"targets": 2}`, "compacting this turn's tool results… 0s"},
	} {
		var out screen
		sp := newSpinner(&out, true)
		term.show(sp, api.Event{Type: tc.typ, Data: []byte(tc.data)})
		if got := out.String(); !strings.Contains(got, tc.want) {
			t.Errorf("%s %s: the spinner shows %q, want %q", tc.typ, tc.data, got, tc.want)
		}
		sp.print("answer")
		sp.stop()
		if got := out.String(); !strings.HasSuffix(got, "\r\033[Kanswer") {
			t.Errorf("%s: text after the spinner does not clear it first: %q", tc.typ, got)
		}
	}
}
