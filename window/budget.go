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

// WorkingShare: a chat held to the daemon's default compact_threshold is
// held to 1/WorkingShare of a window too small for that threshold to bite.
// Half an 8K window sends 19% fewer tokens than the whole of it for the same
// facts carried, and leaves a summarising request that repeats the chat's
// prefix room for its answer (BENCHMARKS.md, "A working size for small
// windows").
const WorkingShare = 2

// WorkingSize is the most a request of a chat that sets no
// compact_threshold holds: the daemon's threshold, or 1/WorkingShare of the
// window when that is less.
func WorkingSize(window, threshold int) int {
	return min(threshold, window/WorkingShare)
}

// Limit is the most the whole request (system prompt, tools and transcript)
// may be estimated at.
func (b Budget) Limit() int { return b.System + b.Tools + b.Transcript }
