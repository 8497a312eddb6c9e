package oai

// KindPause is the tenant record kind of the pause index, for tests that
// look at the store.
const KindPause = kindPause

// ReasoningBreak is what Chat Completions streams as reasoning_content
// where a reasoning was cut and asked again.
const ReasoningBreak = reasoningBreak
