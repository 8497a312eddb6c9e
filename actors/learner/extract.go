package learner

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/actors/summarizer"
	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/redact"
	"github.com/agentd/agentd/window"
)

// Instructions is the extraction model's system prompt.
const Instructions = `You read what a person wrote in a chat with an assistant and pick out what is worth remembering about them for future chats:
- durable facts the person states about themselves (name, family, work, home, health, skills, equipment they use),
- lasting preferences (how they like things done, what they like or avoid),
- standing instructions they give the assistant ("always answer in French").
Leave out passing details of the current task, questions, what other people or documents say, guesses, and anything secret (passwords, PINs, keys, tokens, or text masked like [secret-1]).
Write each item as one short self-contained sentence in the third person, for example "The person is vegetarian.".
Answer with a JSON array of strings and nothing else; answer [] when there is nothing worth remembering.`

// maxFacts caps what one answer may add; a longer list is more likely a
// summary of the chat than things to remember.
const maxFacts = 20

// answerRoom is the MaxTokens of an extraction request.
const answerRoom = 1024

// PersonWords keeps the messages a learner may learn from: the person's own
// typed words past after. A tool's output, an assistant's answer, a
// scheduled run's or an application's message never qualify, whatever the
// sender claimed, nor a question whose exchange the provider refused
// (summarizer.WithoutRefused): the chat's own requests leave it out, so a
// memory made of it would hand it back to the model.
func PersonWords(msgs []chat.Message, after int64) []chat.Message {
	msgs = summarizer.WithoutRefused(msgs)
	keep := func(m *chat.Message) bool {
		return m.Seq > after && m.Role == chat.RoleUser && m.Origin == chat.OriginPerson && strings.TrimSpace(m.Content) != ""
	}
	// Counted first, then copied once: a fold's words pass here three
	// times (the session, the learner's mailbox, its run), and append grew
	// each copy of hundreds of messages in steps.
	n := 0
	for i := range msgs {
		if keep(&msgs[i]) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]chat.Message, 0, n)
	for i := range msgs {
		if keep(&msgs[i]) {
			out = append(out, msgs[i])
		}
	}
	return out
}

// piece is a run of words small enough for one extraction request.
type piece struct {
	lines   []string
	lastSeq int64
	// counts are lines joined with line breaks, counted when they were
	// cut: the request's estimate adds them to its framing's instead of
	// reading every line again.
	counts window.Counts
}

// pieces renders words as masked "Person:" lines and cuts them into pieces
// of at most limit bytes and room estimated tokens (a single longer line is
// a piece by itself, cut to fit), so a small model reads each whole.
func pieces(words []chat.Message, limit, room int) []piece {
	lines := summarizer.Lines(words, redact.NewMasker())
	var out []piece
	var cur piece
	size, tokens := 0, 0
	for i, l := range lines {
		l, c := cutTo(l, limit, room)
		n := c.Tokens() + 1
		if (size+len(l) > limit || tokens+n > room) && len(cur.lines) > 0 {
			out = append(out, cur)
			cur, size, tokens = piece{}, 0, 0
		}
		if len(cur.lines) > 0 {
			cur.counts = cur.counts.Add(newline)
		}
		cur.counts = cur.counts.Add(c)
		cur.lines = append(cur.lines, l)
		cur.lastSeq = words[i].Seq
		size += len(l) + 1
		tokens += n
	}
	if len(cur.lines) > 0 {
		out = append(out, cur)
	}
	return out
}

// cutTo shortens a line to at most limit bytes and room estimated tokens,
// on a rune boundary, and returns what is left with its counts (made once:
// a fold hands over hundreds of lines).
func cutTo(l string, limit, room int) (string, window.Counts) {
	cut := min(len(l), limit)
	c := window.Count(l[:cut])
	for n := c.Tokens(); n > room && cut > 0; n = c.Tokens() {
		cut = cut * room / (n + 1)
		c = window.Count(l[:cut])
	}
	if cut > 0 && cut < len(l) && !utf8.RuneStart(l[cut]) {
		for cut > 0 && !utf8.RuneStart(l[cut]) {
			cut--
		}
		c = window.Count(l[:cut])
	}
	return l[:cut], c
}

// promptHead starts an extraction request's user message; the piece's
// lines follow it.
const promptHead = "The person's messages, oldest first:\n\n"

// The fixed parts' counts, made once.
var (
	newline            = window.Count("\n")
	headCounts         = window.Count(promptHead)
	instructionsTokens = window.EstimateText(Instructions)
)

// userPrompt is the one user message of an extraction request.
func userPrompt(p piece) string {
	return promptHead + strings.Join(p.lines, "\n")
}

// rawEstimate is an extraction request's estimate before correction, its
// lines counted once (pieces).
func rawEstimate(p piece) int {
	return instructionsTokens + headCounts.Add(p.counts).Tokens()
}

// ParseFacts reads an extraction answer leniently: the first JSON array in
// it (code fences and chatter around it are ignored) whose items are strings
// or objects with a "text", "fact" or "memory" string, or an object holding
// such an array under "memories", "facts" or "items". ok is false when no
// such JSON is found: the answer is unreadable and nothing may be marked
// read. An empty array is a readable "nothing to remember".
func ParseFacts(answer string) (facts []string, ok bool) {
	for i := 0; i < len(answer); i++ {
		if answer[i] != '[' && answer[i] != '{' {
			continue
		}
		var v any
		if err := json.NewDecoder(strings.NewReader(answer[i:])).Decode(&v); err != nil {
			continue
		}
		if facts, ok := factsIn(v); ok {
			return tidy(facts), true
		}
	}
	return nil, false
}

func factsIn(v any) ([]string, bool) {
	switch v := v.(type) {
	case []any:
		var out []string
		for _, item := range v {
			s, ok := factText(item)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	case map[string]any:
		for _, k := range []string{"memories", "facts", "items"} {
			if arr, ok := v[k].([]any); ok {
				return factsIn(arr)
			}
		}
	}
	return nil, false
}

func factText(item any) (string, bool) {
	switch it := item.(type) {
	case string:
		return it, true
	case map[string]any:
		for _, k := range []string{"text", "fact", "memory"} {
			if s, ok := it[k].(string); ok {
				return s, true
			}
		}
	}
	return "", false
}

// tidy trims, drops blanks and repeats, and caps the count.
func tidy(facts []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, f := range facts {
		f = strings.TrimSpace(f)
		key := strings.ToLower(f)
		if f == "" || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, f)
		if len(out) == maxFacts {
			break
		}
	}
	return out
}
