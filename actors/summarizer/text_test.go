package summarizer

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/fairshare"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/redact"
)

// fakeSummariser records each prompt and answers with a fixed summary.
type fakeSummariser struct {
	mu      sync.Mutex
	prompts []string
}

func (f *fakeSummariser) Stream(_ context.Context, req providers.Request, _ func(providers.Event)) (providers.Response, error) {
	f.mu.Lock()
	f.prompts = append(f.prompts, req.Messages[len(req.Messages)-1].Content)
	f.mu.Unlock()
	return providers.Response{Message: chat.Message{Role: chat.RoleAssistant, Content: "What the person wants: tea."}}, nil
}

func (f *fakeSummariser) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

type oneModel struct{ c providers.Client }

func (o oneModel) Resolve(string) (providers.Client, providers.ModelInfo, error) {
	return o.c, providers.ModelInfo{ID: "m", Window: 32_000}, nil
}
func (oneModel) SummaryModels(ref string) []string                     { return []string{ref} }
func (oneModel) Learn(_ context.Context, _ string, w int) (int, error) { return w, nil }

// The whole summarising prompt goes through one masker: the summary so far,
// the /compact focus and the folded lines, numbered in the prompt's order.
func TestFoldPromptMasksSummaryFocusAndLinesAsOne(t *testing.T) {
	model := &fakeSummariser{}
	cfg := Config{Catalog: oneModel{model}, Log: zerolog.Nop(), CallTimeout: time.Minute}
	fold := &Fold{ChatID: "c", Model: "p/m",
		Summary: "Facts to keep: the vault key is [secret-1].",
		Focus:   "keep the wifi password: Kaffee-Haus_2024",
		Turns: []chat.Message{
			{Role: chat.RoleUser, Content: "my PIN is 4711 and the login is bob / hunter22"},
			{Role: chat.RoleAssistant, Content: "noted PIN 4711"},
		}}
	res := run(context.Background(), cfg, fold, []string{"p/m"}, []lane{newLane(fairshare.NewSlots(1, 1), "t")})
	if !res.OK || len(model.prompts) != 1 {
		t.Fatalf("fold: ok=%v, %d prompts, err %q", res.OK, len(model.prompts), res.Err)
	}
	prompt := model.prompts[0]
	for _, secret := range []string{"Kaffee-Haus", "4711", "hunter22"} {
		if strings.Contains(prompt, secret) {
			t.Errorf("%q reached the summariser:\n%s", secret, prompt)
		}
	}
	for _, want := range []string{"the vault key is [secret-1]", "keep the wifi password: [secret-2]", "my PIN is [secret-3]", "bob / [secret-4]", "noted PIN [secret-3]"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
}

func TestDigestKeepsNoSecretAndNoPlaceholderNumber(t *testing.T) {
	d := Digest("", []chat.Message{{Role: chat.RoleUser, Content: "my pin is 9876, order 48213"}})
	if strings.Contains(d, "9876") || !strings.Contains(d, "48213") || !strings.Contains(d, "[secret-1]") {
		t.Fatalf("digest: %q", d)
	}
	if strings.Contains(d, "numbers: 1,") || strings.Contains(d, ", 1\n") || strings.HasSuffix(d, ", 1") {
		t.Fatalf("a placeholder's number became a fact: %q", d)
	}
}

func TestLinesReadAsPlainLinesWithoutThinking(t *testing.T) {
	lines := Lines([]chat.Message{
		{Role: chat.RoleUser, Content: "hi", Images: []chat.Image{{}}},
		{Role: chat.RoleAssistant, Content: "calling", Thinking: "secret plan", ToolCalls: []chat.ToolCall{{Name: "calc", Arguments: `{"x":1}`}}},
		{Role: chat.RoleTool, ToolName: "calc", Content: "1"},
	}, redact.NewMasker())
	want := []string{"Person: hi [a picture]", `Assistant: calling [called calc {"x":1}]`, "Tool result (calc): 1"}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %q, want %q", i, lines[i], want[i])
		}
	}
}

func TestDigestKeepsNumbersPathsAndLinksWithinItsBound(t *testing.T) {
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "Ship order 48213 to /srv/data/orders.csv, see https://example.com/x and ask Ada Lovelace"}}
	d := Digest("", msgs)
	for _, want := range []string{"48213", "/srv/data/orders.csv", "https://example.com/x", "Ada Lovelace", "asked: Ship order"} {
		if !strings.Contains(d, want) {
			t.Errorf("digest lacks %q:\n%s", want, d)
		}
	}
	big := d
	for i := range 500 {
		big = Digest(big, []chat.Message{{Role: chat.RoleUser, Content: strings.Repeat("order 1234 ", 20) + string(rune('a'+i%26))}})
	}
	if len(big) > DigestMaxChars {
		t.Fatalf("digest grew to %d chars", len(big))
	}
}

// A fold of a long backlog keeps the newest whole lines within the bound,
// and a single line over it is cut at a rune, never inside one.
func TestDigestOfALongBacklogKeepsItsNewestLines(t *testing.T) {
	// Letters, not digits, tell the requests apart: a number would go to
	// the numbers line, which comes last and would outgrow the bound alone.
	tag := func(i int) string { return string([]rune{rune('a' + i/676), rune('a' + i/26%26), rune('a' + i%26)}) }
	var msgs []chat.Message
	for i := range 3000 {
		msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: "step " + tag(i) + ": Grüße an Zoë"})
	}
	d := Digest("", msgs)
	if len(d) > DigestMaxChars || !utf8.ValidString(d) {
		t.Fatalf("digest of %d chars, valid UTF-8 %v", len(d), utf8.ValidString(d))
	}
	lines := strings.Split(d, "\n")
	if !strings.HasPrefix(lines[0], "- asked: step ") {
		t.Fatalf("the digest starts inside a line: %q", lines[0])
	}
	if want := "- asked: step " + tag(2999) + ": Grüße an Zoë"; !slices.Contains(lines, want) {
		t.Fatalf("the newest request %q is not kept:\n%s", want, d)
	}
	one := Digest(strings.Repeat("€", DigestMaxChars), nil)
	if len(one) > DigestMaxChars || !utf8.ValidString(one) {
		t.Fatalf("a line over the bound was cut to %d bytes, valid UTF-8 %v", len(one), utf8.ValidString(one))
	}
}

func TestAcceptRefusesWhatIsNotASummary(t *testing.T) {
	cases := map[string]struct {
		text  string
		calls int
		ok    bool
	}{
		"summary":   {"What the person wants: tea.", 0, true},
		"empty":     {"  ", 0, false},
		"refusal":   {"I'm sorry, I can't help with that.", 0, false},
		"tool call": {"x", 1, false},
		"far over":  {strings.Repeat("word ", 20000), 0, false},
	}
	for name, tc := range cases {
		if _, ok := Accept(tc.text, tc.calls); ok != tc.ok {
			t.Errorf("%s: Accept = %v, want %v", name, ok, tc.ok)
		}
	}
}

func TestPiecesFitTheSummarisingWindow(t *testing.T) {
	var lines []string
	for range 400 {
		lines = append(lines, "Person: "+strings.Repeat("long text ", 60))
	}
	for _, w := range []int{8192, 32000} {
		ps := Pieces(lines, w, "")
		if len(ps) < 2 {
			t.Fatalf("window %d: %d pieces for ~100K tokens", w, len(ps))
		}
		n := 0
		for _, p := range ps {
			n += len(p.Lines)
		}
		if n != len(lines) {
			t.Fatalf("window %d: pieces hold %d lines of %d", w, n, len(lines))
		}
	}
}
