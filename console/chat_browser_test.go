package console_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/eventbus"
	"github.com/agentd/agentd/testkit"
)

// streamWatch records, in the page, every answer that streamed in: the text
// of each streaming bubble as it leaves (replaced by the stored message).
const streamWatch = `(() => {
  window.__streamed = [];
  new MutationObserver((muts) => {
    for (const m of muts) for (const n of m.removedNodes)
      if (n.classList && n.classList.contains("streaming")) window.__streamed.push(n.querySelector(".text").textContent);
  }).observe(document.getElementById("transcript"), {childList: true});
  return true;
})()`

func TestBrowserSendAMessageAndSeeItStream(t *testing.T) {
	r := newRig(t, rigOptions{window: 32000})
	ctx := context.Background()
	c, err := r.d.Client.CreateChat(ctx, api.CreateChatRequest{Title: "Tea for the team"})
	if err != nil {
		t.Fatal(err)
	}
	r.open("#/chats/" + c.ID)
	r.until("the watch stream", `document.querySelector("#live").dataset.live === "true"`)
	eval[bool](r, streamWatch)

	// Shift+Enter is a new line, Enter sends.
	r.do("type a two-line message",
		chromedp.SendKeys(chromedp.CSS("#composer-input"), "line one"),
		pressEnter(true),
		chromedp.SendKeys(chromedp.CSS("#composer-input"), "line two"))
	if v := eval[string](r, `document.querySelector("#composer-input").value`); v != "line one\nline two" {
		t.Fatalf("after Shift+Enter the box holds %q", v)
	}
	r.do("send with Enter", pressEnter(false))
	r.until("the stored answer", `document.querySelector('#transcript article.msg[data-seq="2"]') !== null`)

	want := "You said: line one\nline two"
	got := eval[string](r, `document.querySelector('#transcript article.msg[data-seq="2"] .text').textContent`)
	if got != want {
		t.Fatalf("answer shown as %q, want %q", got, want)
	}
	// The same words arrived delta by delta before the stored message replaced them.
	streamed := eval[[]string](r, `window.__streamed`)
	if len(streamed) != 1 || streamed[0] != want {
		t.Fatalf("streamed bubbles %q, want one holding %q", streamed, want)
	}
	if v := eval[string](r, `document.querySelector("#composer-input").value`); v != "" {
		t.Fatalf("the box still holds %q after sending", v)
	}

	// A tool round: the call and its result are shown, collapsed.
	r.do("ask for a calculation",
		chromedp.SendKeys(chromedp.CSS("#composer-input"), "please calculate six times seven"),
		pressEnter(false))
	// The stored answer (it has a seq), not the streamed bubble it replaces.
	r.until("the tool round's stored answer", `[...document.querySelectorAll("#transcript article.msg")].some(e => Number(e.dataset.seq) > 0 && (e.querySelector(".text") || {}).textContent === "The result is 42.")`)

	// What the page shows is the transcript, untouched: every message once, in
	// seq order, with its content.
	msgs, err := r.d.Client.Transcript(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	shown := eval[[]struct {
		Seq  int64  `json:"seq"`
		Role string `json:"role"`
		Text string `json:"text"`
		Open bool   `json:"open"`
	}](r, `[...document.querySelectorAll("#transcript article.msg")].map(e => ({
	    seq: Number(e.dataset.seq), role: [...e.classList].find(c => c.startsWith("role-")).slice(5),
	    text: (e.querySelector(".text, .tool-result pre") || {textContent: ""}).textContent,
	    open: [...e.querySelectorAll("details")].some(d => d.open)}))`)
	if len(shown) != len(msgs) {
		t.Fatalf("page shows %d messages, the transcript has %d: %+v", len(shown), len(msgs), shown)
	}
	for i, m := range msgs {
		s := shown[i]
		if s.Seq != m.Seq || s.Role != string(m.Role) || s.Text != m.Content {
			t.Fatalf("message %d shown as %+v, stored as seq %d %s %q", i, s, m.Seq, m.Role, m.Content)
		}
		if s.Open {
			t.Fatalf("message %d shows its tool details open; they start collapsed", m.Seq)
		}
	}
	if n := eval[int](r, `document.querySelectorAll("#transcript details.tool-call").length`); n != 1 {
		t.Fatalf("%d tool-call details, want 1", n)
	}
	r.do("open the tool result", chromedp.Click(chromedp.CSS("#transcript details.tool-result summary")))
	if v := eval[string](r, `document.querySelector("#transcript details.tool-result pre").textContent`); v != "42" {
		t.Fatalf("tool result shows %q", v)
	}

	// A turn sent by someone else (another client) streams in through the watch.
	if _, err := r.d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "from another tab"}, nil); err != nil {
		t.Fatal(err)
	}
	r.until("the other client's answer", `[...document.querySelectorAll("#transcript .msg .text")].some(e => e.textContent === "You said: from another tab")`)

	// The context view reflects the requests made.
	view, err := r.d.Client.Context(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	r.until("the requests chart", `document.querySelectorAll("#requests-chart rect.bar-estimate").length === `+itoa(len(view.RecentRequests)))
	r.shoot("console-chat-stream.png", "")
	r.shoot("console-context.png", "#context")
}

