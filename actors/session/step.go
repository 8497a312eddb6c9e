package session

import "github.com/agentd/agentd/chat"

// A turn is a state machine. Its state is a phase (what it waits for) and
// how far it healed; next decides, from that state and the facts of the
// planned request or of the model's reply, what the turn does next. next is
// pure: the session gathers the facts, acts on the step and moves the phase.

// phase is what a turn waits for.
type phase uint8

const (
	phasePreparing  phase = iota // deciding the next step
	phaseFolding                 // a fold of the chat, before the request fits
	phasePreloading              // the tool index: tools the person's message names
	phaseCondensing              // the summariser: the running turn's state
	phaseCalling                 // the model's answer
	phaseBackoff                 // the retry timer after a passing fault
	phaseTools                   // the round of tool calls agentd runs
	phasePaused                  // the application's results of its own tools
)

var phaseNames = [...]string{"preparing", "folding", "preloading", "condensing", "calling", "backoff", "tools", "paused"}

func (p phase) String() string { return phaseNames[p] }

// healing is how far a turn healed a refusal for length: at most once, by
// giving the answer less room or by halving the transcript's budget; the
// heal is announced with the next answer.
type healing uint8

const (
	notHealed     healing = iota
	healingRoom           // refused; the answer gets less room
	healingHarder         // refused; the transcript budget is halved
	healedRoom            // the answer after healingRoom came
	healedHarder          // the answer after healingHarder came
)

func (h healing) healed() bool  { return h != notHealed }
func (h healing) harder() bool  { return h == healingHarder || h == healedHarder }
func (h healing) pending() bool { return h == healingRoom || h == healingHarder }

// answered is the heal once an answer came.
func (h healing) answered() healing {
	switch h {
	case healingRoom:
		return healedRoom
	case healingHarder:
		return healedHarder
	}
	return h
}

// turnState is what next reads of a turn.
type turnState struct {
	phase     phase
	heal      healing
	preloaded bool // the person's message was matched against the tool index
	rounds    int  // model calls this turn
	continues int  // continuations of answers cut by their room
	cutCalls  int  // replies with a tool call agentd's answer room cut
	// awaiting are the calls of the last reply the application runs, not
	// yet answered.
	awaiting []chat.ToolCall
}

// foldStatus is the chat's fold in flight, as a turn sees it.
type foldStatus uint8

const (
	foldNone    foldStatus = iota
	foldRunning            // the turn can wait for it
	foldApplied            // its boundary moved already; its summary is to come
)

// facts are what next reads besides the turn: the planned request before a
// call, the reply after one.
type facts struct {
	// Before a call.
	foldTo     int64 // the seq the chat must fold up to first; 0: it fits
	fold       foldStatus
	lean       bool
	canPreload bool // a tool index runs
	condense   bool // the running turn passes the in-turn trigger and grew since its state

	// After a call.
	calls       int  // tool calls the model asked for (turnState.awaiting: of them, the application's)
	lengthStop  bool // the answer was cut by its room
	capped      bool // that room was the chat's settings.max_output_tokens
	cutCall     bool // the length stop came in a call's arguments: they are not whole JSON
	contextFull bool // the input already fills the window
	refused     bool // the provider refused the answer, or its content filter cut it
}

// step is what a turn does next.
type step uint8

const (
	stepFold          step = iota + 1 // fold the chat up to facts.foldTo, then prepare again
	stepAwaitFold                     // wait for the fold in flight, then prepare again
	stepPreload                       // load the tools the person's message names, then prepare again
	stepCondense                      // condense the running turn's state, then prepare again
	stepCall                          // call the model with the planned request
	stepRunTools                      // run the model's tool calls, then prepare again
	stepPause                         // wait for the application's results of its tool calls
	stepContinue                      // ask for the rest of an answer cut by agentd's room (not the chat's cap)
	stepTooManyRounds                 // end the turn: the model keeps asking for tools
	stepCutAgain                      // end the turn: agentd's answer room cut a tool call a second time
	stepFinish                        // end the turn with the answer
)

var stepNames = [...]string{"", "fold", "await-fold", "preload", "condense", "call", "run-tools", "pause", "continue", "too-many-rounds", "cut-again", "finish"}

func (s step) String() string { return stepNames[s] }

// next decides a turn's next step. While the turn is calling, the facts
// are the model's reply; otherwise they are the planned request, and a
// turn with calls the application has not answered pauses.
func next(ts turnState, f facts) step {
	if ts.phase == phaseCalling {
		return afterReply(ts, f)
	}
	switch {
	case len(ts.awaiting) > 0:
		return stepPause
	case f.foldTo > 0 && f.fold == foldNone:
		return stepFold
	case f.foldTo > 0 && f.fold == foldApplied:
		// The fold in flight already moved its boundary and this one is
		// still needed: go on; the next turn folds further.
		return stepCall
	case f.foldTo > 0:
		return stepAwaitFold
	case f.lean && !ts.preloaded && f.canPreload:
		return stepPreload
	case f.condense:
		return stepCondense
	}
	return stepCall
}

func afterReply(ts turnState, f facts) step {
	switch {
	case f.refused:
		// No call of a refused answer is run, nor the answer continued:
		// the next request leaves the refused exchange out (window.Assemble).
		return stepFinish
	case f.cutCall && f.capped:
		// The client's own cap stopped the model inside a call: it asked
		// for no more, and a half-written call can be neither run nor
		// handed to the application.
		return stepFinish
	case f.cutCall && ts.cutCalls > 0:
		// The room a first cut grew did not hold the call either: asking
		// again the same way would only cut it again, up to maxToolRounds.
		return stepCutAgain
	case f.calls > 0 && ts.rounds >= maxToolRounds:
		return stepTooManyRounds
	case f.calls > len(ts.awaiting):
		// agentd runs its own calls first; then the turn pauses if the
		// application has calls to run.
		return stepRunTools
	case f.calls > 0:
		return stepPause
	case f.lengthStop && f.capped:
		// The client's own cap cut the answer: it asked for no more.
		return stepFinish
	case f.lengthStop && !f.contextFull && ts.continues < maxContinues:
		return stepContinue
	}
	return stepFinish
}
