package session

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"sync"

	"github.com/agentd/agentd/chat"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/slicepool"
	"github.com/agentd/agentd/tools"
	"github.com/agentd/agentd/window"
)

// softFold is the share of the budget past which a fold runs in the
// background after a turn, so the next turn rarely waits for one.
const softFold = 0.85

// estimate is what a built request is expected to cost.
type estimate struct {
	raw, total int
	budget     window.Budget
	plan       window.PlanResult
	lean       bool
}

func (s *session) calibration() window.Calibration {
	return window.Calibration{Factor: s.snap.Factor, LastReported: s.snap.LastReported, LastEstimate: s.snap.LastEstimate}
}

// calibrate anchors later estimates on what the provider counted.
func (s *session) calibrate(rawSent, reported int) {
	c := s.calibration()
	c.Observe(rawSent, reported)
	s.snap.Factor, s.snap.LastReported, s.snap.LastEstimate = c.Factor, c.LastReported, c.LastEstimate
	s.snap.ReportRequest(reported)
}

// view is the unfolded messages as the arithmetic reads them, each one
// converted and estimated once: built on first use, kept up to date as
// messages come and fold, dropped while the chat is idle.
func (s *session) view() *window.Kept {
	if s.win == nil {
		s.win = &window.Kept{}
		s.win.Append(s.toWindow(s.msgs)...)
	}
	return s.win
}

// toWindow converts stored messages for the arithmetic. A tool result over
// the per-result limit goes to the model as head and tail with the call
// that returns it whole; the stored message keeps everything.
func (s *session) toWindow(ms []chat.Message) []window.Msg {
	out := make([]window.Msg, len(ms))
	for i, m := range ms {
		text := m.Content
		if m.Role == chat.RoleTool && len(text) > s.deps.ToolResultBytes {
			text = tools.HeadTail(text, s.deps.ToolResultBytes, tools.RecoveryPointer(m.Seq))
		}
		// An attachment reaches the model as its note, never its content.
		for _, a := range m.Attachments {
			text += "\n\n" + a.Note
		}
		wm := window.Msg{Seq: m.Seq, Role: window.Role(m.Role), Text: text, Thinking: m.Thinking,
			ToolCallID: m.ToolCallID, ToolName: m.ToolName, IsError: m.IsError, Images: len(m.Images), Refused: m.Refused, Bytes: len(m.Content) + len(m.Thinking)}
		for _, c := range m.ToolCalls {
			// Oversize arguments were refused unread; the model is not sent
			// them again, only their head and why.
			args := tools.ShortArguments(c.Arguments, s.deps.ToolArgBytes)
			wm.ToolCalls = append(wm.ToolCalls, window.ToolCall{ID: c.ID, Name: c.Name, Arguments: args})
		}
		out[i] = wm
	}
	return out
}

// planned is one planned request: its prompt, tools and transcript on a
// window, before the in-turn safety net.
type planned struct {
	estimate
	msgs []window.Msg
	// conservative is ConservativeTokens of msgs, for the in-turn trigger.
	conservative int
	system       string
	specs        []chat.ToolSpec
}

// summaryEstimate is the summary block's estimate, kept until a fold
// changes the summary.
type summaryEstimate struct {
	summary, digest string
	tokens          int
}

// planFor plans the next request on info's window; harder halves the
// transcript budget (the retry after a refusal for length).
func (s *session) planFor(info providers.ModelInfo, harder bool, su setup) *planned {
	p := s.frameFor(info, harder, su)
	p.estimate = s.planMsgs(p.msgs, p.budget, p.lean)
	return p
}

// frameFor is the next request on info's window before its plan: prompt,
// tools, budget and the kept messages.
func (s *session) frameFor(info providers.ModelInfo, harder bool, su setup) *planned {
	lean := s.isLean(info, su)
	system, specs, specsTokens := s.systemAndTools(lean, info.Vision, requestRoom(info, su), su)
	if info.ToolsInWords {
		// The list in words is the prompt's own: it stays as short as lean's.
		system += "\n\n" + wordsToolPrompt(specs)
	}
	b := window.NewBudget(info.Window, textTokens(system), specsTokens)
	if t, working := su.threshold(info.Window); t > 0 {
		b = b.Within(t)
		if working {
			b.Stale = window.WorkingStale
		}
	}
	if harder {
		b.Transcript /= 2
	}
	v := s.view()
	return &planned{estimate: estimate{budget: b, lean: lean}, msgs: v.Msgs(), conservative: v.Conservative(), system: system, specs: specs}
}

func (s *session) planMsgs(msgs []window.Msg, b window.Budget, lean bool) estimate {
	return s.planEarly(msgs, b, lean, 0)
}

