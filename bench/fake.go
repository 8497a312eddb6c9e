package bench

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/actors/learner"
	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/testkit"
)

// peerSummaryMarker is a line of LangChain's default summary prompt
// (langchain 1.5.14, dist/agents/middleware/summarization.js); the peer's
// summarising requests carry it in their one user message.
const peerSummaryMarker = "Context Extraction Assistant"

// IsSummaryRequest reports whether a request the fake received is a
// summarising request of agentd (the summariser's system prompt, or the
// chat's own request ending in the summariser's question) or of the peer
// (LangChain's summary prompt).
func IsSummaryRequest(r testkit.Received) bool {
	if r.System == summarizer.Instructions || isPrefixSummary(r) {
		return true
	}
	return len(r.Messages) > 0 && strings.Contains(r.Messages[0].Content, peerSummaryMarker)
}

func isPrefixSummary(r testkit.Received) bool {
	n := len(r.Messages)
	return n > 0 && r.Messages[n-1].Role == chat.RoleUser && strings.HasPrefix(r.Messages[n-1].Content, summarizer.PrefixMark)
}

// IsLearnRequest reports whether a request is agentd's learner asking what
// to remember (its system prompt).
func IsLearnRequest(r testkit.Received) bool { return r.System == learner.Instructions }

// Script answers the replay's turns for both sides alike: a tool turn asks
// for bench_lookup first and answers once its result is back; every other
// turn gets its scripted answer; a summarising request gets the stand-in
// summary of its own text.
func Script(rp *Replay) testkit.Script {
	return func(r testkit.Received) testkit.Reply {
		if IsSummaryRequest(r) {
			read := r.Messages
			if isPrefixSummary(r) {
				read = read[:len(read)-1] // the chat, not the question after it
			}
			var b strings.Builder
			for _, m := range read {
				b.WriteString(m.Content + "\n")
			}
			return testkit.Reply{Text: StandInSummary(b.String()), ChunkRunes: 256}
		}
		if IsLearnRequest(r) {
			var b strings.Builder
			for _, m := range r.Messages {
				b.WriteString(m.Content + "\n")
			}
			return testkit.Reply{Text: StandInMemories(b.String()), ChunkRunes: 256}
		}
		last := len(r.Messages) - 1
		idx := -1
		for i := last; i >= 0 && idx < 0; i-- {
			if r.Messages[i].Role == chat.RoleUser {
				idx = TurnOf(r.Messages[i].Content)
			}
		}
		if idx < 0 || idx >= len(rp.Turns) || last < 0 {
			return testkit.Reply{Text: "OK."}
		}
		t := rp.Turns[idx]
		if t.Kind == "tool" && r.Messages[last].Role == chat.RoleUser {
			args, _ := json.Marshal(map[string]string{"report": t.Report})
			return testkit.Reply{ToolCalls: []chat.ToolCall{{ID: fmt.Sprintf("call_t%d", idx), Name: ToolName, Arguments: string(args)}}}
		}
		return testkit.Reply{Text: t.Answer, ChunkRunes: 64}
	}
}

// SummaryCap is the stand-in summary's size limit, in the fake's tokens.
const SummaryCap = 1000

var (
	tagRe       = regexp.MustCompile(`\[turn \d+\]\s*`)
	rolePrefix  = regexp.MustCompile(`^(?:- |Person: |Assistant: |Human: |AI: |Tool(?: result)?(?: \([^)]*\))?: )+`)
	linkRe      = regexp.MustCompile(`https?://\S+`)
	pathRe      = regexp.MustCompile(`(?:^|\s)(?:/[\w.-]+){2,}`)
	digitsRe    = regexp.MustCompile(`\d{3,}`)
	standingRe  = regexp.MustCompile(`(?i)\b(?:always|never)\b`)
	rememberRe  = regexp.MustCompile(`(?i)\bremember\b|NOTE reference`)
	sentenceEnd = regexp.MustCompile(`([.!?。])\s+`)
)

// StandInSummary is the fake's deterministic summariser, the same for agentd
// and the peer: it keeps the sentences of what it was sent that carry a
// standing instruction ("always", "never"), something to remember, a link,
// a path or a long number, newest kept first when over SummaryCap (standing
// instructions outrank facts, facts outrank bare numbers). It is a stand-in
// so fidelity is measurable without a model, not a model's judgement.
func StandInSummary(text string) string {
	out := keepable(text)
	total := 0
	for _, k := range out {
		total += testkit.CountTokens(k.s) + 1
	}
	if total > SummaryCap {
		// Drop the lowest rank first, oldest first within a rank.
		order := slices.Clone(out)
		slices.SortStableFunc(order, func(a, b kept) int {
			if a.rank != b.rank {
				return b.rank - a.rank
			}
			return a.at - b.at
		})
		drop := map[int]bool{}
		for _, k := range order {
			if total <= SummaryCap {
				break
			}
			drop[k.at] = true
			total -= testkit.CountTokens(k.s) + 1
		}
		out = slices.DeleteFunc(out, func(k kept) bool { return drop[k.at] })
	}
	if len(out) == 0 {
		return "Nothing to keep so far."
	}
	var b strings.Builder
	b.WriteString("Facts and standing instructions:\n")
	for _, k := range out {
		b.WriteString("- " + k.s + "\n")
	}
	return strings.TrimSpace(b.String())
}

// StandInMemories is the fake's deterministic learner, by the same rule:
// the standing instructions and things to remember in the person's words,
// as the JSON array the learner asks for (at most 20).
func StandInMemories(text string) string {
	facts := []string{}
	for _, k := range keepable(text) {
		if k.rank <= 1 && len(facts) < 20 {
			facts = append(facts, k.s)
		}
	}
	b, _ := json.Marshal(facts)
	return string(b)
}

type kept struct {
	s    string
	rank int
	at   int
}

// keepable splits text into sentences and ranks those worth keeping: 0 a
// standing instruction, 1 something to remember, 2 a link or path, 3 a long
// number; other sentences are left out.
func keepable(text string) []kept {
	text = tagRe.ReplaceAllString(text, "")
	var out []kept
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		for _, s := range strings.Split(sentenceEnd.ReplaceAllString(line, "$1\n"), "\n") {
			s = strings.TrimSpace(rolePrefix.ReplaceAllString(strings.TrimSpace(s), ""))
			rank := -1
			switch {
			case standingRe.MatchString(s):
				rank = 0
			case rememberRe.MatchString(s):
				rank = 1
			case linkRe.MatchString(s) || pathRe.MatchString(s):
				rank = 2
			case digitsRe.MatchString(s):
				rank = 3
			}
			if rank < 0 || seen[s] {
				continue
			}
			seen[s] = true
			if len(s) > 300 {
				s = s[:300]
				for !utf8.ValidString(s) {
					s = s[:len(s)-1]
				}
			}
			out = append(out, kept{s: s, rank: rank, at: len(out)})
		}
	}
	return out
}
