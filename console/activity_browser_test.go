package console_test

// Issue 21 in the console: cards rebuilt from the chat's activity after a
// reload, the transient line of a waiting turn, and the ⌘K palette.

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/eventbus"
	"github.com/agentd/agentd/persistence"
	"github.com/agentd/agentd/testkit/openaifake"
)

func TestBrowserReloadKeepsTheCards(t *testing.T) {
	// The fake reads far less than the config says: the turn ends too long,
	// and the fake's list has a bigger model to switch to.
	r := newRig(t, rigOptions{window: 32000, fakeWindow: 500,
		models: []openaifake.ModelEntry{{ID: "m", Window: 32000, WindowField: "max_model_len"}, {ID: "big", Window: 128000, WindowField: "max_model_len"}},
		edit: func(c *configs.Config) {
			c.Providers[0].Models = append(c.Providers[0].Models, configs.Model{ID: "big", Window: 128000})
		}})
	ctx := context.Background()
	c, err := r.d.Client.CreateChat(ctx, api.CreateChatRequest{Title: "Cards that stay"})
	if err != nil {
		t.Fatal(err)
	}
	// What a long tool turn leaves behind, stored as the session stores it.
	store := r.d.Hub.Store()
	applied, _ := json.Marshal(chat.CompactionApplied{Targets: 3, TokensBefore: 9100, TokensAfter: 2300, TokensSaved: 6800, DurationMS: 1840})
	if _, err := store.AppendActivity(ctx, c.ID, persistence.Activity{Type: chat.EventCompactionApplied, TurnID: "earlier", Data: applied}); err != nil {
		t.Fatal(err)
	}
	r.open("#/chats/" + c.ID)
	r.until("the watch stream", `document.querySelector("#live").dataset.live === "true"`)
	const words = "Please read all of this."
	r.do("send", chromedp.SendKeys(chromedp.CSS("#composer-input"), words), pressEnter(false))
	const switchButton = `[...document.querySelectorAll(".card.problem.too-long button.next-step")].find(b => b.textContent === "Switch to fake/big (128,000 tokens)")`
	r.until("the live problem card", switchButton+` !== undefined`)

	for range 2 { // a reload, and one more: the cards are rebuilt, not added to
		r.do("reload", chromedp.Reload())
		r.until("the console to start", `document.readyState === "complete" && document.querySelector('#transcript article.msg[data-seq="1"]') !== null`)
		r.until("the rebuilt problem card", switchButton+` !== undefined`)
		if n := eval[int](r, `document.querySelectorAll(".card.problem.too-long").length`); n != 1 {
			t.Fatalf("%d too-long cards after the reload, want 1", n)
		}
		// The card follows the message it answers; the compaction card stays.
		if prev := eval[string](r, `document.querySelector(".card.problem.too-long").previousElementSibling.dataset.seq || ""`); prev != "1" {
			t.Fatalf("the card follows %q, want message 1", prev)
		}
		card := eval[string](r, `(document.querySelector(".card.compaction.applied") || {}).textContent || ""`)
		if !strings.Contains(card, "6,800 (9,100 → 2,300)") {
			t.Fatalf("compaction card after the reload: %q", card)
		}
	}
	r.do("switch", chromedp.Click(chromedp.CSS(".card.problem.too-long button.next-step")))
	r.until("the model switch", `document.querySelector("#chat-model").value === "fake/big"`)
	if got, _ := r.d.Hub.Chat(ctx, "default", c.ID); got.Model != "fake/big" {
		t.Fatalf("chat model %q after the switch", got.Model)
	}
	if v := eval[string](r, `document.querySelector("#composer-input").value`); v != words {
		t.Fatalf("the box holds %q; it should carry the message to send again", v)
	}
}

