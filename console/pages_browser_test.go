package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/configs"
	"github.com/agentd/agentd/eventbus"
)

func TestBrowserChatsListAndNewChatWithAModel(t *testing.T) {
	r := newRig(t, rigOptions{window: 32000, edit: func(c *configs.Config) {
		c.Providers[0].Models = append(c.Providers[0].Models, configs.Model{ID: "big", Window: 128000})
	}})
	ctx := context.Background()
	for _, title := range []string{"Tea for the team", "Garden plans"} {
		c, err := r.d.Client.CreateChat(ctx, api.CreateChatRequest{Title: title})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: "hello from " + title}, nil); err != nil {
			t.Fatal(err)
		}
	}
	r.open("#/")
	r.until("the list", `document.querySelectorAll("#chat-list li a").length === 2`)
	r.until("the model picker", `document.querySelectorAll("#new-model option").length === 3`)
	titles := eval[[]string](r, `[...document.querySelectorAll("#chat-list li a")].map(a => a.textContent)`)
	if strings.Join(titles, "|") != "Garden plans|Tea for the team" {
		t.Fatalf("chats listed as %q, want newest first", titles)
	}
	r.shoot("console-chats.png", "")

	// Pick the bigger model and make a chat: the page opens it.
	r.do("fill the form",
		chromedp.SetValue(chromedp.CSS("#new-model"), "fake/big"),
		chromedp.SendKeys(chromedp.CSS("#new-title"), "Big thoughts"),
		chromedp.Click(chromedp.CSS("#new-chat button[type=submit]")))
	r.until("the new chat", `location.hash.startsWith("#/chats/") && document.querySelector("#chat-title").textContent === "Big thoughts"`)
	id := strings.TrimPrefix(eval[string](r, `location.hash`), "#/chats/")
	c, err := r.d.Hub.Chat(ctx, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "fake/big" || c.Title != "Big thoughts" {
		t.Fatalf("created chat %+v", c)
	}
	if got := eval[string](r, `document.activeElement.id`); got != "composer-input" {
		t.Fatalf("focus on %q after opening a chat; the message box should have it", got)
	}

	// Narrow window: the context view stacks under the chat.
	r.do("narrow", chromedp.EmulateViewport(420, 860))
	r.until("the context view", `document.querySelector("#context dl") !== null`)
	stacked := eval[bool](r, `(() => { const c = document.querySelector("#context").getBoundingClientRect();
		const m = document.querySelector(".chat").getBoundingClientRect(); return c.top >= m.bottom - 1 && c.width > 380; })()`)
	if !stacked {
		t.Fatal("below 700px the context view does not stack under the chat")
	}
	if over := eval[bool](r, `document.documentElement.scrollWidth > window.innerWidth`); over {
		t.Fatal("the narrow page scrolls sideways")
	}
	r.shoot("console-narrow.png", "")
}

func TestBrowserAsksForATokenOn401AndKeepsIt(t *testing.T) {
	r := newRig(t, rigOptions{window: 32000, tokens: map[string]string{"s3cret-token": "alice"}})
	r.d.Client.Token = "s3cret-token"
	if _, err := r.d.Client.CreateChat(context.Background(), api.CreateChatRequest{Title: "Alice's chat"}); err != nil {
		t.Fatal(err)
	}
	r.open("#/")
	r.until("the token form", `!document.querySelector("#auth").hidden && document.activeElement.id === "token-input"`)
	r.do("enter the token",
		chromedp.SendKeys(chromedp.CSS("#token-input"), "s3cret-token"),
		pressEnter(false))
	r.until("the chats", `[...document.querySelectorAll("#chat-list li a")].some(a => a.textContent === "Alice's chat")`)
	if !eval[bool](r, `document.querySelector("#auth").hidden`) {
		t.Fatal("the token form stayed open after a good token")
	}
	if got := eval[string](r, `localStorage.getItem("agentd.token")`); got != "s3cret-token" {
		t.Fatalf("stored token %q", got)
	}
	// A reload uses the kept token without asking.
	r.open("#/")
	r.until("the chats again", `document.querySelectorAll("#chat-list li a").length === 1`)
	if !eval[bool](r, `document.querySelector("#auth").hidden`) {
		t.Fatal("the token form showed although a good token was kept")
	}
}

