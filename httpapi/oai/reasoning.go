package oai

import "github.com/agentd/agentd/api"

// A model's reasoning on the OpenAI surfaces (docs/openai.md, "Reasoning"):
// Responses tells it, to a request that asks for reasoning summaries, as a
// reasoning item whose summary_text parts stream before the answer; Chat
// Completions streams it as delta.reasoning_content. Neither wire can take
// back text it streamed, so a reasoning cut and asked again
// (thinking.reset) ends what was shown of it, and the retry's follows
// apart from it: a new summary part, or after a marked break. An answer
// taken back once it was streamed (message.reset) ends the same way, after
// a marked break in its text on both surfaces; the stored answer, which
// Responses' .done events and final response carry, is the retry's alone.

// reasoningBreak is what Chat Completions streams as reasoning_content on
// a thinking.reset: what came before it was cut, and the retry's reasoning,
// not a continuation of it, follows.
const reasoningBreak = "\n\n[agentd: the model's reply was cut off while it reasoned and was asked again; its reasoning starts over below]\n\n"

// answerBreak is what both surfaces stream as text on a message.reset:
// what came before it was taken back, and the retry's answer, not a
// continuation of it, follows.
const answerBreak = "\n\n[agentd: this answer was taken back (the model's server had cut its prompt) and asked again; it starts over below]\n\n"

// unsay ends the text an answer taken back (message.reset) streamed in
// the open message item with answerBreak; the retry's deltas follow in
// the same item, whose .done text is the stored answer alone.
func (b *builder) unsay() {
	if !b.has || len(b.text) == 0 {
		return
	}
	b.delta(answerBreak)
	b.text = b.text[:0]
}

// reasoning is the state of a response's reasoning item.
type reasoning struct {
	// shown: the request asked to see the reasoning (summarises).
	shown bool
	// open: a reasoning item takes this answer's reasoning, at index at.
	open bool
	at   int
	// part: its last summary part takes deltas, text so far.
	part bool
	text []byte
	// told: this answer's reasoning has an item already (closed before
	// its text began); the stored message's adds no other.
	told bool
}

// think streams a piece of the model's reasoning into the open reasoning
// item's open summary part, opening either as needed.
func (b *builder) think(text string) {
	r := &b.reasoning
	if !r.shown || text == "" {
		return
	}
	if !r.open {
		b.openReasoning()
	}
	if !r.part {
		b.openSummaryPart()
	}
	r.text = append(r.text, text...)
	b.emit("response.reasoning_summary_text.delta", map[string]any{"item_id": b.resp.Output[r.at].ID, "output_index": r.at,
		"summary_index": len(*b.resp.Output[r.at].Summary) - 1, "delta": text})
}

// rethink ends the summary part of a reasoning that was cut and is asked
// again with what its client was shown: the retry's reasoning is a new
// part of the same item.
func (b *builder) rethink() {
	if b.reasoning.part {
		b.closeSummaryPart(string(b.reasoning.text))
	}
}

func (b *builder) openReasoning() {
	r := &b.reasoning
	r.open, r.told, r.at = true, true, len(b.resp.Output)
	it := item{Type: itemReasoning, ID: reasoningItemID(b.seq), Status: statusInProgress, Summary: &[]summaryPart{}}
	b.resp.Output = append(b.resp.Output, it)
	b.emit("response.output_item.added", map[string]any{"output_index": r.at, "item": it})
}

func (b *builder) openSummaryPart() {
	r := &b.reasoning
	it := b.resp.Output[r.at]
	*it.Summary = append(*it.Summary, summaryPart{Type: "summary_text"})
	r.part, r.text = true, r.text[:0]
	b.emit("response.reasoning_summary_part.added", map[string]any{"item_id": it.ID, "output_index": r.at,
		"summary_index": len(*it.Summary) - 1, "part": summaryPart{Type: "summary_text", Text: ""}})
}

func (b *builder) closeSummaryPart(text string) {
	r := &b.reasoning
	it := b.resp.Output[r.at]
	i := len(*it.Summary) - 1
	(*it.Summary)[i].Text = text
	b.emit("response.reasoning_summary_text.done", map[string]any{"item_id": it.ID, "output_index": r.at, "summary_index": i, "text": text})
	b.emit("response.reasoning_summary_part.done", map[string]any{"item_id": it.ID, "output_index": r.at, "summary_index": i,
		"part": summaryPart{Type: "summary_text", Text: text}})
	r.part = false
}

// closeReasoning ends the answer's reasoning item with status. stored is
// the answer's reasoning as stored ("" before it is known), which wins
// over the deltas of its last part, as a message's stored text does; an
// answer whose reasoning no delta told (a lagging stream) gets its item
// whole here, unless its text began already.
func (b *builder) closeReasoning(stored, status string) {
	r := &b.reasoning
	if !r.shown {
		return
	}
	if !r.open {
		if stored == "" || r.told || b.has {
			return
		}
		b.openReasoning()
	}
	switch {
	case r.part && stored != "":
		b.closeSummaryPart(stored)
	case r.part:
		b.closeSummaryPart(string(r.text))
	case stored != "" && !lastSummaryIs(b.resp.Output[r.at], stored):
		// Cut and asked again, the retry's deltas missed.
		b.openSummaryPart()
		b.closeSummaryPart(stored)
	}
	it := b.resp.Output[r.at]
	it.Status = status
	b.resp.Output[r.at] = it
	b.emit("response.output_item.done", map[string]any{"output_index": r.at, "item": it})
	r.open = false
}

func lastSummaryIs(it item, text string) bool {
	s := *it.Summary
	return len(s) > 0 && s[len(s)-1].Text == text
}

// endAnswer ends one answer of the turn (its stored message m): its
// reasoning item, then its message item; the next answer's reasoning has
// an item of its own.
func (b *builder) endAnswer(m api.Message) {
	b.seq = m.Seq
	b.closeReasoning(m.Thinking, messageStatus(m))
	b.reasoning.told = false
	if m.Content != "" || b.has {
		b.closeText(m.Content, messageStatus(m))
	}
}
