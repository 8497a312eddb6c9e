package window

import (
	"slices"
	"unicode/utf8"
)

// Fold triggers besides the budget: a chat with very many or very large
// messages folds even when its estimate fits, and then keeps half of each.
const (
	MaxMessages = 600
	MaxBytes    = 8 << 20
)

// FoldKeep is the share of the transcript budget a fold keeps (1/FoldKeep):
// half, so the turns just before a fold stay word for word (a third saved
// 6% of the tokens on 32K but dropped them on a switch to a small model;
// BENCHMARKS.md, issue 20).
const FoldKeep = 2

// SummaryMaxTokens caps the room a fold reserves for the new summary; the
// summariser should write less (Plan returns the room in SummaryTokens).
const SummaryMaxTokens = 2000

// Reasons a plan folds.
const (
	ReasonBudget   = "budget"   // the estimate passed the budget
	ReasonMessages = "messages" // more than MaxMessages messages
	ReasonBytes    = "bytes"    // more than MaxBytes stored
	ReasonStart    = "start"    // what was kept did not start with a person's message
)

// PlanInput is a chat as it stands before a request.
type PlanInput struct {
	// Msgs are the chat's unfolded messages, from the current first kept seq
	// on, in seq order. They are read, never changed.
	Msgs        []Msg
	Budget      Budget
	Calibration Calibration
	Summary     string // the current summary, which rides in front
	Digest      string // optional digest riding after it
	// SummaryTokens is SummaryTokens(Summary, Digest) when the caller
	// keeps it (the summary changes only at a fold); 0 computes it.
	SummaryTokens int
	// Early, below 1, fires the message and byte triggers at that share of
	// their limits (the caller lowers the budget itself): a fold planned
	// in the background after a turn then runs before the next turn would
	// have to wait for one. 0 is 1.
	Early float64
	// Cuts, when set, remembers the last cut found for texts too long to
	// keep whole (see CutMemo). Optional.
	Cuts *CutMemo
}

// CutMemo remembers a chat's last cut. A chat plans one turn several times
// (each model call, the prefix a fold reuses, the check after it), and
// finding how much of a pasted 200 KB text fits estimates tens of
// kilobytes of it a few times over. The zero value is ready; it serves one
// chat, one plan at a time.
type CutMemo struct {
	msgs             []cutKey
	base, limit      int
	cal              Calibration
	cutChars, rawCut int
}

// cutKey is what a cut depends on of each text it may shorten (its seq
// is in the label that replaces its middle).
type cutKey struct {
	seq  int64
	role Role
	text string
}

// recall returns the cut remembered for these candidates and limits.
func (cm *CutMemo) recall(cands []cutCandidate, base, limit int, cal Calibration) (cutChars, raw int, ok bool) {
	if cm == nil || cm.base != base || cm.limit != limit || cm.cal != cal || len(cm.msgs) != len(cands) {
		return 0, 0, false
	}
	for i, cd := range cands {
		if k := cm.msgs[i]; k.seq != cd.m.Seq || k.role != cd.m.Role || k.text != cd.m.Text { // the same string: its pointer settles it
			return 0, 0, false
		}
	}
	return cm.cutChars, cm.rawCut, true
}

func (cm *CutMemo) keep(cands []cutCandidate, base, limit int, cal Calibration, cutChars, raw int) {
	if cm == nil {
		return
	}
	cm.msgs = cm.msgs[:0]
	for _, cd := range cands {
		cm.msgs = append(cm.msgs, cutKey{cd.m.Seq, cd.m.Role, cd.m.Text})
	}
	cm.base, cm.limit, cm.cal, cm.cutChars, cm.rawCut = base, limit, cal, cutChars, raw
}