func TestBrowserTooLongOffersANewChatOrTheBiggerModel(t *testing.T) {
	// The fake reads far less than the config says, so every request is
	// refused for length, healing fails, and the turn ends with a too-long
	// problem. Every model of the fake is on this computer and none is
	// loaded, so the next step is a new chat carrying the message.
	r := newRig(t, rigOptions{window: 32000, fakeWindow: 500, edit: func(c *configs.Config) {
		c.Providers[0].Models = append(c.Providers[0].Models, configs.Model{ID: "big", Window: 128000})
	}})
	ctx := context.Background()
	c, err := r.d.Client.CreateChat(ctx, api.CreateChatRequest{Title: "Too long"})
	if err != nil {
		t.Fatal(err)
	}
	r.open("#/chats/" + c.ID)
	r.until("the watch stream", `document.querySelector("#live").dataset.live === "true"`)
	const words = "Please read all of this."
	r.do("send", chromedp.SendKeys(chromedp.CSS("#composer-input"), words), pressEnter(false))
	r.until("the problem card", `document.querySelector(".card.problem.too-long button.next-step") !== null`)
	if got := eval[string](r, `document.querySelector(".card.problem.too-long button.next-step").textContent`); got != "Start a new chat with this message" {
		t.Fatalf("next step offered as %q", got)
	}
	r.shoot("console-too-long.png", ".card.problem.too-long")
	r.do("take the next step", chromedp.Click(chromedp.CSS(".card.problem.too-long button.next-step")))
	r.until("the new chat", `location.hash !== "#/chats/`+c.ID+`" && document.querySelector("#composer-input") !== null && document.querySelector("#composer-input").value === `+js(words))
	id := strings.TrimPrefix(eval[string](r, `location.hash`), "#/chats/")
	if _, err := r.d.Hub.Chat(ctx, "default", id); err != nil {
		t.Fatalf("the new chat %s: %v", id, err)
	}

	// Where a bigger model is ready, the card offers it: one PATCH, and the
	// person's words go back in the box to send again.
	r.open("#/chats/" + c.ID)
	r.until("the watch stream", `document.querySelector("#live").dataset.live === "true"`)
	r.d.Hub.Bus().Publish(eventbus.Event{Type: chat.EventTurnStarted, ChatID: c.ID, TurnID: "t-switch", Data: map[string]int64{"user_seq": 1}})
	r.d.Hub.Bus().Publish(eventbus.Event{Type: chat.EventTurnProblem, ChatID: c.ID, TurnID: "t-switch", Data: chat.Problem{Kind: chat.ProblemTooLong,
		Message: "this message does not fit", NextStep: &chat.NextStep{Action: "switch-model", Model: "fake/big", Window: 128000}}})
	// The first turn's card comes back from the activity log as well, before
	// or after this one as the page's reads and the events race: click the
	// switch by what it says, not by where it sits.
	const switchButton = `[...document.querySelectorAll(".card.problem.too-long button.next-step")].find(b => b.textContent === "Switch to fake/big (128,000 tokens)")`
	r.until("the switch button", switchButton+` !== undefined`)
	r.do("switch", chromedp.Click(chromedp.JSPath(switchButton)))
	r.until("the model switch", `document.querySelector("#chat-model").value === "fake/big"`)
	got, err := r.d.Hub.Chat(ctx, "default", c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Model != "fake/big" {
		t.Fatalf("chat model %q after the switch", got.Model)
	}
	if v := eval[string](r, `document.querySelector("#composer-input").value`); v != words {
		t.Fatalf("the box holds %q; it should carry the message to send again", v)
	}
}

// TestBrowserShowsATenantsMarkupAsText: a title, a message and the model's
// answer carry markup (text from models and web pages does); the page
// shows it as written and runs none of it.
func TestBrowserShowsATenantsMarkupAsText(t *testing.T) {
	r := newRig(t, rigOptions{window: 32000})
	ctx := context.Background()
	const markup = `<img src=x onerror="window.__ran=1"><script>window.__ran=2</script><b>bold</b>`
	c, err := r.d.Client.CreateChat(ctx, api.CreateChatRequest{Title: markup})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.d.Client.Send(ctx, c.ID, api.SendMessageRequest{Content: markup}, nil); err != nil {
		t.Fatal(err)
	}
	r.open("#/")
	r.until("the list", `document.querySelectorAll("#chat-list li a").length === 1`)
	if got := eval[string](r, `document.querySelector("#chat-list li a").textContent`); got != markup {
		t.Fatalf("the title is listed as %q, want it as written", got)
	}
	r.open("#/chats/" + c.ID)
	r.until("the answer", `document.querySelector('#transcript article.msg[data-seq="2"]') !== null`)
	if got := eval[string](r, `document.querySelector("#chat-title").textContent`); got != markup {
		t.Fatalf("the title is shown as %q, want it as written", got)
	}
	if got := eval[string](r, `document.querySelector('#transcript article.msg[data-seq="2"] .text').textContent`); got != "You said: "+markup {
		t.Fatalf("the answer is shown as %q, want it as written", got)
	}
	if n := eval[int](r, `document.querySelectorAll("main img, main script, main b").length`); n != 0 {
		t.Fatalf("%d elements made of a tenant's text", n)
	}
	if ran := eval[bool](r, `window.__ran !== undefined`); ran {
		t.Fatal("the page ran a tenant's markup")
	}
}