// planEarly plans with the message and byte triggers at early of their
// limits (window.PlanInput.Early).
// The view's own messages are planned by the view, which reads only what
// came since its last plan (window.Kept.Plan).
func (s *session) planEarly(msgs []window.Msg, b window.Budget, lean bool, early float64) estimate {
	in := window.PlanInput{Msgs: msgs, Budget: b, Calibration: s.calibration(), Summary: s.snap.Summary, Digest: s.snap.Digest,
		SummaryTokens: s.summaryTokens(), Early: early, Cuts: &s.cuts}
	var plan window.PlanResult
	if v := s.win; v != nil && sameSlice(msgs, v.Msgs()) {
		plan = v.Plan(in)
	} else {
		plan = window.Plan(in)
	}
	return estimate{raw: plan.Raw, total: plan.Estimate, budget: b, plan: plan, lean: lean}
}

// sameSlice: a and b are one slice of one array.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// summaryTokens is window.SummaryTokens of the chat's summary, kept until a
// fold changes it.
func (s *session) summaryTokens() int {
	if e := &s.summaryEst; e.summary != s.snap.Summary || e.digest != s.snap.Digest || e.tokens == 0 {
		*e = summaryEstimate{summary: s.snap.Summary, digest: s.snap.Digest, tokens: window.SummaryTokens(s.snap.Summary, s.snap.Digest)}
	}
	return s.summaryEst.tokens
}

func toolTokens(specs []chat.ToolSpec) int {
	n := 0
	for _, sp := range specs {
		n += specTokens(sp)
	}
	return n
}

// Estimates of the texts every request of many chats carries (system
// prompts, tool schemas) are kept by content, shared by all chats: a
// model call would otherwise re-estimate kilobytes it estimated before.
// Past the bounds a cache starts again.
const (
	maxCachedTexts = 256
	maxCachedSpecs = 8192
)

var (
	estimatesMu sync.Mutex
	textCache   = map[string]int{}
	specCache   = map[string][]specEstimate{} // by tool name
	specsCached int
)

type specEstimate struct {
	spec   chat.ToolSpec
	tokens int
}

// textTokens is window.EstimateText(text), kept for texts seen before.
func textTokens(text string) int {
	estimatesMu.Lock()
	n, ok := textCache[text]
	estimatesMu.Unlock()
	if ok {
		return n
	}
	n = window.EstimateText(text)
	estimatesMu.Lock()
	if len(textCache) >= maxCachedTexts {
		clear(textCache)
	}
	textCache[text] = n
	estimatesMu.Unlock()
	return n
}

// specTokens is what one tool costs to send, kept for tools seen before.
func specTokens(sp chat.ToolSpec) int {
	estimatesMu.Lock()
	for _, e := range specCache[sp.Name] {
		if e.spec.Description == sp.Description && bytes.Equal(e.spec.Parameters, sp.Parameters) {
			estimatesMu.Unlock()
			return e.tokens
		}
	}
	estimatesMu.Unlock()
	n := 8 + window.EstimateText(sp.Name) + window.EstimateText(sp.Description) + window.EstimateText(string(sp.Parameters))
	estimatesMu.Lock()
	if specsCached >= maxCachedSpecs {
		clear(specCache)
		specsCached = 0
	}
	specCache[sp.Name] = append(specCache[sp.Name], specEstimate{spec: sp, tokens: n})
	specsCached++
	estimatesMu.Unlock()
	return n
}

// foldNeeded returns the seq the chat must fold up to before t's planned
// request fits (0: none). A heal folds everything before the turn.
func (s *session) foldNeeded(t *turn) int64 {
	if t.heal.harder() && s.snap.FirstKeptSeq < t.userSeq {
		return t.userSeq
	}
	if p := t.plan.plan; p.Fold && p.FirstKept > s.snap.FirstKeptSeq {
		return p.FirstKept
	}
	return 0
}

