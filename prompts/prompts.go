// Package prompts builds the system prompt of a chat's requests: the full
// one, and the lean one for small windows (seed 0086 §2) — the words before
// the first heading, who the assistant is, who the person is, what it
// remembers and what it can do, each within a size, plus how to load tools.
// It is pure: the memory map comes in through a function.
package prompts

import (
	_ "embed"
	"strings"
)

//go:embed default.md
var defaultBase string

// Section headings of the base prompt that lean mode keeps, with the most
// characters each may take.
var leanSections = []struct {
	heading string
	max     int
}{
	{"Who you are", 400},
	{"The person", 300},
	{"What you can do", 500},
}

const (
	leanIntroMax  = 600
	leanMemoryMax = 600
)

// FindToolsParagraph tells a lean model how to load tools.
const FindToolsParagraph = "You start with one tool, find_tools. When you need to do something you have no tool for " +
	"(remember a fact, read a web page, look at a file, ...), call find_tools with a few words saying what you want; " +
	"the best tools are loaded and you can call them next. Never say you did something a tool does without calling it."

// Builder builds system prompts. Its fields are read-only once built.
type Builder struct {
	// Base is the full prompt, markdown with "## " headings. Empty: the default.
	Base string
	// MemoryMap returns a tenant's compact memory map (byte-stable for a day).
	MemoryMap func(tenant string) string
}

func (b *Builder) base() string {
	if strings.TrimSpace(b.Base) == "" {
		return defaultBase
	}
	return b.Base
}

// System returns the system prompt for a tenant's chat, full or lean.
func (b *Builder) System(tenant string, lean bool) string {
	memory := ""
	if b.MemoryMap != nil {
		memory = strings.TrimSpace(b.MemoryMap(tenant))
	}
	if !lean {
		out := strings.TrimSpace(b.base())
		if memory != "" {
			out += "\n\n## What you remember\n" + memory
		}
		return out
	}
	intro, sections := split(b.base())
	parts := []string{clip(intro, leanIntroMax)}
	for _, s := range leanSections {
		if text, ok := sections[s.heading]; ok {
			parts = append(parts, "## "+s.heading+"\n"+clip(text, s.max))
		}
	}
	if memory != "" {
		parts = append(parts, "## What you remember\n"+clip(memory, leanMemoryMax))
	}
	parts = append(parts, "## Tools\n"+FindToolsParagraph)
	return strings.Join(parts, "\n\n")
}

// split returns the text before the first heading and each "## " section.
func split(md string) (string, map[string]string) {
	sections := map[string]string{}
	intro, rest, _ := strings.Cut(md, "\n## ")
	if strings.HasPrefix(md, "## ") {
		intro, rest = "", strings.TrimPrefix(md, "## ")
	}
	for _, block := range strings.Split(rest, "\n## ") {
		heading, body, _ := strings.Cut(block, "\n")
		if heading = strings.TrimSpace(heading); heading != "" {
			sections[heading] = strings.TrimSpace(body)
		}
	}
	return strings.TrimSpace(intro), sections
}

// clip keeps at most max bytes, ending at a sentence or word where it can.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := s[:max]
	if i := strings.LastIndexAny(cut, ".!?\n"); i > max/2 {
		return cut[:i+1]
	}
	if i := strings.LastIndexByte(cut, ' '); i > 0 {
		cut = cut[:i]
	}
	return cut + "…"
}
