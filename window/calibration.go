package window

import "math"

// Calibration anchors a chat's estimates on what its provider really counted.
// Each request's estimate is the input count reported for the previous
// request plus the estimate of what was appended since, times Factor. Factor
// is only ever raised: some providers (Ollama) report only what they did not
// cache, so a low report proves nothing, while a high one proves the
// estimator undercounts this chat's content.
//
// The zero value is ready: no report yet, so Estimate keeps NoReportHeadroom.
// A Calibration belongs to one chat on one model; on a model switch call
// Unanchor, since the last report was counted by another tokenizer.
type Calibration struct {
	Factor       float64 `json:"factor"`        // >= 1 once used; 0 reads as 1
	LastReported int     `json:"last_reported"` // real input tokens of the last request, 0 = none
	LastEstimate int     `json:"last_estimate"` // raw estimate of that same request
}

// NoReportHeadroom multiplies estimates until the provider has reported a
// count: the raw estimate is up to about 25% low for some languages and
// tokenizers (German on llama3, see BENCHMARKS.md, "Token estimate").
const NoReportHeadroom = 1.2

// MaxFactor bounds Factor, so one nonsense report cannot make every later
// request fold everything.
const MaxFactor = 4.0

// factor returns the effective factor.
func (c Calibration) factor() float64 {
	if c.Factor < 1 {
		return 1
	}
	return c.Factor
}

// Estimate returns the anchored estimate of a request whose raw estimate
// (EstimateText and EstimateMsgs of everything sent, system prompt and
// tools included) is raw. It is monotone in raw.
func (c Calibration) Estimate(raw int) int {
	f := c.factor()
	if c.LastReported <= 0 {
		return ceil(float64(raw) * f * NoReportHeadroom)
	}
	if raw >= c.LastEstimate {
		return c.LastReported + ceil(float64(raw-c.LastEstimate)*f)
	}
	// The request shrank (a fold, a stub): nothing says which part went, so
	// take the lower of two upper bounds.
	return min(c.LastReported, ceil(float64(raw)*f))
}

// Observe records the provider's real input count for a request whose raw
// estimate was estimateSent, raising Factor if the report exceeds it. A
// report under half the estimate is taken as a partial count (cached tokens
// left out) and ignored.
func (c *Calibration) Observe(estimateSent, reported int) {
	if estimateSent <= 0 || reported <= 0 || 2*reported < estimateSent {
		return
	}
	r := float64(reported) / float64(estimateSent)
	c.Factor = math.Min(MaxFactor, math.Max(c.factor(), r))
	c.LastReported, c.LastEstimate = reported, estimateSent
}

// Unanchor forgets the last report but keeps Factor: for a new model, whose
// tokenizer counts the same text differently.
func (c *Calibration) Unanchor() {
	c.LastReported, c.LastEstimate = 0, 0
}

func ceil(x float64) int { return int(math.Ceil(x - 1e-9)) }
