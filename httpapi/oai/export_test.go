package oai

// KindPause is the tenant record kind of the pause index, for tests that
// look at the store.
const KindPause = kindPause

// ReasoningBreak is what Chat Completions streams as reasoning_content
// where a reasoning was cut and asked again.
const ReasoningBreak = reasoningBreak

// AnswerBreak is what both surfaces stream as text where an answer was
// taken back and asked again (message.reset).
const AnswerBreak = answerBreak