func TestBrowserPaletteCompactsAndAWaitIsShown(t *testing.T) {
	r := newRig(t, rigOptions{window: 32000})
	ctx := context.Background()
	c := r.openTeaChat("Palette")
	r.until("the watch stream", `document.querySelector("#live").dataset.live === "true"`)

	// A turn that waits says so in one transient line, which goes with its next event.
	r.d.Hub.Bus().Publish(eventbus.Event{Type: chat.EventFoldWaiting, ChatID: c.ID, TurnID: "t-wait", Data: chat.Waiting{ElapsedMS: 2400, WaitingFor: chat.WaitingSummary}})
	r.until("the waiting line", `(document.querySelector("#progress") || {}).textContent === "Summarising the start of this chat… 2 s"`)
	r.d.Hub.Bus().Publish(eventbus.Event{Type: chat.EventToolProgress, ChatID: c.ID, TurnID: "t-wait", Data: chat.ToolProgress{Tool: "pdf_search", Message: "searching page 200 of 3000", Done: 200, Total: 3000}})
	r.until("the tool's line", `(document.querySelector("#progress") || {}).textContent === "pdf_search: searching page 200 of 3000 (200 of 3,000)"`)
	if n := eval[int](r, `document.querySelectorAll(".progress").length`); n != 1 {
		t.Fatalf("%d progress lines, want the one", n)
	}
	r.d.Hub.Bus().Publish(eventbus.Event{Type: chat.EventMessageDelta, ChatID: c.ID, TurnID: "t-wait", Data: map[string]string{"text": "Here"}})
	r.until("the line to go", `document.querySelector("#progress") === null`)

	// Ctrl-K, a few letters, Enter: the start of the chat is summarised.
	r.do("open the palette", pressCtrl("k"))
	r.until("the palette", `!document.querySelector("#palette").hidden && document.activeElement.id === "palette-input"`)
	commands := eval[[]string](r, `[...document.querySelectorAll("#palette-list [role=option]")].map(o => o.dataset.command)`)
	for _, want := range []string{"compact", "new-chat", "memories"} {
		if !strings.Contains(strings.Join(commands, " "), want) {
			t.Fatalf("palette offers %v, want %s among them", commands, want)
		}
	}
	r.do("filter", chromedp.SendKeys(chromedp.CSS("#palette-input"), "summ"))
	r.until("one command left", `document.querySelectorAll("#palette-list [role=option]").length === 1 && document.querySelector("#palette-list [role=option]").dataset.command === "compact"`)
	r.do("run it", pressEnter(false))
	r.until("the summary line", `document.querySelector("#summary-line") !== null && document.querySelector("#palette").hidden`)
	if v, _ := r.d.Client.Context(ctx, c.ID); v.FirstKeptSeq != 5 {
		t.Fatalf("first kept seq %d after the palette's compaction, want 5 (the newest turn kept)", v.FirstKeptSeq)
	}
	checkSummaryLine(t, r, 5, "fake/m")

	// Escape closes it without running anything; "New chat" opens one.
	r.do("open again", pressCtrl("k"))
	r.until("the palette", `!document.querySelector("#palette").hidden`)
	r.do("close it", chromedp.KeyEvent("\x1b"))
	r.until("the palette to close", `document.querySelector("#palette").hidden`)
	r.do("open once more", pressCtrl("k"))
	r.until("the palette", `!document.querySelector("#palette").hidden`)
	r.do("new chat", chromedp.SendKeys(chromedp.CSS("#palette-input"), "new chat"), pressEnter(false))
	r.until("the new chat", `location.hash !== "#/chats/`+c.ID+`" && location.hash.startsWith("#/chats/") && document.querySelector("#composer-input") !== null`)
	chats, err := r.d.Hub.Chats(ctx, "default")
	if err != nil || len(chats) != 2 {
		t.Fatalf("%d chats after New chat (%v), want 2", len(chats), err)
	}
	r.shoot("console-palette.png", "")
}

func TestBrowserACardHeardLiveAndReadBackShowsOnce(t *testing.T) {
	// The page hears a turn's problem live while its read of the stored
	// activity, which holds the same problem, is still out: the card shows
	// once, not once for each way in.
	hold := make(chan struct{})
	r := newRig(t, rigOptions{window: 32000, fakeWindow: 500, holdActivity: hold})
	ctx := context.Background()
	c, err := r.d.Client.CreateChat(ctx, api.CreateChatRequest{Title: "Busy"})
	if err != nil {
		t.Fatal(err)
	}
	r.open("#/chats/" + c.ID)
	r.until("the watch stream", `document.querySelector("#live").dataset.live === "true"`)
	if _, err := r.d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "Please read all of this."}, nil); err != nil {
		t.Fatal(err)
	}
	r.until("the live problem card", `document.querySelector(".card.problem.too-long") !== null`)
	page, err := r.d.Client.Activity(ctx, c.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(page.Activity, func(it api.ActivityItem) bool { return it.Type == chat.EventTurnProblem }) {
		t.Fatalf("the stored activity %+v lacks the problem; the page would have nothing to read back", page.Activity)
	}
	close(hold)
	r.until("the stored activity read", `document.querySelector("#transcript").getAttribute("aria-busy") === null`)
	if n := eval[int](r, `document.querySelectorAll(".card.problem.too-long").length`); n != 1 {
		t.Fatalf("%d too-long cards, want 1", n)
	}
}
