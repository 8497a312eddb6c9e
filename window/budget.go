package window

// Budget splits a model's window between the parts of a request. All fields
// are tokens; the API shows them as they are.
type Budget struct {
	Window int `json:"window"` // the model's context window
	Usable int `json:"usable"` // 90% of it: the estimate is an estimate
	// Answer is the room kept for the reply: 15% of the window between
	// MinAnswer and MaxAnswer. Send it as max_tokens.
	Answer     int `json:"answer"`
	System     int `json:"system"`     // the real system prompt being sent
	Tools      int `json:"tools"`      // the real tool list being sent
	Transcript int `json:"transcript"` // what is left for messages, at most MaxTranscript
	// Stale is how many of the newest exchanges keep their big tool
	// results whole (0: StaleExchanges). It is fold policy, not a share of
	// the window: the API does not show it.
	Stale int `json:"-"`
}

// Budget limits.
const (
	MinAnswer     = 1 << 10  // 1K
	MaxAnswer     = 16 << 10 // 16K
	MaxTranscript = 100_000  // every token is sent, and paid for, every turn
)

// NewBudget returns the budget for a window given the estimated tokens of
// the system prompt and the tool list. A transcript budget that would be
// negative is 0: the request cannot fit, and Plan says so.
func NewBudget(window, systemTokens, toolTokens int) Budget {
	b := Budget{Window: window, System: systemTokens, Tools: toolTokens}
	b.Usable = window * 9 / 10
	b.Answer = min(max(window*15/100, MinAnswer), MaxAnswer)
	b.Transcript = min(max(b.Usable-b.Answer-systemTokens-toolTokens, 0), MaxTranscript)
	return b
}

// Within lowers the transcript's share so the whole request stays within
// total tokens (a chat's compact_threshold); a total above the budget's own
// limit changes nothing.
func (b Budget) Within(total int) Budget {
	b.Transcript = max(min(b.Transcript, total-b.System-b.Tools), 0)
	return b
}

// A chat held to the daemon's default compact_threshold is held to
// WorkingPercent of a window too small for that threshold to bite, and its
// big tool results ride whole for WorkingStale exchanges: on 8K that sends
// 0.58x the summarization peer's input instead of 0.73x for the same facts
// carried, a fold's summarising request (which repeats the chat's prefix)
// keeps room for its answer, and a big result is stubbed rather than folded
// away with the turns around it (BENCHMARKS.md, "A working size for small
// windows").
const (
	WorkingPercent = 60
	WorkingStale   = 1
)

// WorkingSize is the most a request of a chat that sets no
// compact_threshold holds on a window: the daemon's threshold, or
// WorkingPercent of the window when that is less (working then says so).
func WorkingSize(window, threshold int) (size int, working bool) {
	if w := window * WorkingPercent / 100; w < threshold {
		return w, true
	}
	return threshold, false
}

// Limit is the most the whole request (system prompt, tools and transcript)
// may be estimated at.
func (b Budget) Limit() int { return b.System + b.Tools + b.Transcript }
