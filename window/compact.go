package window

import (
	"slices"
	"unicode/utf8"
)

// The in-turn safety net (the lifecycle seed): one monster turn — many or
// huge tool results — can outgrow the window by itself. Before each model
// call the live turn is measured conservatively; past CompactTrigger of the
// input budget it is compacted to CompactTarget. Only the request changes;
// the stored messages keep everything.
const (
	CompactTrigger = 0.75
	CompactTarget  = 0.50
	// conservativeCharsPerToken is deliberately low: it overcounts every
	// kind of text, so the trigger fires early rather than late.
	conservativeCharsPerToken = 1.5
	// compactKeepChars is the least a truncated message keeps.
	compactKeepChars = 200
	// protectedPerRole: the last this many messages of each role stay whole.
	protectedPerRole = 3
)

// ConservativeTokens counts a request at 1.5 characters a token (pictures
// at PictureTokens), the upper bound the trigger uses.
func ConservativeTokens(ms []Msg) int {
	n := 0
	for i := range ms {
		if c := ms[i].Conservative; c > 0 {
			n += c
		} else {
			n += conservative(&ms[i])
		}
	}
	return n
}

func conservative(m *Msg) int {
	chars := utf8.RuneCountInString(m.Text) + utf8.RuneCountInString(m.Thinking)
	for _, c := range m.ToolCalls {
		chars += len(c.Name) + utf8.RuneCountInString(c.Arguments)
	}
	return int(float64(chars)/conservativeCharsPerToken) + msgOverhead + m.Images*PictureTokens
}

// NeedsCompaction reports whether a request of fixed tokens (system prompt
// and tools) plus messages counted at conservative (ConservativeTokens, or
// Kept.Conservative) passes the trigger: the larger of the conservative
// count and the input tokens the provider reported for the previous call of
// this turn, against the input budget (the window less the answer room).
func NeedsCompaction(conservative, fixed, lastReported, inputBudget int) bool {
	effective := max(fixed+conservative, lastReported)
	return float64(effective) > CompactTrigger*float64(inputBudget)
}

// CompactReport says what a compaction did.
type CompactReport struct {
	Targets        int // messages truncated
	ImagesStripped int
	Before, After  int // conservative tokens of the request
}

// CompactTurn shrinks the live turn ms[turnStart:] so the request (fixed
// tokens plus ms) counts at most CompactTarget of inputBudget, if it can:
// pictures leave tool results; then texts are cut proportionally, head and
// tail kept with a [TRUNCATED …] label — tool results largest first, then
// older assistant messages, then older person's messages. The turn's first
// message (the task), the last three of each role and error results are
// never touched. ms is not modified. Only the live turn is worked on: when
// nothing in it changes (no picture stripped, no text cut), the result is
// ms itself, so a chat under pressure with nothing to cut copies nothing.
// conservative is ConservativeTokens(ms), known already (Kept.Conservative
// of the kept messages): the messages before the live turn are not read.
func CompactTurn(ms []Msg, conservative, turnStart, fixed, inputBudget int) ([]Msg, CompactReport) {
	turnStart = min(max(turnStart, 0), len(ms))
	live := ms[turnStart:]
	rep := CompactReport{Before: fixed + conservative}
	before := rep.Before - ConservativeTokens(live) // what the live turn's cuts never change
	copied := false
	edit := func() {
		if !copied {
			live, copied = slices.Clone(live), true
		}
	}
	for i := range live {
		if live[i].Role == Tool && live[i].Images > 0 {
			edit()
			rep.ImagesStripped += live[i].Images
			live[i].Images = 0
			live[i].uncache()
		}
	}
	target := int(CompactTarget * float64(inputBudget))
	protected := protect(live)
	var cut []bool
	for _, group := range targetGroups(live, protected) {
		// Labels add a little to each cut, so a group may take a few passes.
		for pass := 0; pass < 4 && len(group) > 0; pass++ {
			excess := before + ConservativeTokens(live) - target
			if excess <= 0 {
				break
			}
			if cut == nil {
				edit()
				cut = make([]bool, len(live))
			}
			if cutProportionally(live, group, int(float64(excess)*conservativeCharsPerToken), cut) == 0 {
				break
			}
		}
	}
	for _, c := range cut {
		if c {
			rep.Targets++
		}
	}
	if rep.Targets == 0 && rep.ImagesStripped == 0 {
		rep.After = rep.Before
		return ms, rep
	}
	rep.After = before + ConservativeTokens(live)
	out := make([]Msg, turnStart, len(ms))
	copy(out, ms[:turnStart])
	return append(out, live...), rep
}

// protect marks the messages of a live turn (its task first) that
// compaction never touches.
func protect(live []Msg) []bool {
	p := make([]bool, len(live))
	if len(live) > 0 {
		p[0] = true
	}
	var seen [3]int // of User, Assistant, Tool
	for i := len(live) - 1; i >= 0; i-- {
		if k := roleIndex(live[i].Role); k >= 0 {
			p[i] = p[i] || seen[k] < protectedPerRole
			seen[k]++
		}
		if live[i].Role == Tool && live[i].IsError {
			p[i] = true
		}
	}
	return p
}

// roleIndex numbers the roles window knows; -1 for any other (never cut).
func roleIndex(r Role) int {
	switch r {
	case User:
		return 0
	case Assistant:
		return 1
	case Tool:
		return 2
	}
	return -1
}

// targetGroups lists the unprotected messages of a live turn in the order
// they are cut: tool results (largest first), then assistant messages, then
// person's messages (oldest first).
func targetGroups(live []Msg, protected []bool) [][]int {
	var tools, assistants, users []int
	for i := range live {
		if protected[i] || utf8.RuneCountInString(live[i].Text) <= compactKeepChars {
			continue
		}
		switch live[i].Role {
		case Tool:
			tools = append(tools, i)
		case Assistant:
			assistants = append(assistants, i)
		case User:
			users = append(users, i)
		}
	}
	slices.SortStableFunc(tools, func(a, b int) int { return len(live[b].Text) - len(live[a].Text) })
	return [][]int{tools, assistants, users}
}

// cutProportionally removes about need characters from the group, each
// message losing the same share, none below compactKeepChars. It returns
// how many messages it cut.
func cutProportionally(ms []Msg, group []int, need int, cut []bool) int {
	total := 0
	for _, i := range group {
		total += max(0, utf8.RuneCountInString(ms[i].Text)-compactKeepChars-labelChars)
	}
	if total <= 0 {
		return 0
	}
	keepShare := max(0, 1-float64(need)/float64(total))
	n := 0
	for _, i := range group {
		runes := utf8.RuneCountInString(ms[i].Text)
		limit := compactKeepChars + int(keepShare*float64(runes-compactKeepChars-labelChars))
		if limit+labelChars < runes {
			ms[i] = cutMiddle(ms[i], limit)
			cut[i] = true
			n++
		}
	}
	return n
}

// labelChars is about what a [TRUNCATED …] label adds.
const labelChars = 100
