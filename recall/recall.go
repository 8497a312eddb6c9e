// Package recall gives the model its chat back word for word: the tools
// conversation_read (by seq range) and conversation_search (by words) read
// the chat's stored log, folded or not. The log is never edited, so what a
// summary or a stub left out is always one call away.
package recall

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/tools"
)

// Log reads a chat's messages.
type Log interface {
	Messages(ctx context.Context, chatID string, from, to int64) ([]chat.Message, error)
}

// Limits of one call's answer.
const (
	maxReadMessages = 50
	maxReadBytes    = 48 << 10
	minReadBytes    = 1 << 10
	maxHits         = 20
	snippetChars    = 240
)

// ReadArgs are conversation_read's arguments.
type ReadArgs struct {
	FromSeq int64 `json:"from_seq" jsonschema:"description=first message seq to read (inclusive),minimum=1"`
	ToSeq   int64 `json:"to_seq,omitempty" jsonschema:"description=last message seq to read (inclusive); default from_seq"`
	Offset  int   `json:"offset,omitempty" jsonschema:"description=byte of from_seq's text to start at, to read on in a message longer than one answer,minimum=0"`
}

// SearchArgs are conversation_search's arguments.
type SearchArgs struct {
	Query string `json:"query" jsonschema:"description=words to look for in this chat's earlier messages"`
	Limit int    `json:"limit,omitempty" jsonschema:"description=most hits to return (default 10),minimum=1,maximum=20"`
}

// Register adds conversation_read and conversation_search to r.
func Register(r *tools.Registry, log Log) error {
	if err := tools.Register(r, "conversation_read",
		"Read earlier messages of this chat word for word by seq range, including ones summarised or stubbed away. "+
			"A message longer than one answer comes in pieces, each naming the call that reads on.",
		func(ctx context.Context, a ReadArgs) (tools.Result, error) { return read(ctx, log, a) }); err != nil {
		return err
	}
	return tools.Register(r, "conversation_search",
		"Search this chat's earlier messages (all of them, summarised or not) for words; returns seqs and snippets to read.",
		func(ctx context.Context, a SearchArgs) (tools.Result, error) { return search(ctx, log, a) })
}

func callChat(ctx context.Context) (string, bool) {
	ci, ok := tools.CallInfoFrom(ctx)
	return ci.ChatID, ok && ci.ChatID != ""
}

// answerBytes is the most one read answers: maxReadBytes, or less where the
// model is sent less of a result whole, so a piece is never cut again on
// its way (its middle would be lost behind a pointer to the read itself).
func answerBytes(ctx context.Context) int {
	if ci, _ := tools.CallInfoFrom(ctx); ci.SentBytes > 0 {
		return max(min(maxReadBytes, ci.SentBytes), minReadBytes)
	}
	return maxReadBytes
}

func read(ctx context.Context, log Log, a ReadArgs) (tools.Result, error) {
	id, ok := callChat(ctx)
	if !ok {
		return tools.Result{IsError: true, Text: "conversation_read works only inside a chat"}, nil
	}
	if a.FromSeq < 1 {
		return tools.Result{IsError: true, Text: "from_seq must be 1 or more"}, nil
	}
	to := a.ToSeq
	if to < a.FromSeq {
		to = a.FromSeq
	}
	to = min(to, a.FromSeq+maxReadMessages-1)
	msgs, err := log.Messages(ctx, id, a.FromSeq, to)
	if err != nil {
		return tools.Result{}, fmt.Errorf("read chat %s: %w", id, err)
	}
	if len(msgs) == 0 {
		return tools.Result{Text: fmt.Sprintf("no messages between seq %d and %d", a.FromSeq, to)}, nil
	}
	limit := answerBytes(ctx)
	var b strings.Builder
	for i, m := range msgs {
		from := 0
		if i == 0 && m.Seq == a.FromSeq {
			if a.Offset < 0 || a.Offset > len(m.Content) {
				return tools.Result{IsError: true, Text: fmt.Sprintf("offset %d is outside seq %d's text of %d bytes", a.Offset, m.Seq, len(m.Content))}, nil
			}
			from = a.Offset
		}
		line := render(m, from, limit)
		if b.Len()+len(line) <= limit {
			b.WriteString(line)
			continue
		}
		if b.Len() > 0 {
			fmt.Fprintf(&b, "[stopped at seq %d to keep this answer small; read on with from_seq %d]\n", m.Seq, m.Seq)
			break
		}
		// One message longer than a whole answer (a big tool result, which
		// its stub and its head and tail point here for): a piece of it,
		// and the call that reads on.
		b.WriteString(piece(m, from, limit))
		break
	}
	return tools.Result{Text: b.String()}, nil
}

// render is m as read back, its text from byte from on.
func render(m chat.Message, from, limit int) string {
	var b strings.Builder
	b.WriteString(header(m, from, limit))
	b.WriteString(m.Content[from:])
	b.WriteByte('\n')
	for _, c := range m.ToolCalls {
		fmt.Fprintf(&b, "  called %s %s\n", c.Name, c.Arguments)
	}
	return b.String()
}

