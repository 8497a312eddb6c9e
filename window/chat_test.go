package window

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// builder appends messages with increasing seqs, as the store would.
type builder struct {
	ms  []Msg
	seq int64
	ids int
}

func (b *builder) add(m Msg) *builder {
	b.seq++
	m.Seq = b.seq
	b.ms = append(b.ms, m)
	return b
}

func (b *builder) user(text string) *builder { return b.add(Msg{Role: User, Text: text}) }

func (b *builder) assistant(text string) *builder { return b.add(Msg{Role: Assistant, Text: text}) }

// call adds an assistant message calling one tool per result text, then the
// results.
func (b *builder) call(results ...string) *builder {
	var calls []ToolCall
	for range results {
		b.ids++
		calls = append(calls, ToolCall{ID: fmt.Sprintf("call_%d", b.ids), Name: "read_file", Arguments: `{"path":"a.go"}`})
	}
	b.add(Msg{Role: Assistant, ToolCalls: calls})
	for i, r := range results {
		b.add(Msg{Role: Tool, ToolCallID: calls[i].ID, ToolName: calls[i].Name, Text: r})
	}
	return b
}

// turn adds a person's message, a tool round and an answer.
func (b *builder) turn(i int, result string) *builder {
	return b.user(fmt.Sprintf("question %d: what does a.go do?", i)).call(result).assistant(fmt.Sprintf("answer %d: it parses flags.", i))
}

// fragments mixes the kinds of text the estimator tells apart.
var fragments = []string{
	"the quick brown fox jumps over the lazy dog ", "func main() { fmt.Println(x) }\n",
	"Съешь же ещё этих мягких булок ", "你好世界，这是一个测试。", "🙂🚀 ", "3141592653 ",
	"MIICjTCCAhSgAwIBAgIIdebfy8FoW6gw", "مرحبا بالعالم ", "{\"key\": [1, 2, 3]}\n", "    indented\n",
}

// text returns n characters or so of mixed text, deterministic in seed.
func text(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 7))
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(fragments[r.IntN(len(fragments))])
	}
	s := sb.String()
	return s[:runeOffset(s, n)]
}

func deepCopy(ms []Msg) []Msg {
	out := make([]Msg, len(ms))
	for i, m := range ms {
		m.ToolCalls = append([]ToolCall(nil), m.ToolCalls...)
		out[i] = m
	}
	return out
}

func marshalEach(ms []Msg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		b, err := json.Marshal(m)
		if err != nil {
			panic(err)
		}
		out[i] = string(b)
	}
	return out
}

// requestEstimate estimates an assembled request from scratch, ignoring
// every cache, as the property tests' independent check.
func requestEstimate(out []Msg, b Budget, cal Calibration) int {
	raw := b.System + b.Tools
	for _, m := range out {
		raw += EstimateMsg(m)
	}
	return cal.Estimate(raw)
}
