package summarizer

import (
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentd/agentd/chat"
)

func TestMaskHidesSecretsTheSameWayEveryTime(t *testing.T) {
	cases := map[string]struct{ in, secret string }{
		"openai key":     {"my key is sk-proj-abcdefghijklmnopqrstuvwx ok", "sk-proj-abcdefghijklmnopqrstuvwx"},
		"anthropic key":  {"use sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA", "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA"},
		"aws":            {"AKIAIOSFODNN7EXAMPLE is the id", "AKIAIOSFODNN7EXAMPLE"},
		"github":         {"token ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_abcdefghijklmnopqrstuvwxyz0123"},
		"password":       {"the password is hunter2!!", "hunter2!!"},
		"url credential": {"postgres://bob:s3cretpw@db/x", "s3cretpw"},
		"bearer":         {"Authorization: Bearer abcdefghijklmnopqrstu", "abcdefghijklmnopqrstu"},
		"private key":    {"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			once := Mask(tc.in)
			if strings.Contains(once, tc.secret) {
				t.Fatalf("secret survived: %q", once)
			}
			if !strings.Contains(once, "[secret:") {
				t.Fatalf("no placeholder: %q", once)
			}
			if twice := Mask(once); twice != once {
				t.Fatalf("masking again changed it: %q → %q", once, twice)
			}
			if Mask(tc.in) != once {
				t.Fatal("the same secret masked two ways")
			}
		})
	}
}

func TestMaskIsIdempotent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringMatching(`(my (password|token|key) (is|=|:) [a-zA-Z0-9!]{4,20} |sk-[a-zA-Z0-9]{16,30} |plain words |\[secret:api-key:0a1b2c\] )*`).Draw(t, "text")
		once := Mask(s)
		if Mask(once) != once {
			t.Fatalf("Mask(Mask(%q)) != Mask", s)
		}
	})
}

func TestLinesReadAsPlainLinesWithoutThinking(t *testing.T) {
	lines := Lines([]chat.Message{
		{Role: chat.RoleUser, Content: "hi", Images: []chat.Image{{}}},
		{Role: chat.RoleAssistant, Content: "calling", Thinking: "secret plan", ToolCalls: []chat.ToolCall{{Name: "calc", Arguments: `{"x":1}`}}},
		{Role: chat.RoleTool, ToolName: "calc", Content: "1"},
	})
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