func header(m chat.Message, from, limit int) string {
	who := string(m.Role)
	if m.Role == chat.RoleTool {
		who = "tool " + m.ToolName
	}
	if from > 0 {
		return fmt.Sprintf("[seq %d, %s] (from byte %d of %d)\n", m.Seq, who, from, len(m.Content))
	}
	if len(m.Content)+64 > limit {
		return fmt.Sprintf("[seq %d, %s] (%d bytes)\n", m.Seq, who, len(m.Content))
	}
	return fmt.Sprintf("[seq %d, %s] ", m.Seq, who)
}

// piece is as much of m's text from byte from as one answer of limit
// bytes holds, cut on a rune boundary, and the call that reads on.
func piece(m chat.Message, from, limit int) string {
	h := header(m, from, limit)
	end := from + limit - len(h) - 128 // room for the read-on line
	for end > from && end < len(m.Content) && !isRuneStart(m.Content[end]) {
		end--
	}
	if end <= from || end >= len(m.Content) {
		// Only its tool calls overflow (arguments refused for their size
		// are stored whole): the text whole, the calls cut.
		text := h + m.Content[from:] + "\n"
		var calls strings.Builder
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&calls, "  called %s %s\n", c.Name, c.Arguments)
		}
		return text + tools.HeadTail(calls.String(), max(limit-len(text), 0), "")
	}
	return fmt.Sprintf("%s%s\n[seq %d continues; read on with %s {\"from_seq\":%d,\"offset\":%d}]\n",
		h, m.Content[from:end], m.Seq, tools.ConversationReadTool, m.Seq, end)
}

func search(ctx context.Context, log Log, a SearchArgs) (tools.Result, error) {
	id, ok := callChat(ctx)
	if !ok {
		return tools.Result{IsError: true, Text: "conversation_search works only inside a chat"}, nil
	}
	terms := queryTerms(a.Query)
	if len(terms) == 0 {
		return tools.Result{IsError: true, Text: "query needs at least one word of three letters or more"}, nil
	}
	limit := a.Limit
	if limit <= 0 || limit > maxHits {
		limit = 10
	}
	msgs, err := log.Messages(ctx, id, 1, 0)
	if err != nil {
		return tools.Result{}, fmt.Errorf("search chat %s: %w", id, err)
	}
	hits := rank(msgs, terms)
	if len(hits) == 0 {
		return tools.Result{Text: "no earlier message contains those words"}, nil
	}
	var b strings.Builder
	for i, h := range hits {
		if i == limit {
			fmt.Fprintf(&b, "(%d more hits)\n", len(hits)-limit)
			break
		}
		fmt.Fprintf(&b, "[seq %d, %s] %s\n", h.m.Seq, h.m.Role, snippet(h.m.Content, h.first))
	}
	b.WriteString("Read a message whole with conversation_read {\"from_seq\": N}.")
	return tools.Result{Text: b.String()}, nil
}

// snippet returns the text around the first match of word.
func snippet(text, word string) string {
	i := strings.Index(strings.ToLower(text), word)
	start := max(0, i-snippetChars/2)
	end := min(len(text), start+snippetChars)
	for start > 0 && start < len(text) && !isRuneStart(text[start]) {
		start--
	}
	for end < len(text) && !isRuneStart(text[end]) {
		end++
	}
	s := strings.Join(strings.Fields(text[start:end]), " ")
	if start > 0 {
		s = "…" + s
	}
	if end < len(text) {
		s += "…"
	}
	return s
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// stopwords carry no meaning for a search of a chat.
var stopwords = map[string]bool{"the": true, "and": true, "for": true, "are": true, "but": true, "not": true, "you": true,
	"all": true, "any": true, "can": true, "was": true, "our": true, "out": true, "has": true, "have": true, "with": true,
	"this": true, "that": true, "from": true, "they": true, "will": true, "what": true, "when": true, "where": true,
	"which": true, "who": true, "how": true, "about": true, "into": true, "your": true}

// queryTerms are the query's words that can tell messages apart.
func queryTerms(q string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range words(q) {
		if len(w) >= 3 && !stopwords[w] && !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// words splits text into lower-case words (letters, digits, and the
// punctuation inside ids, paths and links).
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_-./:@#", r))
	})
}

type hit struct {
	m     chat.Message
	score float64
	first string
}

// rank scores messages by the query terms they hold as words: a rare term
// counts more than a common one (inverse document frequency), each term
// once, so a long message does not win by length alone. Ties go to the
// newer message.
func rank(msgs []chat.Message, terms []string) []hit {
	sets := make([]map[string]bool, len(msgs))
	df := map[string]int{}
	for i, m := range msgs {
		set := map[string]bool{}
		for _, w := range words(m.Content) {
			set[strings.Trim(w, "_-./:@#")] = true
			set[w] = true
		}
		sets[i] = set
		for _, t := range terms {
			if set[t] {
				df[t]++
			}
		}
	}
	var hits []hit
	for i, m := range msgs {
		h := hit{m: m}
		for _, t := range terms {
			if sets[i][t] {
				h.score += math.Log(1 + float64(len(msgs))/float64(df[t]))
				if h.first == "" {
					h.first = t
				}
			}
		}
		if h.score > 0 {
			hits = append(hits, h)
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		return hits[i].m.Seq > hits[j].m.Seq
	})
	return hits
}
