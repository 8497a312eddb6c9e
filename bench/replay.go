package bench

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
)

// ToolName is the bench's own tool: the scripted model calls it on tool
// turns and it answers with the turn's large result. agentd registers it
// through hub.Options.Tools; the peer defines a tool of the same name.
const ToolName = "bench_lookup"

// Turn is one turn of the synthetic chat.
type Turn struct {
	Index int    `json:"index"`
	Kind  string `json:"kind"` // prose, code, foreign, tool
	User  string `json:"user"`
	// Report is the bench_lookup argument of a tool turn; Result what it returns.
	Report string `json:"report,omitempty"`
	Result string `json:"result,omitempty"`
	Answer string `json:"answer"`
}

// Plant is one fact the replay hides for the fidelity count.
type Plant struct {
	Turn         int    `json:"turn"`
	Kind         string `json:"kind"` // number, name, path, link, instruction
	Text         string `json:"text"` // what must survive, verbatim
	InToolResult bool   `json:"in_tool_result,omitempty"`
}

// Replay is a deterministic synthetic chat: the same seed and length give
// the same bytes, so agentd and the peer replay exactly the same turns.
type Replay struct {
	Seed   uint64  `json:"seed"`
	System string  `json:"system"`
	Turns  []Turn  `json:"turns"`
	Plants []Plant `json:"plants"`
}

// Identifiers and instructions planted per replay.
const (
	identifierPlants  = 100
	instructionPlants = 10
)

// instructions are the standing instructions a person gives over the chat.
// Each is checked verbatim (case-insensitive) in the last request.
var instructions = []string{
	"Always answer in metric units.",
	"Always write dates as YYYY-MM-DD.",
	"Never suggest rewriting the service in another language.",
	"Always cite the file path when you mention code.",
	"Always use British spelling in prose.",
	"Never include emojis in answers.",
	"Always end an answer about code with the test command to run.",
	"Always keep code comments in English.",
	"Never propose a new dependency without naming its licence.",
	"Always give money amounts in euros with two decimals.",
}

var firstNames = []string{"Ottilie", "Marek", "Sunniva", "Bartholomew", "Ines", "Kazimir", "Leocadia", "Tobiah", "Wilhelmina", "Anselm"}
var lastNames = []string{"Brandtner", "Quillfeather", "Oyelaran", "Vasquez-Roth", "Lindqvist", "Achterberg", "Nakagawa", "Fairweather", "Dubrovska", "Okonkwo"}

var proseWords = strings.Fields(`the a service queue worker request cache latency budget deploy rollout team
customer report dashboard incident review plan migration schema index table column backup window retry
timeout limit batch stream event handler config secret token account invoice order shipment warehouse
forecast metric alert page owner meeting draft proposal feature release branch merge test flaky build
careful quick slow stable noisy large small early late weekly daily clear vague open closed pending
should could would might will must rarely often usually because although while after before
we they it this that these those our their my your check move split merge rename keep drop add write read`)

var codeLines = []string{
	"func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {",
	"\tif key == \"\" {",
	"\t\treturn nil, errEmptyKey",
	"\t}",
	"\ts.mu.RLock()",
	"\tdefer s.mu.RUnlock()",
	"\tv, ok := s.items[key]",
	"\tif !ok {",
	"\t\treturn nil, fmt.Errorf(\"get %q: %w\", key, ErrNotFound)",
	"\treturn append([]byte(nil), v...), nil",
	"}",
	"def merge(left, right):",
	"    out = []",
	"    while left and right:",
	"        out.append(left.pop(0) if left[0] <= right[0] else right.pop(0))",
	"    return out + left + right",
	"SELECT customer_id, sum(amount) FROM invoices WHERE paid = false GROUP BY customer_id;",
	"for _, item := range batch {",
	"\tif err := w.Write(item); err != nil {",
	"\t\treturn fmt.Errorf(\"write batch: %w\", err)",
	"const retries = 3",
	"x = {k: v for k, v in rows if v is not None}",
}

var foreign = []string{
	"Könnten Sie bitte die Warteschlange noch einmal prüfen, bevor wir ausrollen?",
	"Die Berichte kommen zu spät, und niemand weiß genau, warum das passiert.",
	"Пожалуйста, проверьте очередь ещё раз перед выкладкой.",
	"Отчёты приходят слишком поздно, и никто не знает почему.",
	"デプロイの前にもう一度キューを確認してください。",
	"レポートが遅れて届きますが、理由は誰にも分かりません。",
	"يرجى التحقق من قائمة الانتظار مرة أخرى قبل النشر.",
	"التقارير تصل متأخرة ولا أحد يعرف السبب.",
	"Pourriez-vous vérifier la file d'attente avant le déploiement ?",
	"请在发布之前再检查一次队列。",
}

var logWords = strings.Fields("INFO WARN DEBUG worker queue flushed retried accepted rejected compacted scheduled shard batch lease renewed expired")