// PlanResult says what to keep and what to fold.
type PlanResult struct {
	FirstKept int64 `json:"first_kept"` // seq of the first message sent
	// Fold is set when messages before FirstKept were dropped now; they run
	// from FoldFrom to FoldTo (seqs, inclusive) and should be summarised.
	Fold     bool   `json:"fold"`
	FoldFrom int64  `json:"fold_from,omitempty"`
	FoldTo   int64  `json:"fold_to,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// CutChars, when set, is the most characters a person's or tool's text
	// keeps: the kept turns alone did not fit, so their longest texts lose
	// their middle.
	CutChars int `json:"cut_chars,omitempty"`
	// SummaryTokens is the room counted for the summary block; after a fold
	// it is what the new summary may take.
	SummaryTokens int     `json:"summary_tokens"`
	Stubbed       []int64 `json:"stubbed,omitempty"` // seqs of tool results sent as stubs
	// Stale is the budget's Stale, for Assemble to stub the same results.
	Stale int `json:"stale,omitempty"`
	// Raw is the request's raw estimate (system prompt and tools included):
	// pass it to Calibration.Observe with the provider's count.
	Raw      int  `json:"raw"`
	Estimate int  `json:"estimate"` // Raw anchored by the Calibration
	Fits     bool `json:"fits"`     // Estimate <= Budget.Limit()
}

// boundary is a place a fold may cut: a person's message before which no
// tool call waits for a result that comes after it.
type boundary struct {
	idx          int
	tokens, byts int // totals of the messages before it
}

// scan is one pass over the messages: each one's cost as it will be sent,
// and the boundaries.
type scan struct {
	bounds          []boundary
	tokens, byts    int
	lastUser, stale int
	stubbed         []int
	cutCandidates   []int // person's and tool texts that shortening may touch
	costs           []int
	stubCache       map[stubKey]int
	next            int // where a scan of these messages grown can go on from (scanFrom)
}

// stubKey is all a stub's estimate depends on: the tool's name and the
// widths of the two numbers in it (a digit costs the same whatever it is).
type stubKey struct {
	name               string
	charDigits, seqLen int
}

// stubTokens is EstimateMsg(stub(*m)), cached: a long chat has thousands of
// stale results, and most share a tool name and number widths.
func (sc *scan) stubTokens(m *Msg) int {
	if m.Seq < 0 { // the minus sign is punctuation: estimate it as it is
		return EstimateMsg(stub(*m))
	}
	k := stubKey{m.ToolName, runeCountDigits(m.Text), digits(int(m.Seq))}
	if v, ok := sc.stubCache[k]; ok {
		return v
	}
	if sc.stubCache == nil {
		sc.stubCache = make(map[stubKey]int)
	}
	v := EstimateMsg(stub(*m))
	sc.stubCache[k] = v
	return v
}

// Plan decides which messages the next request keeps. Under every trigger it
// keeps what it has; over one, it drops whole turns from the front until
// what is kept fits 1/FoldKeep of the budget, so folds are rare and the request
// prefix stays the same between them. The turn being answered always stays;
// if it alone is too big, its longest texts are shortened.
func Plan(in PlanInput) PlanResult { return planOn(in, nil) }

// planOn is Plan, its scan kept by k (whose messages in.Msgs are) when k
// is set.
func planOn(in PlanInput, k *Kept) PlanResult {
	ms := in.Msgs
	b, cal := in.Budget, in.Calibration
	fixed := b.System + b.Tools
	sumTokens := in.SummaryTokens
	if sumTokens <= 0 {
		sumTokens = SummaryTokens(in.Summary, in.Digest)
	}
	if len(ms) == 0 {
		raw := fixed
		est := cal.Estimate(raw)
		return PlanResult{Raw: raw, Estimate: est, Fits: est <= b.Limit(), Stale: b.Stale}
	}
	var sc *scan
	if k != nil {
		sc = k.scan(b.Stale)
	} else {
		sc = scanMsgs(ms, b.Stale)
	}
	c0 := 0
	if len(sc.bounds) > 0 {
		c0 = sc.bounds[0].idx
	}
	res := PlanResult{SummaryTokens: sumTokens, Stale: b.Stale}
	keptTok, keptN, keptBytes := sc.kept(c0, len(ms))
	maxMsgs, maxBytes := MaxMessages, MaxBytes
	if in.Early > 0 && in.Early < 1 {
		maxMsgs, maxBytes = int(in.Early*MaxMessages), int(in.Early*MaxBytes)
	}
	switch {
	case cal.Estimate(fixed+sumTokens+keptTok) > b.Limit():
		res.Reason = ReasonBudget
	case keptN > maxMsgs:
		res.Reason = ReasonMessages
	case keptBytes > maxBytes:
		res.Reason = ReasonBytes
	case c0 > 0:
		res.Reason = ReasonStart
	}
	c := c0
	if res.Reason != "" && res.Reason != ReasonStart {
		res.SummaryTokens = max(sumTokens, summaryReserve(b))
		c = sc.foldPoint(cal, fixed+res.SummaryTokens, fixed+b.Transcript/FoldKeep, len(ms))
	}
	res.FirstKept = ms[c].Seq
	if c > 0 {
		res.Fold, res.FoldFrom, res.FoldTo = true, ms[0].Seq, ms[c-1].Seq
	}
	for _, i := range sc.stubbed {
		if i >= c {
			res.Stubbed = append(res.Stubbed, ms[i].Seq)
		}
	}
	keptTok, _, _ = sc.kept(c, len(ms))
	res.Raw = fixed + res.SummaryTokens + keptTok
	res.Estimate = cal.Estimate(res.Raw)
	if res.Estimate > b.Limit() {
		sc.shortenToFit(ms, c, fixed+res.SummaryTokens, cal, b.Limit(), in.Cuts, &res)
	}
	res.Fits = res.Estimate <= b.Limit()
	return res
}

// SummaryTokens is what the summary block costs in front of a message; one
// more token covers rounding where it joins the message's text.
func SummaryTokens(summary, digest string) int {
	f := frame(summary, digest)
	if f == "" {
		return 0
	}
	return EstimateText(f) + 1
}

// summaryReserve is the room a fold keeps for the summary it triggers.
func summaryReserve(b Budget) int {
	return SummaryTokens(summaryNote, "") + min(SummaryMaxTokens, b.Transcript/8)
}

func scanMsgs(ms []Msg, stale int) *scan {
	sc := &scan{}
	sc.scanFrom(ms, stale, 0)
	return sc
}

// scanFrom scans ms from index at on, sc holding the scan of ms[:at] (at
// is 0 or an earlier scan's next). It sets next, the index a scan of ms
// grown by more messages can go on from (resumesAt).
func (sc *scan) scanFrom(ms []Msg, stale, at int) {
	sc.tokens, sc.byts, sc.lastUser, sc.next = 0, 0, -1, 0
	b := len(sc.bounds)
	for b > 0 && sc.bounds[b-1].idx >= at {
		b--
	}
	if at > 0 {
		bd := sc.bounds[b] // at opens a boundary
		sc.tokens, sc.byts = bd.tokens, bd.byts
	}
	// Room for a boundary at every other message: growing the list message
	// by message was a tenth of a plan.
	sc.bounds = slices.Grow(sc.bounds[:b], (len(ms)-at)/2+1)
	sc.stubbed = truncateFrom(sc.stubbed, at)
	sc.cutCandidates = truncateFrom(sc.cutCandidates, at)
	sc.costs = slices.Grow(sc.costs[:at], len(ms)-at)[:len(ms)]
	sc.stale = staleBefore(ms, stale)
	rest := ms[at:]
	p := pairer{ms: rest}
	claimed := make([]bool, len(rest))
	blockedUntil, missing := -1, false // the latest result of a call seen so far; a call without one
	for i := at; i < len(ms); i++ {
		m := &ms[i]
		if resumesAt(i, sc.stale, blockedUntil, missing) {
			sc.next = i
		}
		if m.Role == User {
			sc.lastUser = i
			if blockedUntil < i {
				sc.bounds = append(sc.bounds, boundary{idx: i, tokens: sc.tokens, byts: sc.byts})
			}
		}
		cost := 0
		switch {
		case i < sc.stale && isStale(m):
			cost = sc.stubTokens(m)
			sc.stubbed = append(sc.stubbed, i)
		default:
			cost = cachedTokens(m)
			if (m.Role == User || m.Role == Tool) && len(m.ToolCalls) == 0 {
				sc.cutCandidates = append(sc.cutCandidates, i)
			}
		}
		for _, c := range m.ToolCalls {
			j := p.result(i-at, c.ID)
			if j < 0 || claimed[j] {
				missing = true
				cost += EstimateMsg(Msg{Role: Tool, ToolName: c.Name, Text: missingResult})
				continue
			}
			claimed[j] = true
			blockedUntil = max(blockedUntil, at+j)
		}
		sc.costs[i] = cost
		sc.tokens += cost
		sc.byts += msgBytes(m)
	}
}

// resumesAt reports whether a scan or an assembly of kept messages, grown
// by more, can go on from index i: the person's message that opens the
// newest stale exchanges (stale), when every call before it found its
// result before it (latest: the latest of those results; missing: one
// found none). Nothing later messages bring changes what is before it.
func resumesAt(i, stale, latest int, missing bool) bool {
	return i == stale && i > 0 && latest < i && !missing
}

// truncateFrom drops the indexes from at on of an ascending list.
func truncateFrom(idx []int, at int) []int {
	n := len(idx)
	for n > 0 && idx[n-1] >= at {
		n--
	}
	return idx[:n]
}

// kept returns the tokens, count and bytes of the messages from index c on.
func (sc *scan) kept(c, n int) (tokens, count, byts int) {
	for _, bd := range sc.bounds {
		if bd.idx == c {
			return sc.tokens - bd.tokens, n - c, sc.byts - bd.byts
		}
	}
	return sc.tokens, n, sc.byts // c is 0 and no boundary: everything
}

// foldPoint returns the first boundary at which what is kept fits keepLimit
// and half of each other trigger, never past the turn being answered.
func (sc *scan) foldPoint(cal Calibration, fixed, keepLimit, n int) int {
	best := 0
	for _, bd := range sc.bounds {
		if bd.idx > sc.lastUser {
			break
		}
		best = bd.idx
		tok, cnt, byts := sc.tokens-bd.tokens, n-bd.idx, sc.byts-bd.byts
		if cal.Estimate(fixed+tok) <= keepLimit && cnt <= MaxMessages/2 && byts <= MaxBytes/2 {
			break
		}
	}
	return best
}

// shortenToFit finds the largest CutChars at which the kept messages fit the
// limit, by bisection over the length of the longest candidate text.
//
// Each try estimates every shortened text again, tens of kilobytes when a
// pasted log outgrows the window, so the bisection starts at a guess: each
// text's cost is taken to grow in proportion to what it keeps, between its
// cost at minCutChars and whole. The guess is checked, its bracket widened
// until it holds the answer, and the search ends where plain bisection does.
func (sc *scan) shortenToFit(ms []Msg, c, fixed int, cal Calibration, limit int, memo *CutMemo, res *PlanResult) {
	var cands []cutCandidate
	longest, rest := 0, sc.tokens
	for _, bd := range sc.bounds {
		if bd.idx == c {
			rest -= bd.tokens
		}
	}
	for _, i := range sc.cutCandidates {
		if i < c {
			continue
		}
		rest -= sc.costs[i]
		cands = append(cands, cutCandidate{m: &ms[i], whole: sc.costs[i]})
	}
	if len(cands) == 0 {
		return
	}
	if cut, raw, ok := memo.recall(cands, fixed+rest, limit, cal); ok {
		res.CutChars, res.Raw, res.Estimate = cut, raw, cal.Estimate(raw)
		return
	}
	for k := range cands {
		cd := &cands[k]
		if cd.runes = len(cd.m.Text); cd.runes > minCutChars {
			cd.runes = utf8.RuneCountInString(cd.m.Text)
		}
		longest = max(longest, cd.runes)
	}
	if longest <= minCutChars {
		return
	}
	defer func() { memo.keep(cands, fixed+rest, limit, cal, res.CutChars, res.Raw) }()
	rawAt := func(limitChars int, keep bool) int {
		t := rest
		for k := range cands {
			cd := &cands[k]
			m := cutMiddleOf(*cd.m, limitChars, cd.runes)
			cost := cachedTokens(&m)
			if keep {
				cd.atMin = cost
			}
			t += cost
		}
		return fixed + t
	}
	fits := func(raw int) bool { return cal.Estimate(raw) <= limit }
	lo, hi := minCutChars, longest // lo: candidate answer; hi: known too big
	loRaw := rawAt(lo, true)
	if !fits(loRaw) {
		res.CutChars, res.Raw = lo, loRaw
		res.Estimate = cal.Estimate(res.Raw)
		return
	}
	done := func() bool { return hi-lo <= max(16, lo/64) }
	try := func(at int) bool {
		raw := rawAt(at, false)
		if fits(raw) {
			lo, loRaw = at, raw
			return true
		}
		hi = at
		return false
	}
	if g := guessCut(cands, fixed+rest, cal, limit, lo, hi); g > lo && g < hi && !done() {
		step := max(16, g/64)
		if try(g) {
			for !done() && try(min(lo+step, hi-1)) {
				step *= 2
			}
		} else {
			for !done() && !try(max(hi-step, lo+1)) {
				step *= 2
			}
		}
	}
	for !done() {
		try(lo + (hi-lo)/2)
	}
	res.CutChars, res.Raw = lo, loRaw
	res.Estimate = cal.Estimate(res.Raw)
}

// cutCandidate is a text a plan may shorten: its length in runes and its
// cost whole and at minCutChars.
type cutCandidate struct {
	m                   *Msg
	runes, whole, atMin int
}

// guessCut is the largest limit in (lo, hi) at which the candidates fit if
// each one's cost grows linearly from its cost at lo to its cost whole;
// lo when none does. It reads no text.
func guessCut(cands []cutCandidate, base int, cal Calibration, limit, lo, hi int) int {
	from := lo
	rawAt := func(at int) int {
		t := base
		for _, cd := range cands {
			switch {
			case at >= cd.runes:
				t += cd.whole
			case cd.runes <= from:
				t += cd.atMin
			default:
				t += cd.atMin + int(int64(max(cd.whole-cd.atMin, 0))*int64(at-from)/int64(cd.runes-from))
			}
		}
		return t
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if cal.Estimate(rawAt(mid)) <= limit {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
