// Package window fits a chat into its model's context window: it estimates
// tokens without a tokenizer, anchors the estimate on what the provider
// reported, works out the budget, plans which whole turns to fold and
// assembles the request that is sent (summary in front, stale tool results
// stubbed). It is pure arithmetic: no I/O, no clock, no imports of ours, so
// the session actor can call it on every turn and tests can drive it freely.
package window