func TestBrowserFoldShowsOneSummaryLineThatOpens(t *testing.T) {
	r := newRig(t, rigOptions{window: 32000})
	ctx := context.Background()
	c := r.openTeaChat("Planning the team tea")
	if n := eval[int](r, `document.querySelectorAll(".summary-line").length`); n != 0 {
		t.Fatalf("%d summary lines before any fold", n)
	}

	// /compact [what to keep] in the message box folds all but the newest turn.
	r.do("compact from the message box",
		chromedp.SendKeys(chromedp.CSS("#composer-input"), "/compact the number of cups"),
		pressEnter(false))
	r.until("the summary line", `document.querySelector("#summary-line") !== null`)
	view, err := r.d.Client.Context(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if view.FirstKeptSeq != 5 {
		t.Fatalf("first kept seq %d after /compact of three turns, want 5 (the newest turn kept)", view.FirstKeptSeq)
	}
	checkSummaryLine(t, r, view.FirstKeptSeq, "fake/m")
	sawFocus := false
	for _, req := range r.fake.Requests() {
		if strings.Contains(req.System, "running summary") || strings.Contains(req.System, "the number of cups") {
			for _, m := range req.Messages {
				sawFocus = sawFocus || strings.Contains(m.Content, "the number of cups")
			}
			sawFocus = sawFocus || strings.Contains(req.System, "the number of cups")
		}
	}
	if !sawFocus {
		t.Fatal("the summariser never saw the focus typed after /compact")
	}
	// Nothing was sent as a message: /compact is a command.
	if msgs, _ := r.d.Client.Transcript(ctx, c.ID); len(msgs) != 6 {
		t.Fatalf("the transcript has %d messages after /compact, want 6", len(msgs))
	}

	// The line opens to the summary the model reads.
	r.do("open the summary", chromedp.Click(chromedp.CSS("#summary-line summary")))
	r.until("the summary text", `document.querySelector("#summary-line").open`)
	if got := eval[string](r, `document.querySelector("#summary-line .summary-text").textContent`); got != fakeSummary {
		t.Fatalf("summary shows %q, want the model's summary %q", got, fakeSummary)
	}

	// In-turn compaction and healing, as the session announces them.
	turn := "turn-cards"
	r.d.Hub.Bus().Publish(eventbus.Event{Type: chat.EventCompactionStarted, ChatID: c.ID, TurnID: turn, Data: map[string]int{"targets": 3}})
	r.until("the pulsing card", `document.querySelector(".card.compaction.pulsing") !== null`)
	r.shoot("console-compacting.png", ".card.compaction.pulsing")
	r.d.Hub.Bus().Publish(eventbus.Event{Type: chat.EventCompactionApplied, ChatID: c.ID, TurnID: turn,
		Data: chat.CompactionApplied{Targets: 3, TokensBefore: 9100, TokensAfter: 2300, TokensSaved: 6800, DurationMS: 1840}})
	r.until("the applied card", `document.querySelector(".card.compaction.applied") !== null`)
	if n := eval[int](r, `document.querySelectorAll(".card.compaction.pulsing").length`); n != 0 {
		t.Fatal("the pulsing card stayed after compaction.applied; it must be replaced")
	}
	card := eval[string](r, `document.querySelector(".card.compaction.applied").textContent`)
	for _, want := range []string{"Targets3", "6,800 (9,100 → 2,300)", "1.8 s"} {
		if !strings.Contains(card, want) {
			t.Fatalf("applied card %q lacks %q", card, want)
		}
	}
	r.d.Hub.Bus().Publish(eventbus.Event{Type: chat.EventHealed, ChatID: c.ID, TurnID: turn, Data: chat.Healed{Model: "fake/m", WindowLearnt: 8192, FirstKeptSeq: 5}})
	r.until("the healed note", `document.querySelector(".note.healed") !== null`)
	if got := eval[string](r, `document.querySelector(".note.healed").textContent`); !strings.Contains(got, "fake/m") || !strings.Contains(got, "8,192") {
		t.Fatalf("healed note %q", got)
	}

	// A second fold moves the line; still only one shows, in front of the
	// new first kept message.
	r.do("one more turn", chromedp.SendKeys(chromedp.CSS("#composer-input"), "Make it twelve cups."), pressEnter(false))
	r.until("its answer", `document.querySelector('#transcript article.msg[data-seq="8"]') !== null`)
	if err := r.d.Client.Post(ctx, "/v1/chats/"+c.ID+"/compact", map[string]string{}, &api.Compacted{}); err != nil {
		t.Fatal(err)
	}
	r.until("the line to move", `document.querySelector("#summary-line").dataset.firstKept === "7"`)
	checkSummaryLine(t, r, 7, "fake/m")
	r.do("open the summary again", chromedp.Click(chromedp.CSS("#summary-line summary")))
	r.shoot("console-chat.png", "")
}

// openTeaChat makes a chat of three turns about tea and opens it in the
// console, once its six messages are shown.
func (r *rig) openTeaChat(title string) api.Chat {
	r.t.Helper()
	ctx := context.Background()
	c, err := r.d.Client.CreateChat(ctx, api.CreateChatRequest{Title: title})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, text := range []string{"We need tea for the team meeting on Friday.", "Green tea, brewed at 80 °C.", "How many cups for twelve people?"} {
		if _, err := r.d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: text}, nil); err != nil {
			r.t.Fatal(err)
		}
	}
	r.open("#/chats/" + c.ID)
	r.until("the transcript", `document.querySelectorAll("#transcript article.msg").length === 6`)
	return c
}

