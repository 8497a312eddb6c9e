package window

// Kept is a chat's unfolded messages as the arithmetic reads them. Each
// message is estimated once, when it comes, and the totals move as
// messages come and fold away: a long chat is planned on every model call,
// and re-estimating what it already holds would make each call cost as
// much as the whole chat.
type Kept struct {
	msgs                 []Msg
	tokens, conservative int
	// bytes and most are the totals of msgBytes and mostCost, for
	// NoFold.
	bytes, most int
	// folds counts DropBefore's: messages only ever come at the end in
	// between, so what an assembly read of them is still there.
	folds int
	asm   keptAssembly
	// scanned is the last Plan's scan, on its Stale (scanFrom).
	scanned      *scan
	scannedStale int
	scannedFolds int
}

// keptAssembly is the last Assemble's output and what it was made of.
type keptAssembly struct {
	out             []Msg
	folds           int
	firstKept       int64
	start           int // keptIndex of firstKept
	cutChars, stale int
	summary, digest string
	next            resume
}

// Append adds messages at the end, estimating any whose estimates are not
// cached yet.
func (k *Kept) Append(ms ...Msg) {
	for _, m := range ms {
		if m.Tokens <= 0 {
			m.Tokens = EstimateMsg(m)
		}
		if m.Conservative <= 0 {
			m.Conservative = conservative(&m)
		}
		k.tokens += m.Tokens
		k.conservative += m.Conservative
		k.bytes += msgBytes(&m)
		k.most += mostCost(&m)
		k.msgs = append(k.msgs, m)
	}
}

// DropBefore folds away the messages before seq.
func (k *Kept) DropBefore(seq int64) {
	n := 0
	for ; n < len(k.msgs) && k.msgs[n].Seq < seq; n++ {
		k.tokens -= k.msgs[n].Tokens
		k.conservative -= k.msgs[n].Conservative
		k.bytes -= msgBytes(&k.msgs[n])
		k.most -= mostCost(&k.msgs[n])
	}
	if n > 0 {
		// A new array: the folded messages' texts are freed with it.
		k.msgs = append([]Msg(nil), k.msgs[n:]...)
		k.folds++
	}
}

// Plan is Plan of the kept messages (in.Msgs is ignored): its scan goes
// on from the last one's (scan.scanFrom), so it reads only the newest
// exchanges' messages.
func (k *Kept) Plan(in PlanInput) PlanResult {
	in.Msgs = k.msgs
	return planOn(in, k)
}

// scan is the kept messages' scan on stale, gone on from the last one.
func (k *Kept) scan(stale int) *scan {
	at := 0
	if k.scanned == nil {
		k.scanned = &scan{}
	} else if k.scannedFolds == k.folds && k.scannedStale == stale {
		at = k.scanned.next
	}
	k.scanned.scanFrom(k.msgs, stale, at)
	k.scannedStale, k.scannedFolds = stale, k.folds
	return k.scanned
}

// Assemble is AssembleInto of the kept messages on plan, after the
// summary: a chat's next request is its last one's and what came since,
// so an assembly goes on from where the last one's output stopped
// changing (assembleFrom) and reads only the newest exchanges. It returns
// the messages to send, valid until the next Assemble, and how many of
// their first ones are the last Assemble's, unchanged.
func (k *Kept) Assemble(plan PlanResult, summary, digest string) (sent []Msg, reused int) {
	a := &k.asm
	at, start := a.next, keptIndex(k.msgs, plan.FirstKept)
	if a.folds != k.folds || a.firstKept != plan.FirstKept || a.start != start || a.cutChars != plan.CutChars || a.stale != plan.Stale ||
		a.summary != summary || a.digest != digest {
		at = resume{}
	}
	in := AssembleInput{Msgs: k.msgs, Plan: plan, Summary: summary, Digest: digest}
	out, next := assembleFrom(a.out, k.msgs[start:], in, at)
	*a = keptAssembly{out: out, folds: k.folds, firstKept: plan.FirstKept, start: start, cutChars: plan.CutChars, stale: plan.Stale,
		summary: summary, digest: digest, next: next}
	return out, at.out
}

// Msgs are the kept messages with their estimates cached; read-only.
func (k *Kept) Msgs() []Msg { return k.msgs }

// Tokens is EstimateMsgs of the kept messages.
func (k *Kept) Tokens() int { return k.tokens }

// Conservative is ConservativeTokens of the kept messages.
func (k *Kept) Conservative() int { return k.conservative }

// NoFold reports, from the totals alone, that Plan of the kept messages
// on b would not fold: they start with a person's message and stay under
// every trigger even if every long tool result went as its stub and every
// call's result were missing. False says only that Plan may fold. A check
// after each turn then costs nothing while a chat is far from a fold.
func (k *Kept) NoFold(b Budget, cal Calibration, summaryTokens int, early float64) bool {
	if len(k.msgs) == 0 {
		return true
	}
	maxMsgs, maxBytes := MaxMessages, MaxBytes
	if early > 0 && early < 1 {
		maxMsgs, maxBytes = int(early*MaxMessages), int(early*MaxBytes)
	}
	return k.msgs[0].Role == User && len(k.msgs) <= maxMsgs && k.bytes <= maxBytes &&
		cal.Estimate(b.System+b.Tools+summaryTokens+k.most) <= b.Limit()
}

// mostCost is the most m can cost in a plan (scanMsgs): its own estimate
// or its stub's, whichever is more, and a missing result for every call.
func mostCost(m *Msg) int {
	n := cachedTokens(m)
	if isStale(m) {
		n = max(n, EstimateMsg(stub(*m)))
	}
	for _, c := range m.ToolCalls {
		n += EstimateMsg(Msg{Role: Tool, ToolName: c.Name, Text: missingResult})
	}
	return n
}
