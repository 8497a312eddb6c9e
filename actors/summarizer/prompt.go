package summarizer

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/redact"
	"github.com/agentd/agentd/window"
)

// Instructions is the summariser's system prompt. It is a wire string:
// changing it changes every summary written afterwards.
const Instructions = `You keep the running summary of a long chat between a person and an assistant.
You get the summary so far and the next part of the chat as plain lines. ` + summaryRules

// PrefixMark starts the question that ends a summarising request which is
// the chat's own request up to the fold point (Fold.Prefix). A wire string.
const PrefixMark = "[agentd, not the person: stop the chat here.]"

// PrefixPrompt is that question: the chat's system prompt leads such a
// request, so the summariser's instructions ride last, in agentd's words.
// framed says the summary so far rides in front of the messages.
func PrefixPrompt(framed bool, focus string) string {
	p := PrefixMark + " You keep the running summary of this chat.\n"
	if framed {
		p += "The summary so far is in " + window.SummaryOpen + " above; the messages after it are the next part. "
	} else {
		p += "There is no summary yet: the messages above are the first part. "
	}
	p += summaryRules
	if focus != "" {
		p += "\nThe person asked to keep especially: " + focus
	}
	return p
}

// summaryRules are what both summarising prompts ask for.
const summaryRules = `Write the new summary, which
replaces the old one and must keep everything in it that still matters. Write in the chat's language,
as short notes under these headings:
What the person wants:
Decided or done:
Facts to keep: (names, numbers, files, paths, links, ids; copy them exactly)
Still open:
Standing instructions: (the person's standing instructions, word for word)
Never write a secret (passwords, PINs, keys, tokens); [secret-N] placeholders stay as they are.
Answer with the summary only: no preamble, no questions, no tool calls.`

// SummaryTarget is the size a summary is asked to stay under on a window
// that has room for it.
const SummaryTarget = 1200 // tokens

// target is the summary size on a window: a small window keeps a smaller
// summary, so a piece of chat still fits beside it.
func target(windowTokens int) int {
	return max(min(SummaryTarget, windowTokens/8), 128)
}

// answerRoom is the room a summarising request leaves for the answer.
func answerRoom(windowTokens int) int { return 2 * target(windowTokens) }

// Piece is one summarising request's share of the folded lines.
type Piece struct {
	Lines []string
	// counts are Lines joined with line breaks, when Pieces counted them
	// already: a request's estimate adds them to its framing's, where
	// estimating the whole prompt read every line a second time.
	counts  window.Counts
	counted bool
}

// linesCount is the counts of p's lines joined with line breaks.
func (p Piece) linesCount() window.Counts {
	if p.counted {
		return p.counts
	}
	return window.Count(strings.Join(p.Lines, "\n"))
}

// newline is the count of the line break between two lines of a piece.
var newline = window.Count("\n")

// instructionsTokens is Instructions' estimate, made once.
var instructionsTokens = window.EstimateText(Instructions)

// Pieces splits lines into pieces that each fit the summarising model's
// window together with the instructions, the summary so far (at most its
// target size) and the answer, estimated as a turn is before the provider
// has counted (window.InputRoom). A single line bigger than a piece is cut,
// head and tail kept. The summariser splits a piece further when the chat's
// own correction says it would not fit.
func Pieces(lines []string, windowTokens int, focus string) []Piece {
	fixed := instructionsTokens + window.EstimateText(focus) + 2*target(windowTokens) + 64
	room := max(window.InputRoom(windowTokens, answerRoom(windowTokens), window.Calibration{})-fixed, 256)
	var out []Piece
	cur := Piece{counted: true}
	used := 0
	for _, l := range lines {
		c := window.Count(l)
		n := c.Tokens() + 2
		if n > room {
			l = cutMiddle(l, room)
			c = window.Count(l)
			n = c.Tokens() + 2
		}
		if used+n > room && len(cur.Lines) > 0 {
			out = append(out, cur)
			cur, used = Piece{counted: true}, 0
		}
		if len(cur.Lines) > 0 {
			cur.counts = cur.counts.Add(newline)
		}
		cur.Lines = append(cur.Lines, l)
		cur.counts = cur.counts.Add(c)
		used += n
	}
	if len(cur.Lines) > 0 {
		out = append(out, cur)
	}
	return out
}

// cutMiddle shortens a line to about room tokens keeping its head and tail.
func cutMiddle(l string, room int) string {
	keep := max(room*3/2, 64) // characters per half; conservative for dense text
	if len(l) <= 2*keep {
		return l
	}
	head, tail := l[:keep], l[len(l)-keep:]
	for !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	for !utf8.ValidString(tail) {
		tail = tail[1:]
	}
	return head + fmt.Sprintf(" […%d characters left out…] ", len(l)-len(head)-len(tail)) + tail
}

// userFrame is a fold's prompt around a piece's lines: the summary so far,
// the focus asked for, then the lines.
func userFrame(summary, focus string) frame {
	var b strings.Builder
	b.WriteString("Summary so far:\n")
	if strings.TrimSpace(summary) == "" {
		b.WriteString("(none yet)\n")
	} else {
		b.WriteString(summary + "\n")
	}
	if focus != "" {
		b.WriteString("\nThe person asked to keep especially: " + focus + "\n")
	}
	b.WriteString("\nNext part of the chat:\n")
	return frame{head: b.String(), tail: "\n\nWrite the new summary now."}
}

// frame is a summarising prompt's text around its piece's lines. head
// ends and tail starts with a line break, so the prompt counts as theirs
// and the lines' added (window.Counts).
type frame struct{ head, tail string }

// framed is the prompt of p in f.
func framed(f frame, p Piece) string {
	return f.head + strings.Join(p.Lines, "\n") + f.tail
}

// estimate is the raw estimate of p's prompt in f, its lines counted once.
func (f frame) estimate(p Piece) int {
	return window.Count(f.head).Add(p.linesCount()).Add(window.Count(f.tail)).Tokens()
}

// refusals are how a model says it will not summarise.
var refusals = []string{"i can't", "i cannot", "i'm sorry", "i am sorry", "i won't", "as an ai", "i'm unable", "i am unable"}

// Accept reports whether a reply is a summary worth keeping: not empty, no
// tool call, not a refusal, not far over the size asked.
func Accept(text string, toolCalls int) (string, bool) {
	t := strings.TrimSpace(text)
	if t == "" || toolCalls > 0 {
		return "", false
	}
	head := strings.ToLower(t[:min(len(t), 80)])
	for _, r := range refusals {
		if strings.HasPrefix(head, r) {
			return "", false
		}
	}
	if window.EstimateText(t) > 3*SummaryTarget {
		return "", false
	}
	return redact.Mask(t), true
}