// checkSummaryLine asserts exactly one quiet line, saying who it is for,
// right in front of the first message the model reads word for word.
func checkSummaryLine(t *testing.T, r *rig, firstKept int64, model string) {
	t.Helper()
	if n := eval[int](r, `document.querySelectorAll(".summary-line").length`); n != 1 {
		t.Fatalf("%d summary lines, want exactly one", n)
	}
	if got := eval[string](r, `document.querySelector("#summary-line > summary").textContent`); got != "Earlier messages are summarised for "+model {
		t.Fatalf("summary line says %q", got)
	}
	next := eval[string](r, `document.querySelector("#summary-line").nextElementSibling.dataset.seq`)
	if next != itoa(int(firstKept)) {
		t.Fatalf("the line sits before message %s, want %d", next, firstKept)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestBrowserAReasoningCutAndTriedAgainIsShownOnce: an answer cut while the
// model reasoned is asked again (thinking.reset); the streaming bubble
// shows the retry's reasoning alone, not the first try's spliced before it.
func TestBrowserAReasoningCutAndTriedAgainIsShownOnce(t *testing.T) {
	var calls atomic.Int32
	r := newRig(t, rigOptions{window: 32000, script: func(rc testkit.Received) testkit.Reply {
		if rc.Messages[len(rc.Messages)-1].Content != "think it over" {
			return script(rc)
		}
		if calls.Add(1) == 1 {
			// The role chunk and two pieces of reasoning, then the cut.
			return testkit.Reply{Thinking: "First I weigh it.", Text: "Never sent.", ChunkRunes: 5, CutAfterChunks: 3}
		}
		return testkit.Reply{Thinking: "A second thought.", Text: "Said once.", ChunkRunes: 5}
	}})
	ctx := context.Background()
	c, err := r.d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r.open("#/chats/" + c.ID)
	r.until("the watch stream", `document.querySelector("#live").dataset.live === "true"`)
	// The reasoning of each streaming bubble as it leaves.
	eval[bool](r, `(() => {
  window.__thought = [];
  new MutationObserver((muts) => {
    for (const m of muts) for (const n of m.removedNodes)
      if (n.classList && n.classList.contains("streaming")) window.__thought.push(n.querySelector(".thinking pre").textContent);
  }).observe(document.getElementById("transcript"), {childList: true});
  return true;
})()`)
	r.do("send", chromedp.SendKeys(chromedp.CSS("#composer-input"), "think it over"), pressEnter(false))
	r.until("the stored answer", `document.querySelector('#transcript article.msg[data-seq="2"]') !== null`)
	if n := calls.Load(); n != 2 {
		t.Fatalf("the model was asked %d times, want 2", n)
	}
	if got := eval[[]string](r, `window.__thought`); len(got) != 1 || got[0] != "A second thought." {
		t.Fatalf("the streaming bubble's reasoning %q; want the retry's alone", got)
	}
}

// TestBrowserMarksARefusedAnswer: an answer the provider refused shows its
// words with a mark saying so (the transcript's refused field), live and
// read back; an answer that was not refused has none.
func TestBrowserMarksARefusedAnswer(t *testing.T) {
	r := newRig(t, rigOptions{window: 32000})
	ctx := context.Background()
	c, err := r.d.Client.CreateChat(ctx, api.CreateChatRequest{Title: "Refusals"})
	if err != nil {
		t.Fatal(err)
	}
	r.open("#/chats/" + c.ID)
	r.until("the watch stream", `document.querySelector("#live").dataset.live === "true"`)
	for _, text := range []string{"A forbidden question.", "A fine question."} {
		if _, err := r.d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: text}, nil); err != nil {
			t.Fatal(err)
		}
	}
	const marks = `[...document.querySelectorAll("#transcript article.msg")].filter(e => e.querySelector(".refused")).map(e => Number(e.dataset.seq))`
	check := func(when string) {
		t.Helper()
		r.until("the answers "+when, `document.querySelector('#transcript article.msg[data-seq="4"]') !== null`)
		if got := eval[[]int](r, marks); len(got) != 1 || got[0] != 2 {
			t.Fatalf("%s: refused marks on messages %v, want on the refused answer (2) only", when, got)
		}
		if text := eval[string](r, `document.querySelector('#transcript article.msg[data-seq="2"] .refused').textContent`); !strings.Contains(text, "Refused by the provider") {
			t.Fatalf("%s: the mark reads %q", when, text)
		}
	}
	check("heard live")
	r.do("reload", chromedp.Reload())
	check("read back")
}

