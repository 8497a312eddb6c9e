package oai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/httpapi/oai"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/ollamafake"
)

const (
	// realWindow is what the Ollama fake holds, told a bigger one: it cuts
	// a longer prompt silently and answers it (cutAnswer), status 200.
	realWindow, toldWindow = 4096, 16384
	cutAnswer              = "An answer to half the notes."
	healedAnswer           = "An answer to all of them."
)

// silentlyCut starts a daemon on the Ollama fake: a prompt over
// realWindow is cut and answered cutAnswer, streamed, which agentd sees
// was cut only once it ended (prompt_eval_count), and heals; a prompt that
// fits is answered healedAnswer.
func silentlyCut(t *testing.T) *daemontest.Daemon {
	t.Helper()
	fake := ollamafake.New(ollamafake.Options{Window: realWindow, Script: func(r testkit.Received) testkit.Reply {
		if r.InputTokens > realWindow {
			return testkit.Reply{Text: cutAnswer}
		}
		return testkit.Reply{Text: healedAnswer}
	}, Models: []ollamafake.ModelEntry{{Name: "m", Size: 2 << 30, Family: "llama", Capabilities: []string{"completion", "tools"},
		ModelInfo: map[string]any{"general.architecture": "llama", "llama.context_length": realWindow}}}})
	t.Cleanup(fake.Close)
	cfg, err := daemontest.ConfigFor("ollama", t.TempDir(), fake.URL(), toldWindow)
	if err != nil {
		t.Fatal(err)
	}
	return daemontest.Start(t, cfg, map[string]string{"tok-a": "a"})
}

// cutHistory is a conversation the told window takes whole and the real
// one cannot: user and assistant turns, then a long question.
func cutHistory() []map[string]string {
	var h []map[string]string
	for i := range 24 {
		h = append(h, map[string]string{"role": "user", "content": note(fmt.Sprintf("note%d", i), 150)},
			map[string]string{"role": "assistant", "content": "Noted."})
	}
	return append(h, map[string]string{"role": "user", "content": "Which note came first? " + note("last", 1200)})
}

func note(tag string, words int) string {
	w := []string{"river", "stone", "garden", "window", "lantern", "copper", "meadow", "harbor", "violet"}
	var b strings.Builder
	for i := range words {
		if i%10 == 0 {
			fmt.Fprintf(&b, "%s-%d ", tag, i/10)
			continue
		}
		b.WriteString(w[i%9] + " ")
	}
	return b.String()
}

// TestChatCompletionsAnAnswerTakenBackEndsAtABreak: an answer Ollama gave
// to a prompt it cut silently is streamed before agentd can tell, then
// taken back and asked again (message.reset). The wire cannot take text
// back: the stream marks where the answer taken back ends
// (oai.AnswerBreak) and the retry's follows, where the two ran together
// as one answer.
func TestChatCompletionsAnAnswerTakenBackEndsAtABreak(t *testing.T) {
	d := silentlyCut(t)
	body, _ := json.Marshal(map[string]any{"model": "fake/m", "stream": true, "messages": cutHistory()})
	req, _ := http.NewRequest(http.MethodPost, d.Server.URL+"/v1/chat/completions", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer tok-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("chat completions: %v %v", err, resp)
	}
	defer resp.Body.Close()
	trace, _ := chatDeltas(t, resp.Body)
	var content strings.Builder
	for _, line := range trace {
		if text, ok := strings.CutPrefix(line, "c:"); ok {
			content.WriteString(text)
		}
	}
	if want := cutAnswer + oai.AnswerBreak + healedAnswer; content.String() != want {
		t.Fatalf("streamed content %q, want %q", content.String(), want)
	}
}

// TestResponsesAnAnswerTakenBackEndsAtABreak: the same on Responses: the
// deltas mark where the answer taken back ends, and the text's .done event
// and the final response hold the retry's answer alone, as stored.
func TestResponsesAnAnswerTakenBackEndsAtABreak(t *testing.T) {
	d := silentlyCut(t)
	sdk := sdkFor(d, "tok-a")
	ctx := context.Background()
	// Responses keeps the history itself: the notes go one response each,
	// on a chain, until the history nears the real window.
	var prev string
	for i := 0; ; i++ {
		p := responses.ResponseNewParams{Model: "fake/m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(note(fmt.Sprintf("note%d", i), 150))}}
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		r, err := sdk.Responses.New(ctx, p)
		if err != nil || r.OutputText() != healedAnswer {
			t.Fatalf("setup: note %d answered %v", i, err)
		}
		prev = r.ID
		if r.Usage.InputTokens > realWindow-800 {
			break
		}
		if i > 40 {
			t.Fatal("setup: the history never neared the real window")
		}
	}
	hist := cutHistory()
	stream := sdk.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "fake/m", PreviousResponseID: openai.String(prev),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(hist[len(hist)-1]["content"])}})
	var deltas strings.Builder
	var done []string
	var final responses.Response
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.output_text.done":
			done = append(done, ev.Text)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		var e *openai.Error
		if errors.As(err, &e) {
			t.Fatalf("%v: %s", err, e.RawJSON())
		}
		t.Fatal(err)
	}
	if want := cutAnswer + oai.AnswerBreak + healedAnswer; deltas.String() != want {
		t.Fatalf("deltas %q, want %q", deltas.String(), want)
	}
	if len(done) != 1 || done[0] != healedAnswer || final.OutputText() != healedAnswer {
		t.Fatalf("text done %q, final %q; want the retry's answer alone", done, final.OutputText())
	}
}
