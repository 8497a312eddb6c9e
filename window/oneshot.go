package window

// Sizing of the one-shot requests agentd makes besides turns: a summary, a
// learning piece, a turn's condensed state. Each goes to its own model with
// its own answer room, and is estimated the way a turn is before the
// provider has reported a count: raw estimate × the chat's Factor ×
// NoReportHeadroom.

// OneShotAnswer is the answer room of a one-shot request that wants want
// tokens on a window: at most a quarter of the window, so a small model still
// has room to read.
func OneShotAnswer(window, want int) int {
	return max(min(want, window/4), 64)
}

// InputRoom is the most raw-estimated tokens a one-shot request may send on
// window with answer tokens of answer room: its corrected estimate plus the
// answer stays within the usable 90% of the window. 0: nothing fits.
func InputRoom(window, answer int, c Calibration) int {
	usable := window*9/10 - answer
	if usable <= 0 {
		return 0
	}
	return int(float64(usable) / (c.factor() * NoReportHeadroom))
}

// OneShotEstimate is the corrected estimate of a one-shot request whose raw
// estimate is raw: what the provider is expected to count.
func OneShotEstimate(raw int, c Calibration) int {
	return ceil(float64(raw) * c.factor() * NoReportHeadroom)
}
