package bench

import (
	"slices"
	"strings"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
	"github.com/agentd/agentd/window"
)

// Why a chat request did not start with the whole request before it.
const (
	BreakFold        = "fold"
	BreakTools       = "tools changed"
	BreakStub        = "stub"
	BreakMemoryMap   = "memory map" // the system prompt changed
	BreakModelSwitch = "model switch"
	BreakOther       = "other"
)

// CacheFigures are what the provider served from its prompt cache, by the
// fake's count of its rule (testkit.PromptCache: OpenAI's here).
type CacheFigures struct {
	// PerRequest holds [cached, uncached] input tokens of each chat
	// request, in Sawtooth's order.
	PerRequest    [][2]int `json:"per_request"`
	ChatInput     int      `json:"chat_input_tokens"`
	ChatCached    int      `json:"chat_cached_tokens"`
	SummaryInput  int      `json:"summary_input_tokens"`
	SummaryCached int      `json:"summary_cached_tokens"`
	LearnInput    int      `json:"learn_input_tokens"`
	LearnCached   int      `json:"learn_cached_tokens"`
	// Breaks counts chat requests that did not start with the whole chat
	// request before them, by the first difference.
	Breaks map[string]int `json:"breaks"`
	// BreakUncached is the uncached input of those requests, by reason.
	BreakUncached map[string]int `json:"break_uncached_tokens"`
}

// ChatShare is the part of chat input served from the cache.
func (c CacheFigures) ChatShare() float64 { return share(c.ChatCached, c.ChatInput) }

// BackgroundShare is the part of the summariser's and learner's input
// served from the cache.
func (c CacheFigures) BackgroundShare() float64 {
	return share(c.SummaryCached+c.LearnCached, c.SummaryInput+c.LearnInput)
}

func share(part, whole int) float64 {
	if whole == 0 {
		return 0
	}
	return round3(float64(part) / float64(whole))
}

// breakReason says why cur does not start with all of prev ("" when it
// does): the first thing that differs, in the order the prompt is read.
func breakReason(prev, cur *testkit.Received) string {
	switch {
	case prev.Model != cur.Model:
		return BreakModelSwitch
	case prev.System != cur.System:
		return BreakMemoryMap
	case !slices.Equal(prev.Tools, cur.Tools):
		return BreakTools
	}
	for i := range prev.Messages {
		if i < len(cur.Messages) && sameMessage(&prev.Messages[i], &cur.Messages[i]) {
			continue
		}
		switch {
		case i == 0 || i >= len(cur.Messages) || strings.Contains(cur.Messages[i].Content, window.SummaryOpen):
			return BreakFold
		case cur.Messages[i].Role == chat.RoleTool && strings.Contains(cur.Messages[i].Content, "stubbed"):
			return BreakStub
		}
		return BreakOther
	}
	return ""
}

func sameMessage(a, b *chat.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.Thinking == b.Thinking && a.ToolCallID == b.ToolCallID && slices.Equal(a.ToolCalls, b.ToolCalls)
}
