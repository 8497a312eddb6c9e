package tools

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ConversationReadTool is the name of the tool that reads stored messages
// back by seq; RecoveryPointer names it so a shortened result says how to get
// the rest.
const ConversationReadTool = "conversation_read"

// RecoveryPointer is the call that reads message seq back whole, for HeadTail.
func RecoveryPointer(seq int64) string {
	return fmt.Sprintf(`%s {"from_seq":%d,"to_seq":%d}`, ConversationReadTool, seq, seq)
}

// HeadTail shortens text to at most max bytes, keeping its head and its tail
// and putting a marker in the middle that says how much was cut and, when
// recovery is not empty, the call that reads it whole. Cuts fall on rune
// boundaries, so valid UTF-8 stays valid. The head gets the larger share
// because the start of a tool result (headers, the first lines) usually says
// what it is, and the tail often holds the verdict (errors, totals).
func HeadTail(text string, max int, recovery string) string {
	if len(text) <= max {
		return text
	}
	if max <= 0 {
		return ""
	}
	// Size the marker with the widest count it could show (the whole text's
	// length), so the real marker is never longer than what was budgeted.
	room := max - len(marker(len(text), recovery))
	if room < 2 {
		// No space for a marker: a plain head is the only honest short form.
		return text[:runeStart(text, max)]
	}
	headBytes := runeStart(text, room*3/5)
	tailFrom := runeEnd(text, len(text)-(room-headBytes))
	return text[:headBytes] + marker(tailFrom-headBytes, recovery) + text[tailFrom:]
}

func marker(cut int, recovery string) string {
	if recovery == "" {
		return "\n[… " + strconv.Itoa(cut) + " bytes cut …]\n"
	}
	return "\n[… " + strconv.Itoa(cut) + " bytes cut; read them whole with " + recovery + " …]\n"
}

// argsHead is how much of oversize arguments the model is shown again.
const argsHead = 1 << 10

// ShortArguments is what the model is sent again of a call's arguments
// over max bytes: a JSON object (every protocol wants one) with their head
// and a note saying they were cut. The log keeps them whole; Call refuses
// them, so nothing ran on what the model no longer sees.
func ShortArguments(args string, max int) string {
	if max <= 0 || len(args) <= max {
		return args
	}
	b, _ := json.Marshal(map[string]string{
		"cut_arguments_head": args[:runeStart(args, min(argsHead, max/2))],
		"note":               fmt.Sprintf("agentd cut these arguments: they were %d bytes, over the limit of %d, and the call was refused unread", len(args), max),
	})
	return string(b)
}

// runeStart moves i back to the start of the rune it falls in, so text[:i]
// ends on a rune boundary.
func runeStart(text string, i int) int {
	if i >= len(text) {
		return len(text)
	}
	for i > 0 && !utf8.RuneStart(text[i]) {
		i--
	}
	return i
}

// runeEnd moves i forward to the next rune start, so text[i:] begins on a
// rune boundary.
func runeEnd(text string, i int) int {
	for i < len(text) && !utf8.RuneStart(text[i]) {
		i++
	}
	return i
}