// buildRequest assembles the request of the running turn from its plan.
// Under the in-turn safety net the compacted messages are planned anew:
// they are another transcript.
func (s *session) buildRequest(t *turn) (providers.Request, estimate) {
	p := t.plan
	est := p.estimate
	var msgs []chat.Message
	if live, ok := s.compactLive(t, p); ok {
		est = s.planMsgs(live, p.budget, p.lean)
		sent := window.AssembleInto(assembled.Get(0), window.AssembleInput{Msgs: live, Plan: est.plan, Summary: s.snap.Summary, Digest: s.snap.Digest})
		msgs = s.fromWindow(sent)
		assembled.Put(sent)
	} else {
		msgs = s.keptRequest(est.plan)
	}
	room := est.budget.Answer
	if t.maxTokens > 0 {
		room = t.maxTokens
	}
	t.maxTokens = room
	// The chat's own cap bounds the answer when it is no more than the
	// room: a length stop is then the client's cut, not agentd's.
	m := t.setup.settings.MaxOutputTokens
	t.capped = m != nil && *m <= room
	if t.capped {
		room = *m
	}
	model := t.ref[len(t.info.Provider)+1:]
	req := providers.Request{
		Model: model, System: p.system, Messages: s.sendable(msgs), Tools: p.specs,
		MaxTokens: room, NumCtx: t.info.Window, EstimatedInput: est.total, MaxAnswerBytes: s.deps.MaxAnswerBytes,
		Settings: t.setup.settings, CacheKey: s.id,
	}
	if t.info.ToolsInWords {
		req.Messages, req.Tools = inWords(req.Messages), nil
	}
	return req, est
}

// keptRequest is the kept messages assembled on plan, as sent: their
// assembly goes on from the last one's (window.Kept.Assemble), and so does
// its conversion when the last one converted was that assembly.
func (s *session) keptRequest(plan window.PlanResult) []chat.Message {
	v := s.view()
	sent, reused := v.Assemble(plan, s.snap.Summary, s.snap.Digest)
	if s.sent.of != v {
		reused = 0
	}
	msgs := s.fromWindowKnown(sent, reused)
	s.sent.of = v
	return msgs
}

// assembled pools the arrays requests not of the kept messages are
// assembled in: an assembly is converted to chat messages (fromWindow)
// before its call returns.
var assembled slicepool.Pool[window.Msg]

// sentForm is the last request's messages as sent, kept so the next
// request converts only what is new: between folds and stubs, a chat's
// request is its last one's messages and a few more.
type sentForm struct {
	msgs []chat.Message // with room to grow; requests hold it capped
	// of is the view whose last Assemble msgs converts (nil: another
	// assembly): the messages that assembly reused convert as before.
	of *window.Kept
	// runsFree leading messages of msgs hold no two person's messages in
	// a row (sendable).
	runsFree int
}

// sendable is msgs, the last request's messages (s.sent), with runs of
// person's messages merged (mergeUserRuns), looked for only past the
// messages the last request's look found none in.
func (s *session) sendable(msgs []chat.Message) []chat.Message {
	out := mergeUserRunsAfter(msgs, s.sent.runsFree)
	if len(out) == len(msgs) { // no run: msgs itself
		s.sent.runsFree = len(msgs)
	}
	return out
}

// fromWindow turns assembled messages back into chat messages, keeping what
// the arithmetic does not carry (pictures, thinking signatures) from the
// stored originals. When sent starts with every message of the last
// request, unchanged, the last request's slice is extended (else its
// unchanged first messages are copied into a new one): it grows only
// past what any request handed out holds (each is capped at its length, so
// no holder's append lands in it either), so none of them changes.
func (s *session) fromWindow(sent []window.Msg) []chat.Message { return s.fromWindowKnown(sent, 0) }

// fromWindowKnown is fromWindow of sent whose first known messages are
// known to be the last request's: they are not read again.
func (s *session) fromWindowKnown(sent []window.Msg, known int) []chat.Message {
	prev := s.sent.msgs
	k := min(known, len(sent), len(prev))
	for k < len(sent) && k < len(prev) && sameSent(&sent[k], &prev[k]) {
		k++
	}
	out := prev
	if k < len(prev) {
		// A message the last request sent changed (a result gone stale): a
		// new array, its unchanged messages copied, not converted again,
		// with room for the turns until the next change.
		out = append(make([]chat.Message, 0, len(sent)+len(sent)/4), prev[:k]...)
	}
	// s.msgs runs in seq order, one message a seq, and so mostly does sent:
	// the first new message is searched for, the next ones walked to.
	at := 0
	if k < len(sent) {
		at, _ = slices.BinarySearchFunc(s.msgs, sent[k].Seq, bySeq)
	}
	for _, w := range sent[k:] {
		var m chat.Message
		if at < len(s.msgs) && s.msgs[at].Seq > w.Seq {
			at, _ = slices.BinarySearchFunc(s.msgs, w.Seq, bySeq)
		}
		for at < len(s.msgs) && s.msgs[at].Seq < w.Seq {
			at++
		}
		if at < len(s.msgs) && s.msgs[at].Seq == w.Seq && s.msgs[at].Role == chat.Role(w.Role) {
			m = s.msgs[at]
		}
		m.Seq, m.Role, m.Content = w.Seq, chat.Role(w.Role), w.Text
		m.ToolCallID, m.ToolName, m.IsError = w.ToolCallID, w.ToolName, w.IsError
		m.ToolCalls = sentCalls(m.ToolCalls, w.ToolCalls)
		out = append(out, m)
	}
	s.sent = sentForm{msgs: out, runsFree: min(s.sent.runsFree, k)}
	return out[:len(out):len(out)]
}

