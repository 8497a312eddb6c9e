package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

func TestChatStreamsAnswersAndCompacts(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000, Script: func(r testkit.Received) testkit.Reply {
		if strings.Contains(r.System, "running summary") {
			return testkit.Reply{Text: "What the person wants: a greeting."}
		}
		return testkit.Reply{Text: "Hello, " + r.Messages[len(r.Messages)-1].Content + "!", ChunkRunes: 2}
	}})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), nil)
	var out bytes.Buffer
	in := strings.NewReader("world\nagain\n/compact the greeting\n")
	if err := runChat(context.Background(), d.Client, "", "", in, &out, nil, false); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"chat ", "on fake/m", "Hello, world!", "Hello, again!", "earlier messages are summarised for fake/m"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	// Not a terminal: no spinner, and none of its escape codes.
	if strings.Contains(got, "\033[") || strings.Contains(got, "waiting for") {
		t.Errorf("piped output holds the spinner:\n%q", got)
	}
}

// Against a daemon that wants a token, `agentd chat` without one says how
// to give it.
func TestChatWithoutATokenSaysHowToGiveOne(t *testing.T) {
	fake := openaifake.New(openaifake.Options{Window: 32000})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), 32000), map[string]string{"tok-a": "a"})
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetIn(strings.NewReader("hello\n"))
	rootCmd.SetArgs([]string{"chat", "--addr", d.Server.URL, "--token", ""})
	err := rootCmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--token") || !strings.Contains(err.Error(), "AGENTD_TOKEN") {
		t.Fatalf("chat without a token: %v", err)
	}
}

func TestSchemaDescribesTheConfigKeys(t *testing.T) {
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetArgs([]string{"schema"})
	if err := rootCmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"listen"`, `"data_dir"`, `"providers"`, `"api_key_env"`, `"tool_timeout"`, `"additionalProperties": false`} {
		if !strings.Contains(out.String(), key) {
			t.Errorf("schema lacks %s", key)
		}
	}
	if strings.Contains(out.String(), `"required"`) {
		t.Error("every key is optional, but the schema requires some")
	}
}

// TestChatShowsATakenBackAnswerApart: a message.reset (an answer taken
// back after it streamed, then asked again) prints a marked break: the
// terminal cannot take back what it printed, so the retry's words follow
// on a line of their own, never spliced onto the dropped ones.
func TestChatShowsATakenBackAnswerApart(t *testing.T) {
	var out strings.Builder
	term := &terminal{out: &out, model: "m"}
	sp := newSpinner(&out, false)
	defer sp.stop()
	for _, ev := range []api.Event{
		{Type: api.EventTurnStarted},
		{Type: api.EventMessageDelta, Data: json.RawMessage(`{"text":"Four, as the wor"}`)},
		{Type: api.EventMessageReset},
		{Type: api.EventMessageDelta, Data: json.RawMessage(`{"text":"Four."}`)},
		{Type: api.EventTurnCompleted, Data: json.RawMessage(`{"status":"completed"}`)},
	} {
		term.show(sp, ev)
	}
	if want := "Four, as the wor\n— that answer was taken back; asked again —\nFour.\n"; out.String() != want {
		t.Fatalf("the terminal printed %q, want %q", out.String(), want)
	}
}