// TestBrowserAnAnswerTakenBackIsShownOnce: an answer Ollama gave to a
// prompt it cut silently streams before agentd can tell, then is taken
// back and asked again (message.reset); the streaming bubble shows the
// retry's answer alone, not the dropped one spliced before it.
func TestBrowserAnAnswerTakenBackIsShownOnce(t *testing.T) {
	const realWindow, question, cut, healed = 4096, "Which note came first? ", "An answer to half the notes.", "An answer to all of them."
	r := newRig(t, rigOptions{window: 16384, ollamaWindow: realWindow, script: func(rc testkit.Received) testkit.Reply {
		switch {
		case rc.InputTokens > realWindow:
			return testkit.Reply{Text: cut, ChunkRunes: 3}
		case strings.Contains(rc.Messages[len(rc.Messages)-1].Content, question):
			// The retry's last message may open with what was folded.
			return testkit.Reply{Text: healed, ChunkRunes: 3}
		}
		return script(rc)
	}})
	ctx := context.Background()
	c, err := r.d.Client.CreateChat(ctx, api.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Notes until the history nears the window Ollama really holds.
	for i := 0; ; i++ {
		res, err := r.d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: words("note"+itoa(i), 150)}, nil)
		if err != nil {
			t.Fatalf("setup: note %d: %v", i, err)
		}
		if res.Usage.InputTokens > realWindow-800 {
			break
		}
		if i > 40 {
			t.Fatal("setup: the history never neared the real window")
		}
	}
	r.open("#/chats/" + c.ID)
	r.until("the watch stream", `document.querySelector("#live").dataset.live === "true"`)
	// The text of each streaming bubble as it leaves.
	eval[bool](r, `(() => {
  window.__said = [];
  new MutationObserver((muts) => {
    for (const m of muts) for (const n of m.removedNodes)
      if (n.classList && n.classList.contains("streaming")) window.__said.push(n.querySelector(".text").textContent);
  }).observe(document.getElementById("transcript"), {childList: true});
  return true;
})()`)
	// Typed key by key, 8,000 characters would take the browser minutes.
	eval[bool](r, `(() => {
  const input = document.getElementById("composer-input");
  input.value = `+js(question+words("last", 1200))+`;
  input.dispatchEvent(new Event("input", {bubbles: true}));
  input.focus();
  return true;
})()`)
	r.do("send", pressEnter(false))
	r.until("the stored answer", fmt.Sprintf(`[...document.querySelectorAll("#transcript article.msg:not(.streaming)")].some((a) => a.textContent.includes(%s))`, js(healed)))
	if got := eval[[]string](r, `window.__said`); len(got) != 1 || got[0] != healed {
		t.Fatalf("the streaming bubble's text %q; want the retry's alone, %q", got, healed)
	}
}

// words is n words tagged every tenth word, as notes to fill a window.
func words(tag string, n int) string {
	w := []string{"river", "stone", "garden", "window", "lantern", "copper", "meadow", "harbor", "violet"}
	var b strings.Builder
	for i := range n {
		if i%10 == 0 {
			fmt.Fprintf(&b, "%s-%d ", tag, i/10)
			continue
		}
		b.WriteString(w[i%9] + " ")
	}
	return b.String()
}