func bySeq(m chat.Message, seq int64) int { return cmp.Compare(m.Seq, seq) }

// sameSent: m is what w converts to (a seq names one stored message, and
// the rest is w's).
func sameSent(w *window.Msg, m *chat.Message) bool {
	return m.Seq == w.Seq && m.Role == chat.Role(w.Role) && m.Content == w.Text && m.ToolCallID == w.ToolCallID &&
		m.ToolName == w.ToolName && m.IsError == w.IsError &&
		slices.EqualFunc(w.ToolCalls, m.ToolCalls, func(a window.ToolCall, b chat.ToolCall) bool {
			return a.ID == b.ID && a.Name == b.Name && a.Arguments == b.Arguments
		})
}

// sentCalls is stored with the arguments the window sends (shortened where
// they were oversize), without touching the stored slice.
func sentCalls(stored []chat.ToolCall, sent []window.ToolCall) []chat.ToolCall {
	if len(stored) != len(sent) {
		return stored
	}
	var out []chat.ToolCall
	for i, c := range stored {
		if c.Arguments == sent[i].Arguments {
			continue
		}
		if out == nil {
			out = slices.Clone(stored)
		}
		out[i].Arguments = sent[i].Arguments
	}
	if out == nil {
		return stored
	}
	return out
}

// contextView reports what the model is sent now.
func (s *session) contextView() *chat.ContextView {
	v := &chat.ContextView{Model: s.snap.Model, FirstKeptSeq: s.snap.FirstKeptSeq, Summary: s.snap.Summary,
		SummaryModel: s.snap.SummaryModel, Digest: s.snap.Digest, LoadedTools: append([]string{}, s.snap.LoadedTools...),
		RecentRequests: append([]chat.RequestLog{}, s.snap.Requests...), LastSeq: s.lastSeq, StubbedSeqs: []int64{}}
	v.Factor = max(s.snap.Factor, 1)
	_, info, err := s.deps.Catalog.Resolve(s.snap.Model)
	if err != nil {
		return v
	}
	su := s.currentSetup()
	est := s.planFor(info, false, su)
	v.InstructionsVersion, v.InstructionsTokens = su.version, windowTokens(su.instructions)
	if w := instructionsWarning(su, info.Window); w != "" && est.lean {
		v.Warnings = append(v.Warnings, w)
	}
	v.Window, v.WindowSource, v.Lean, v.Estimate = info.Window, info.WindowSource, est.lean, est.total
	v.Budget = chat.Budget{Window: est.budget.Window, AnswerRoom: est.budget.Answer, System: est.budget.System, Tools: est.budget.Tools, Transcript: est.budget.Transcript}
	v.StubbedSeqs = append(v.StubbedSeqs, est.plan.Stubbed...)
	return v
}

// specJSON renders tool specs for find_tools' answer.
func specJSON(specs []chat.ToolSpec) string {
	b, _ := json.MarshalIndent(specs, "", " ")
	return string(b)
}

// mergeUserRuns joins person's messages that follow each other (a turn cut
// short by a crash or a provider fault leaves one unanswered): some servers'
// chat templates refuse two user turns in a row. Only the request changes.
// A request without such a run, nearly every one, is msgs itself: no copy.
func mergeUserRuns(msgs []chat.Message) []chat.Message { return mergeUserRunsAfter(msgs, 0) }

// mergeUserRunsAfter is mergeUserRuns of msgs whose first free messages
// hold no run: it looks for one only past them.
func mergeUserRunsAfter(msgs []chat.Message, free int) []chat.Message {
	run := max(1, free) // the first message of the first run's second half
	for run < len(msgs) && (msgs[run].Role != chat.RoleUser || msgs[run-1].Role != chat.RoleUser) {
		run++
	}
	if run >= len(msgs) {
		return msgs
	}
	out := make([]chat.Message, run, len(msgs)-1)
	copy(out, msgs[:run])
	for _, m := range msgs[run:] {
		if n := len(out); n > 0 && m.Role == chat.RoleUser && out[n-1].Role == chat.RoleUser {
			prev := out[n-1]
			prev.Content += "\n\n" + m.Content
			prev.Images = append(append([]chat.Image(nil), prev.Images...), m.Images...)
			prev.Seq = m.Seq
			out[n-1] = prev
			continue
		}
		out = append(out, m)
	}
	return out
}
