package prompts

import (
	"strings"
	"testing"
)

func TestLeanPromptKeepsTheChosenSectionsWithinTheirSizes(t *testing.T) {
	base := "Intro words. " + strings.Repeat("More intro. ", 100) + "\n\n## Who you are\nA helper.\n\n## Routines\n" +
		strings.Repeat("routine guidance ", 200) + "\n\n## The person\nAda.\n\n## What you can do\nTools."
	b := &Builder{Base: base, MemoryMap: func(string) string { return "- likes oolong tea" }}
	lean := b.System("t", true)
	full := b.System("t", false)
	for _, want := range []string{"Intro words.", "## Who you are\nA helper.", "## The person\nAda.", "## What you can do\nTools.", "likes oolong tea", "find_tools"} {
		if !strings.Contains(lean, want) {
			t.Errorf("lean prompt lacks %q", want)
		}
	}
	if strings.Contains(lean, "routine guidance") {
		t.Error("lean prompt kept a section it should leave out")
	}
	if len(lean) > leanIntroMax+400+300+500+leanMemoryMax+len(FindToolsParagraph)+200 {
		t.Errorf("lean prompt is %d bytes", len(lean))
	}
	if !strings.Contains(full, "routine guidance") || !strings.Contains(full, "likes oolong tea") {
		t.Error("full prompt lost its sections or memory map")
	}
}

func TestDefaultPromptCarriesTheFileRule(t *testing.T) {
	full := (&Builder{}).System("t", false)
	if !strings.Contains(full, "Never answer about a file that has not been") {
		t.Fatal("the attachment operating rule is missing from the default prompt")
	}
	if (&Builder{}).System("t", false) != full {
		t.Fatal("the prompt is not byte-stable")
	}
}