// NewReplay builds a chat of n turns from seed. The system prompt is the
// one both sides get (agentd builds its own; the peer is handed this one).
func NewReplay(seed uint64, n int, system string) *Replay {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	r := &Replay{Seed: seed, System: system}
	// Where the plants go: identifiers spread evenly over the chat, every
	// tenth inside a tool result; instructions spread over it too.
	idAt := map[int][]int{}
	for i := range identifierPlants {
		t := 2 + i*max(n-4, 1)/identifierPlants
		idAt[min(t, n-1)] = append(idAt[min(t, n-1)], i)
	}
	insAt := map[int]int{}
	for j := range instructionPlants {
		t := 1 + j*max(n-3, 1)/instructionPlants
		if _, taken := insAt[t]; taken || t >= n {
			continue
		}
		insAt[t] = j
	}
	for i := range n {
		kinds := []string{"prose", "prose", "code", "foreign", "prose", "tool", "prose", "code", "foreign", "prose"}
		kind := kinds[rng.IntN(len(kinds))]
		var plants []Plant
		for _, id := range idAt[i] {
			p := identifier(id)
			p.Turn = i
			if id%10 == 9 {
				kind, p.InToolResult = "tool", true
			}
			plants = append(plants, p)
		}
		t := Turn{Index: i, Kind: kind}
		var user strings.Builder
		fmt.Fprintf(&user, "[turn %d] ", i)
		switch kind {
		case "prose":
			user.WriteString(sentences(rng, 2+rng.IntN(5)))
		case "code":
			user.WriteString("Please review this:\n```\n" + code(rng, 8+rng.IntN(24)) + "\n```\n" + sentences(rng, 1))
		case "foreign":
			for k := 0; k < 2+rng.IntN(4); k++ {
				user.WriteString(foreign[rng.IntN(len(foreign))] + " ")
			}
		case "tool":
			t.Report = fmt.Sprintf("r-%d", i)
			user.WriteString("Look up report " + t.Report + " and tell me what stands out. " + sentences(rng, 1))
			var hidden []string
			for _, p := range plants {
				if p.InToolResult {
					hidden = append(hidden, p.Text)
				}
			}
			t.Result = toolResult(rng, t.Report, 2000+rng.IntN(10000), hidden)
		}
		for _, p := range plants {
			if !p.InToolResult {
				user.WriteString(" " + plantSentence(p))
			}
		}
		if j, ok := insAt[i]; ok {
			user.WriteString(" From now on: " + instructions[j])
			plants = append(plants, Plant{Turn: i, Kind: "instruction", Text: instructions[j]})
		}
		t.User = strings.TrimSpace(user.String())
		if rng.IntN(4) == 0 {
			t.Answer = "Here is a sketch:\n```\n" + code(rng, 4+rng.IntN(10)) + "\n```\n" + sentences(rng, 1+rng.IntN(2))
		} else {
			t.Answer = sentences(rng, 2+rng.IntN(5))
		}
		r.Turns = append(r.Turns, t)
		r.Plants = append(r.Plants, plants...)
	}
	return r
}

// identifier returns the i-th planted identifier: a number, a name, a path
// or a link, each unique in the replay.
func identifier(i int) Plant {
	switch i % 4 {
	case 0:
		return Plant{Kind: "number", Text: fmt.Sprintf("INV-%05d-%02d", 10007+i*7919%89999, i)}
	case 1:
		return Plant{Kind: "name", Text: firstNames[(i/4)%10] + " " + lastNames[(i/4+i/40)%10]}
	case 2:
		return Plant{Kind: "path", Text: fmt.Sprintf("/srv/bluefin/conf/ingest-%d.yaml", 100+i)}
	default:
		return Plant{Kind: "link", Text: fmt.Sprintf("https://wiki.example.org/okapi/page-%d", 500+i)}
	}
}

// plantSentence is how a person mentions an identifier.
func plantSentence(p Plant) string {
	switch p.Kind {
	case "number":
		return "Please remember that the invoice number is " + p.Text + "."
	case "name":
		return "Remember that the contact for this is " + p.Text + "."
	case "path":
		return "Remember: the config lives at " + p.Text + " on the server."
	default:
		return "Remember the design notes at " + p.Text + " for later."
	}
}

func sentences(rng *rand.Rand, n int) string {
	var b strings.Builder
	for s := range n {
		if s > 0 {
			b.WriteByte(' ')
		}
		words := 8 + rng.IntN(14)
		for w := range words {
			word := proseWords[rng.IntN(len(proseWords))]
			if w == 0 {
				word = strings.ToUpper(word[:1]) + word[1:]
			} else {
				b.WriteByte(' ')
			}
			b.WriteString(word)
		}
		b.WriteByte('.')
	}
	return b.String()
}

func code(rng *rand.Rand, n int) string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = codeLines[rng.IntN(len(codeLines))]
	}
	return strings.Join(lines, "\n")
}

// toolResult is a log-like text of about size bytes; hidden facts sit in
// its middle, where head-and-tail cuts lose them.
func toolResult(rng *rand.Rand, report string, size int, hidden []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "report %s\n", report)
	mid := size / 2
	for b.Len() < size {
		if len(hidden) > 0 && b.Len() >= mid {
			for _, h := range hidden {
				fmt.Fprintf(&b, "NOTE reference %s recorded for this report\n", h)
			}
			hidden = nil
		}
		fmt.Fprintf(&b, "%s shard=%c%c %s %s %s\n", logWords[rng.IntN(3)], 'a'+rune(rng.IntN(26)), 'a'+rune(rng.IntN(26)),
			logWords[3+rng.IntN(len(logWords)-3)], logWords[3+rng.IntN(len(logWords)-3)], logWords[3+rng.IntN(len(logWords)-3)])
	}
	for _, h := range hidden {
		fmt.Fprintf(&b, "NOTE reference %s recorded for this report\n", h)
	}
	return b.String()
}

var turnTag = regexp.MustCompile(`\[turn (\d+)\]`)

// TurnOf reads the turn index a person's message carries (-1: none).
func TurnOf(text string) int {
	m := turnTag.FindAllStringSubmatch(text, -1)
	if len(m) == 0 {
		return -1
	}
	n, err := strconv.Atoi(m[len(m)-1][1])
	if err != nil {
		return -1
	}
	return n
}
